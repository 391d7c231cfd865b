"""Loss ops with their own backward node (named as PyTorch's), in numerically stable forms."""

from __future__ import annotations

import numpy as np

from ..shapes import fmt_shape
from ..tensor import Tensor
from .dispatch import as_tensor_arg
from .registry import REDUCE, defop

__all__ = ["binary_cross_entropy_with_logits"]

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
        return np.asarray(np.mean(loss), dtype=x.dtype)
    if reduction == "sum":
        return np.asarray(np.sum(loss), dtype=x.dtype)
    return loss.astype(x.dtype, copy=False)


def _bce_logits_vjp(g, ins, out, p, n):
    from .elementwise import exp, log1p, sigmoid

    x, y, w, pw = ins
    red = p["reduction"]
    shape = p["shape"]
    if red == "mean":
        g = (g / float(max(int(np.prod(shape)), 1))).expand(shape)
    elif red == "sum":
        g = g.expand(shape)
    gx = gy = gw = gpw = None
    s = sigmoid(x)
    if n[0]:
        if pw is None:
            gx = s - y
        else:
            gx = (pw * y + (1.0 - y)) * s - pw * y
        gx = gx * g if w is None else gx * (g * w)
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
    vjp=_bce_logits_vjp, save=(0, 1, 2, 3), cast_grads=True,
)


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
    out = wrap(op.ref(*arrays, **params))
    return record(op, out, tuple(args), params)

