"""Element-wise losses: ``mse_loss`` and ``binary_cross_entropy`` as ops with PyTorch's nodes
(and fused, double-differentiable backward ops), ``l1_loss`` composite (as PyTorch builds
it), and the existing ``binary_cross_entropy_with_logits``."""

from __future__ import annotations

import numpy as np

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
           "binary_cross_entropy_backward"]


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
    return np.asarray(scale * g * (x - y), dtype=x.dtype)


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


def _float_pair(input, target, name):
    input = as_tensor_arg(input, "input")
    target = as_tensor_arg(target, "target")
    if input._data.dtype.kind != "f":
        raise RuntimeError(f"{name}: expected a floating-point input, got {input.dtype.name}")
    return input, target.to(input.dtype)


@api(MSE_LOSS)
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
    input, target = broadcast_pair(*_float_pair(input, target, "mse_loss"))
    return _call_optional(MSE_LOSS, [input, target], {"reduction": reduction})


@api(ABS, MEAN, SUM)
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
    input, target = broadcast_pair(*_float_pair(input, target, "l1_loss"))
    loss = (input - target).abs()
    if reduction == "none":
        return loss
    return loss.mean() if reduction == "mean" else loss.sum()


# ---------------------------------------------------------------------------------- BCE
_LOG_MIN = -100.0  # PyTorch clamps the logs, so 0 and 1 probabilities give finite losses
_EPS = 1e-12


def _bce_ref(x, y, w, reduction):
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
    return np.asarray(d, dtype=x.dtype)


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
    if a.size and not ((a >= 0) & (a <= 1)).all():
        raise RuntimeError("all elements of input should be between 0 and 1")
    if weight is not None:
        weight = as_tensor_arg(weight, "weight").to(input.dtype)
        try:
            np.broadcast_shapes(weight._data.shape, a.shape)
        except ValueError:
            raise RuntimeError(f"binary_cross_entropy: weight of shape "
                               f"{fmt_shape(weight._data.shape)} cannot be broadcast to input "
                               f"shape {fmt_shape(a.shape)}") from None
    return _call_optional(BCE, [input, target, weight], {"reduction": reduction})
