"""Element-wise losses: ``mse_loss``, ``binary_cross_entropy``, ``smooth_l1_loss`` and
``huber_loss`` as ops with PyTorch's nodes (and fused, double-differentiable backward ops),
``l1_loss`` composite (as PyTorch builds it), and the existing
``binary_cross_entropy_with_logits``."""

from __future__ import annotations

import numpy as np

from ...amp.autocast_mode import autocast_op
from ...devices import array_namespace
from ...dtypes import result_type
from ...shapes import fmt_shape
from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..dispatch import as_tensor_arg
from ..elementwise import ABS, log
from ..losses import _call_optional
from ..reduce import MEAN, SUM
from ..registry import REDUCE, defop
from .reduction import broadcast_pair, grad_scale, reduce_loss, reduction_arg

__all__ = ["mse_loss", "l1_loss", "binary_cross_entropy", "mse_loss_backward",
           "binary_cross_entropy_backward", "smooth_l1_loss", "huber_loss",
           "smooth_l1_loss_backward", "huber_loss_backward"]


def _reduce_like(d: Tensor, reduction: str) -> Tensor:
    """``d`` reduced as a loss gradient's incoming ``g`` was broadcast (adjoint of
    :func:`grad_scale`)."""
    if reduction == "none":
        return d
    s = d.sum()
    return s / float(max(d.numel(), 1)) if reduction == "mean" else s


# --------------------------------------------------------------------------------- MSE
def _mse_ref(x, y, reduction):
    d = x.astype(np.float64) - y
    return reduce_loss(d * d, reduction, x.dtype)


def _mse_grad_ref(g, x, y, reduction):
    scale = 2.0 / max(x.size, 1) if reduction == "mean" else 2.0
    return array_namespace(x).asarray(scale * g * (x - y), dtype=x.dtype)


def _mse_grad_vjp(v, ins, out, p, n):
    g, x, y = ins
    red = p["reduction"]
    dg = _reduce_like(v * (x - y) * 2.0, red) if n[0] else None
    dx = v * grad_scale(g, red, x._data.shape) * 2.0 if (n[1] or n[2]) else None
    return dg, dx if n[1] else None, -dx if n[2] else None


MSE_LOSS_BACKWARD = defop(
    name="mse_loss_backward", kind=REDUCE, node="MseLossBackwardBackward0",
    inputs=("grad", "input", "target"), params=("reduction",), ref=_mse_grad_ref,
    vjp=_mse_grad_vjp, save=(0, 1, 2), cast_grads=True, samples=S.mse_loss_backward)


@api(MSE_LOSS_BACKWARD)
def mse_loss_backward(grad: Tensor, input: Tensor, target: Tensor, reduction: str) -> Tensor:
    """Gradient of :func:`mse_loss` w.r.t. its input."""
    return _call_optional(MSE_LOSS_BACKWARD, [grad, input, target], {"reduction": reduction})


def _mse_vjp(g, ins, out, p, n):
    x, y = ins
    gx = mse_loss_backward(g, x, y, p["reduction"])
    return gx if n[0] else None, -gx if n[1] else None


MSE_LOSS = defop(name="mse_loss", kind=REDUCE, node="MseLossBackward0",
                 inputs=("input", "target"), params=("reduction",), ref=_mse_ref,
                 vjp=_mse_vjp, save=(0, 1), cast_grads=True, samples=S.mse_loss)


def _promoted_pair(input, target) -> tuple:
    """``input`` and ``target`` as tensors in their promoted dtype, as PyTorch's binary ops
    (``mse_loss(int_input, float_target)`` is float, ``(float32, float64)`` float64)."""
    input = as_tensor_arg(input, "input")
    target = as_tensor_arg(target, "target")
    d = result_type(input, target)
    return input.to(d), target.to(d)


def _float_pair(input, target, name):
    input = as_tensor_arg(input, "input")
    target = as_tensor_arg(target, "target")
    if input._data.dtype.kind != "f":
        raise RuntimeError(f"{name}: expected a floating-point input, got {input.dtype.name}")
    return input, target.to(input.dtype)


