"""Loss ops with their own backward node (named as PyTorch's), in numerically stable forms."""

from __future__ import annotations

import math

import numpy as np

from ..amp.autocast_mode import autocast_op
from ..devices import array_namespace
from ..kernels.parallel import PARALLEL_MIN_SIZE
from ..kernels.pool import run_parts, run_sized
from ..shapes import fmt_shape
from ..tensor import Tensor
from .api import api
from .dispatch import as_tensor_arg
from .eager_kernels import use_kernels
from .registry import REDUCE, defop

__all__ = ["binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits_backward"]

_REDUCTIONS = ("none", "mean", "sum")


def _softplus_neg(x):
    """``log(1 + exp(-x))`` without overflow."""
    return np.maximum(-x, 0) + np.log1p(np.exp(-np.abs(x)))


def _bce_logits_ref(x, y, weight=None, pos_weight=None, *, reduction="mean"):
    sp = _softplus_neg(x)
    if pos_weight is None:
        loss = (1 - y) * x + sp
    else:
        loss = (1 - y) * x + (1 + (pos_weight - 1) * y) * sp
    if weight is not None:
        loss = loss * weight
    if reduction == "mean":
        return array_namespace(x).asarray(np.mean(loss), dtype=x.dtype)
    if reduction == "sum":
        return array_namespace(x).asarray(np.sum(loss), dtype=x.dtype)
    return loss.astype(x.dtype, copy=False)


def _kernel_operands(x, y, w, pw):
    """Flat contiguous operands for the fused kernels (weights broadcast to x's shape)."""
    shape = x.shape

    def flat(a):
        if a is None:
            return None
        if a.shape != shape:
            a = np.broadcast_to(a, shape)
        return np.ascontiguousarray(a).reshape(-1)

    return flat(x), flat(y), flat(w), flat(pw)


def _kernels():
    from ..kernels import losses

    return losses


def _use_kernel(x, y) -> bool:
    """Whether the fused CPU kernels take ``x`` and ``y`` (host float arrays; CUDA arrays
    take the NumPy formulation)."""
    return type(x) is np.ndarray and x.dtype in (np.float32, np.float64) and \
        x.dtype == y.dtype and x.size > 0 and use_kernels()


def _bce_logits_eager(x, y, w, pw, reduction, shape):
    if not _use_kernel(x, y):
        return _bce_logits_ref(x, y, w, pw, reduction=reduction)
    k = _kernels()
    fx, fy, fw, fpw = _kernel_operands(x, y, w, pw)
    if reduction == "none":
        out = np.empty(x.size, x.dtype)
        k.bce_logits_none(fx, fy, fw, fpw, out)
        return out.reshape(shape)
    # float64 partial sums of fixed chunks, added correctly rounded (fsum): the same bits on
    # one thread or several
    parts = k.sum_chunks(x.size)
    partial = np.empty(parts, np.float64)
    args = (fx, fy, fw, fpw, partial)
    if x.size >= PARALLEL_MIN_SIZE:
        run_parts(k.bce_logits_sum, parts, args)
    else:
        k.bce_logits_sum(0, parts, *args)
    total = partial[0] if parts == 1 else math.fsum(partial.tolist())
    if reduction == "mean":
        total /= x.size
    return np.asarray(total, dtype=x.dtype)


def _bce_grad_ref(g, x, y, w, pw, reduction, shape):
    s = 1.0 / (1.0 + np.exp(-x))
    d = s - y if pw is None else (1 + (pw - 1) * y) * s - pw * y
    if reduction == "mean":
        g = g / max(x.size, 1)
    d = d * g
    if w is not None:
        d = d * w
    return array_namespace(x).asarray(d, dtype=x.dtype)


def _bce_grad_eager(g, x, y, w, pw, reduction, shape):
    if not _use_kernel(x, y) or g.dtype != x.dtype:
        return _bce_grad_ref(g, x, y, w, pw, reduction, shape)
    k = _kernels()
    fx, fy, fw, fpw = _kernel_operands(x, y, w, pw)
    if reduction == "none":
        fg = np.ascontiguousarray(g).reshape(-1)
    else:
        fg = g.reshape(()).item() / (x.size if reduction == "mean" else 1)
        fg = x.dtype.type(fg)
    out = np.empty(x.size, x.dtype)
    args = (fx, fy, fw, fpw, fg, out)
    run_sized(k.bce_logits_grad, x.size, x.size, args)  # parts: elements
    return out.reshape(shape)


def _expanded_grad(g, p):
    red, shape = p["reduction"], p["shape"]
    if red == "mean":
        return (g / float(max(int(np.prod(shape)), 1))).expand(shape)
    if red == "sum":
        return g.expand(shape)
    return g


