"""Shared argument handling of the losses: PyTorch's ``reduction`` (and the legacy
``size_average``/``reduce`` flags) and the broadcasting warning of element-wise losses."""

from __future__ import annotations

import warnings

import numpy as np

from ...devices import array_namespace
from ...shapes import broadcast_sizes
from ...tensor import Tensor

__all__ = ["reduction_arg", "broadcast_pair", "reduce_loss", "grad_scale"]

_REDUCTIONS = ("none", "mean", "sum")


def reduction_arg(size_average, reduce, reduction: str) -> str:
    """The effective reduction, with PyTorch's legacy-flag rules and error."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def broadcast_pair(input: Tensor, target: Tensor) -> tuple:
    """``(input, target)`` broadcast to one shape, warning as PyTorch does when they differ."""
    si, st = input._data.shape, target._data.shape
    if si == st:
        return input, target
    warnings.warn(
        f"Using a target size (jitgrad.Size({list(st)})) that is different to the input size "
        f"(jitgrad.Size({list(si)})). This will likely lead to incorrect results due to "
        "broadcasting. Please ensure they have the same size.", UserWarning, stacklevel=3)
    shape = broadcast_sizes(si, st)
    return input.expand(*shape), target.expand(*shape)


def reduce_loss(loss: np.ndarray, reduction: str, dtype) -> np.ndarray:
    """NumPy: reduce element losses (accumulated in float64) to ``dtype`` (on ``loss``'s
    device)."""
    xp = array_namespace(loss)
    if reduction == "none":
        return xp.asarray(loss, dtype=dtype)
    with np.errstate(invalid="ignore"):
        r = np.sum(loss, dtype=np.float64)
        if reduction == "mean":
            r = r / loss.size if loss.size else np.nan
    return xp.asarray(r, dtype=dtype)


def grad_scale(g: Tensor, reduction: str, shape) -> Tensor:
    """The incoming loss gradient broadcast to the element losses' ``shape`` (divided by
    their count for ``mean``)."""
    if reduction == "none":
        return g
    if reduction == "mean":
        g = g / float(max(int(np.prod(shape, dtype=np.int64)), 1))
    return g.expand(*shape)