@api(MSE_LOSS)
@autocast_op
def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
             reduction: str = "mean", weight=None) -> Tensor:
    """Mean squared error ``(input - target) ** 2``, reduced.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.mse_loss(jitgrad.tensor([1.0, 2.0]), jitgrad.tensor([1.0, 4.0]))
    tensor(2.)
    """
    reduction = reduction_arg(size_average, reduce, reduction)
    if weight is not None:
        raise NotImplementedError("mse_loss: weight is not supported by jitgrad")
    input, target = _promoted_pair(input, target)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"mse_cpu" not implemented for '
                                  f"'{input.dtype.tensor_type[:-len('Tensor')]}'")
    input, target = broadcast_pair(input, target)
    return _call_optional(MSE_LOSS, [input, target], {"reduction": reduction})


@api(ABS, MEAN, SUM)
@autocast_op
def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
            reduction: str = "mean", weight=None) -> Tensor:
    """Mean absolute error ``|input - target|``, reduced (composite, as PyTorch).

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.l1_loss(jitgrad.tensor([1.0, 2.0]), jitgrad.tensor([1.0, 4.0]))
    tensor(1.)
    """
    reduction = reduction_arg(size_average, reduce, reduction)
    if weight is not None:
        raise NotImplementedError("l1_loss: weight is not supported by jitgrad")
    # (no promotion first: ``input - target`` promotes, and refuses bools, as PyTorch's)
    input, target = broadcast_pair(as_tensor_arg(input, "input"),
                                   as_tensor_arg(target, "target"))
    loss = (input - target).abs()
    if reduction == "none":
        return loss
    return loss.mean() if reduction == "mean" else loss.sum()


# ---------------------------------------------------------------------------------- BCE
_LOG_MIN = -100.0  # PyTorch clamps the logs, so 0 and 1 probabilities give finite losses
_EPS = 1e-12


def _bce_ref(x, y, w, reduction):
    # (checked here, in the op's forward, so a compiled plan checks every call's input)
    if x.size and not bool(array_namespace(x).all((x >= 0) & (x <= 1))):
        raise RuntimeError("all elements of input should be between 0 and 1")
    x64 = x.astype(np.float64)
    with np.errstate(divide="ignore"):
        lx = np.maximum(np.log(x64), _LOG_MIN)
        l1x = np.maximum(np.log1p(-x64), _LOG_MIN)
    loss = -(y * lx + (1.0 - y) * l1x)
    if w is not None:
        loss = loss * w
    return reduce_loss(loss, reduction, x.dtype)


def _bce_grad_ref(g, x, y, w, reduction):
    x64 = x.astype(np.float64)
    d = g * (x64 - y) / np.maximum((1.0 - x64) * x64, _EPS)
    if w is not None:
        d = d * w
    if reduction == "mean":
        d = d / max(x.size, 1)
    return array_namespace(x).asarray(d, dtype=x.dtype)


def _bce_grad_vjp(v, ins, out, p, n):
    """PyTorch's binary_cross_entropy_double_backward, in jitgrad ops."""
    g, x, y, w = ins
    red = p["reduction"]
    ge = grad_scale(g, red, x._data.shape)
    vw = v if w is None else v * w
    res = [None] * 4
    if n[0]:
        res[0] = _reduce_like(vw * (x - y) / ((x + _EPS) * (1.0 - x + _EPS)), red)
    if n[1]:
        den = (x + _EPS) * (x + _EPS) * ((1.0 - x + _EPS) * (1.0 - x + _EPS))
        res[1] = vw * ge * (x * x - x * y * 2.0 + y) / den
    if n[2]:
        res[2] = -vw * ge / (x * (1.0 - x)).clamp(min=_EPS)
    if n[3]:
        res[3] = v * ge * (x - y) / (x * (1.0 - x)).clamp(min=_EPS)
    return tuple(res)


BCE_BACKWARD = defop(
    name="binary_cross_entropy_backward", kind=REDUCE,
    node="BinaryCrossEntropyBackwardBackward0", inputs=("grad", "input", "target", "weight"),
    params=("reduction",), ref=_bce_grad_ref, vjp=_bce_grad_vjp, save=(0, 1, 2, 3),
    cast_grads=True, samples=S.binary_cross_entropy_backward)