def _bce_grad_vjp(gg, ins, out, p, n):
    """Double backward of the fused gradient op (written with jitgrad ops)."""
    from .elementwise import sigmoid

    g, x, y, w, pw = ins
    ge = _expanded_grad(g, p)
    s = sigmoid(x)
    lw = 1.0 if pw is None else 1.0 + (pw - 1.0) * y
    res = [None] * 5
    if n[0]:  # d/dg: the first-order gradient without g, reduced like g
        d = s - y if pw is None else lw * s - pw * y
        d = gg * d if w is None else gg * d * w
        red = p["reduction"]
        res[0] = d if red == "none" else (d.sum() / float(
            max(int(np.prod(p["shape"])), 1)) if red == "mean" else d.sum())
    gw = gg * ge if w is None else gg * ge * w
    if n[1]:
        res[1] = gw * lw * s * (1.0 - s)
    if n[2]:
        res[2] = -gw if pw is None else gw * ((pw - 1.0) * s - pw)
    if n[3]:
        d = s - y if pw is None else lw * s - pw * y
        res[3] = gg * ge * d
    if n[4]:
        res[4] = gw * y * (s - 1.0)
    return tuple(res)


BCE_LOGITS_BACKWARD = defop(
    name="binary_cross_entropy_with_logits_backward", kind=REDUCE,
    inputs=("grad", "input", "target", "weight", "pos_weight"), params=("reduction", "shape"),
    node="BinaryCrossEntropyWithLogitsBackwardBackward0", ref=_bce_grad_ref,
    fwd=_bce_grad_eager, vjp=_bce_grad_vjp, save=(0, 1, 2, 3, 4), cast_grads=True,
)


@api(BCE_LOGITS_BACKWARD)
def binary_cross_entropy_with_logits_backward(grad: Tensor, input: Tensor, target: Tensor,
                                              weight: Tensor | None,
                                              pos_weight: Tensor | None, reduction: str,
                                              shape: tuple) -> Tensor:
    """Input gradient of :func:`binary_cross_entropy_with_logits` for the output gradient
    ``grad`` (one fused op)."""
    return _call_optional(BCE_LOGITS_BACKWARD, [grad, input, target, weight, pos_weight],
                          {"reduction": reduction, "shape": shape})


def _bce_logits_vjp(g, ins, out, p, n):
    from .elementwise import exp, log1p

    x, y, w, pw = ins
    gx = gy = gw = gpw = None
    if n[0]:
        gx = binary_cross_entropy_with_logits_backward(g, x, y, w, pw, p["reduction"],
                                                       p["shape"])
    g = _expanded_grad(g, p)
    if n[1] or n[2] or n[3]:
        sp = (-x).relu() + log1p(exp(-x.abs()))  # softplus(-x)
        if n[1]:
            gy = -x if pw is None else -x + (pw - 1.0) * sp
            gy = gy * g if w is None else gy * (g * w)
        if n[2]:
            lp = (1.0 - y) * x + (sp if pw is None else (1.0 + (pw - 1.0) * y) * sp)
            gw = lp * g
        if n[3]:
            gpw = y * sp * g if w is None else y * sp * g * w
    return gx, gy, gw, gpw


BCE_WITH_LOGITS = defop(
    name="binary_cross_entropy_with_logits", kind=REDUCE,
    inputs=("input", "target", "weight", "pos_weight"), params=("reduction", "shape"),
    node="BinaryCrossEntropyWithLogitsBackward0",
    ref=lambda x, y, w, pw, reduction, shape: _bce_logits_ref(x, y, w, pw, reduction=reduction),
    fwd=_bce_logits_eager, vjp=_bce_logits_vjp, save=(0, 1, 2, 3), cast_grads=True,
)


@api(BCE_WITH_LOGITS)
@autocast_op
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Sigmoid + binary cross-entropy in one numerically stable op.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.binary_cross_entropy_with_logits(jitgrad.zeros(3), jitgrad.ones(3))
    tensor(0.6931)
    """
    if size_average is not None or reduce is not None:
        reduction = "mean" if (size_average is None or size_average) and (
            reduce is None or reduce) else ("sum" if reduce is None or reduce else "none")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    input = as_tensor_arg(input, "input")
    target = as_tensor_arg(target, "target")
    if target._data.shape != input._data.shape:
        raise ValueError(
            f"Target size (jitgrad.Size({fmt_shape(target._data.shape)})) must be the same as "
            f"input size (jitgrad.Size({fmt_shape(input._data.shape)}))"
        )
    dt = input.dtype
    if not dt.is_floating_point:
        raise RuntimeError(f"binary_cross_entropy_with_logits: input must be floating point, "
                           f"got {dt.name}")
    args = [input, target.to(dt)]
    for name, t in (("weight", weight), ("pos_weight", pos_weight)):
        if t is None:
            args.append(None)
            continue
        t = as_tensor_arg(t, name).to(dt)
        try:
            np.broadcast_shapes(t._data.shape, input._data.shape)
        except ValueError:
            raise RuntimeError(
                f"binary_cross_entropy_with_logits: {name} of shape {fmt_shape(t._data.shape)} "
                f"cannot be broadcast to input shape {fmt_shape(input._data.shape)}"
            ) from None
        args.append(t)
    return _call_optional(BCE_WITH_LOGITS, args,
                          {"reduction": reduction, "shape": input._data.shape})


def _call_optional(op, args, params):
    """Like :func:`call`, for ops whose optional tensor inputs may be None."""
    from ..tensor import wrap
    from .dispatch import record

    arrays = [None if t is None else t._data for t in args]
    out = wrap((op.fwd or op.ref)(*arrays, **params))
    return record(op, out, tuple(args), params)