@api(BCE_BACKWARD)
def binary_cross_entropy_backward(grad: Tensor, input: Tensor, target: Tensor, weight,
                                  reduction: str) -> Tensor:
    """Gradient of :func:`binary_cross_entropy` w.r.t. its input."""
    return _call_optional(BCE_BACKWARD, [grad, input, target, weight], {"reduction": reduction})


def _bce_vjp(g, ins, out, p, n):
    x, y, w = ins
    red = p["reduction"]
    gx = binary_cross_entropy_backward(g, x, y, w, red) if n[0] else None
    gy = gw = None
    if n[1] or n[2]:
        ge = grad_scale(g, red, x._data.shape)
        if n[1]:  # PyTorch: -logit(x) * grad * weight
            gy = -(log(x) - log(1.0 - x)) * ge
            gy = gy if w is None else gy * w
        if n[2]:
            gw = -(y * log(x).clamp(min=_LOG_MIN) + (1.0 - y) * log(1.0 - x).clamp(
                min=_LOG_MIN)) * ge
    return gx, gy, gw


BCE = defop(name="binary_cross_entropy", kind=REDUCE, node="BinaryCrossEntropyBackward0",
            inputs=("input", "target", "weight"), params=("reduction",), ref=_bce_ref,
            vjp=_bce_vjp, save=(0, 1, 2), cast_grads=True, samples=S.binary_cross_entropy)


@api(BCE)
@autocast_op
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities ``input`` (logs clamped at -100 as PyTorch).

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.binary_cross_entropy(jitgrad.tensor([0.5, 1.0]), jitgrad.tensor([1.0, 0.0]))
    tensor(50.3466)
    """
    reduction = reduction_arg(size_average, reduce, reduction)
    input, target = _float_pair(input, target, "binary_cross_entropy")
    if target._data.shape != input._data.shape:
        raise ValueError(
            f"Using a target size (jitgrad.Size({list(target._data.shape)})) that is different "
            f"to the input size (jitgrad.Size({list(input._data.shape)})) is deprecated. Please "
            "ensure they have the same size.")
    a = input._data
    if weight is not None:
        weight = as_tensor_arg(weight, "weight").to(input.dtype)
        try:
            np.broadcast_shapes(weight._data.shape, a.shape)
        except ValueError:
            raise RuntimeError(f"binary_cross_entropy: weight of shape "
                               f"{fmt_shape(weight._data.shape)} cannot be broadcast to input "
                               f"shape {fmt_shape(a.shape)}") from None
    return _call_optional(BCE, [input, target, weight], {"reduction": reduction})


# --------------------------------------------------------------- smooth L1 and Huber
# huber(d, delta) = delta * smooth_l1(d, beta=delta): both are ``clip(d, -w, w) * c`` in
# their gradient (w = beta or delta; c = 1 / beta for smooth L1, 1 for Huber) and one pair of
# ops each (PyTorch's nodes), made by one factory.
def _robust_consts(huber: bool, w: float) -> tuple[float, float]:
    return w, (1.0 if huber else 1.0 / w)


def _robust_loss_ops(name: str, node: str, huber: bool, samples, backward_samples):
    """The loss op and its backward op: params ``reduction`` and ``beta`` (Huber's delta)."""
    def ref(x, y, reduction, beta):
        w, c = _robust_consts(huber, beta)
        d = np.abs(x.astype(np.float64) - y)
        return reduce_loss(np.where(d < w, 0.5 * d * d * c, (d - 0.5 * w) * (c * w)),
                           reduction, x.dtype)

    def grad_ref(g, x, y, reduction, beta):
        w, c = _robust_consts(huber, beta)
        scale = c / max(x.size, 1) if reduction == "mean" else c
        d = g * scale * np.clip(x.astype(np.float64) - y, -w, w)
        return array_namespace(x).asarray(d, dtype=x.dtype)

    def grad_vjp(v, ins, out, p, n):
        g, x, y = ins
        red = p["reduction"]
        w, c = _robust_consts(huber, p["beta"])
        d = x - y
        dg = _reduce_like(v * d.clamp(-w, w) * c, red) if n[0] else None
        dx = (v * grad_scale(g, red, x._data.shape) * c).masked_fill(d.abs() >= w, 0.0) \
            if (n[1] or n[2]) else None
        return dg, dx if n[1] else None, -dx if n[2] else None

    backward_op = defop(
        name=f"{name}_backward", kind=REDUCE, node=f"{node}BackwardBackward0",
        inputs=("grad", "input", "target"), params=("reduction", "beta"), ref=grad_ref,
        vjp=grad_vjp, save=(0, 1, 2), cast_grads=True, samples=backward_samples)

    def backward(grad: Tensor, input: Tensor, target: Tensor, reduction: str,
                 beta: float) -> Tensor:
        return _call_optional(backward_op, [grad, input, target],
                              {"reduction": reduction, "beta": beta})

    def vjp(g, ins, out, p, n):
        gx = backward(g, ins[0], ins[1], p["reduction"], p["beta"])
        return gx if n[0] else None, -gx if n[1] else None

    op = defop(name=name, kind=REDUCE, node=f"{node}Backward0", inputs=("input", "target"),
               params=("reduction", "beta"), ref=ref, vjp=vjp, save=(0, 1), cast_grads=True,
               samples=samples)
    return op, backward_op, backward


SMOOTH_L1_LOSS, SMOOTH_L1_LOSS_BACKWARD, smooth_l1_loss_backward = _robust_loss_ops(
    "smooth_l1_loss", "SmoothL1Loss", False, S.robust_loss, S.robust_loss_backward)
HUBER_LOSS, HUBER_LOSS_BACKWARD, huber_loss_backward = _robust_loss_ops(
    "huber_loss", "HuberLoss", True, S.robust_loss, S.robust_loss_backward)
smooth_l1_loss_backward.__doc__ = "Gradient of :func:`smooth_l1_loss` w.r.t. its input."
huber_loss_backward.__doc__ = "Gradient of :func:`huber_loss` w.r.t. its input."
api(SMOOTH_L1_LOSS_BACKWARD)(smooth_l1_loss_backward)
api(HUBER_LOSS_BACKWARD)(huber_loss_backward)


def _robust_pair(input, target, kernel: str):
    input = as_tensor_arg(input, "input")
    target = as_tensor_arg(target, "target")
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{input.dtype.tensor_type[:-len('Tensor')]}'")
    return broadcast_pair(input, target.to(input.dtype))


@api(SMOOTH_L1_LOSS, ABS, MEAN, SUM)
@autocast_op
def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Smooth L1 loss: ``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``
    (``d = input - target``), reduced; ``beta=0`` is :func:`l1_loss`, as in PyTorch.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.smooth_l1_loss(jitgrad.tensor([0.5, 3.0]), jitgrad.zeros(2))
    tensor(1.3125)
    """
    reduction = reduction_arg(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    input, target = _robust_pair(input, target, "smooth_l1_cpu")
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    return _call_optional(SMOOTH_L1_LOSS, [input, target],
                          {"reduction": reduction, "beta": float(beta)})


@api(HUBER_LOSS, MEAN, SUM)
@autocast_op
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """Huber loss: ``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``
    (``d = input - target``), reduced; ``weight`` (the input's shape) scales the element
    losses before the reduction, as in PyTorch.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.huber_loss(jitgrad.tensor([0.5, 3.0]), jitgrad.zeros(2), delta=2.0)
    tensor(1.0625)
    """
    reduction_arg(None, None, reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    input, target = _robust_pair(input, target, "huber_cpu")
    if weight is None:
        return _call_optional(HUBER_LOSS, [input, target],
                              {"reduction": reduction, "beta": float(delta)})
    weight = as_tensor_arg(weight, "weight")
    if weight._data.shape != input._data.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = _call_optional(HUBER_LOSS, [input, target],
                          {"reduction": "none", "beta": float(delta)}) * weight
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()
