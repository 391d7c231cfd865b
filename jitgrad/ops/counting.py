"""Counting and searching, with no gradient (as in PyTorch): ``bincount``, ``histc``,
``searchsorted``, ``bucketize``, ``tril_indices``, ``triu_indices``. Computed by NumPy on
the host and placed on the input's device; their results depend on the data (a result's size
on it, for ``bincount``), so a compiled function calling them runs that part eagerly."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..shapes import fmt_shape
from ..tensor import Tensor, wrap
from .api import api
from .dispatch import as_tensor_arg
from .selection import LT

__all__ = ["bincount", "histc", "searchsorted", "bucketize", "tril_indices", "triu_indices"]


def _on(device, array) -> Tensor:
    """``array`` (host) as a tensor on ``device``."""
    a = np.asarray(array)
    t = wrap(a if a.flags.c_contiguous else np.ascontiguousarray(a))  # (0-d stays 0-d)
    return t if device is None or device.type == "cpu" else t.to(device)


@api(LT, method="bincount", export="bincount")
def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value ``0..max(input)`` occurs in the 1-D non-negative integer
    ``input`` (summed ``weights`` instead of counts when given); at least ``minlength``
    bins."""
    input = as_tensor_arg(input)
    if input.ndim != 1 or input.dtype.is_floating_point or input.dtype.name == "bool":
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    a = input.detach().cpu().numpy()
    if a.size and a.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None:
        weights = as_tensor_arg(weights, "weights")
        if weights.shape != input.shape:
            raise RuntimeError("weights should be 1-d and have the same length as input")
        w = weights.detach().cpu().numpy()
        out_dt = w.dtype if w.dtype.kind == "f" else np.float64
        r = np.bincount(a, weights=w.astype(np.float64), minlength=minlength).astype(out_dt)
    else:
        r = np.bincount(a, minlength=minlength).astype(np.int64)
    return _on(input.device, r)


@api(LT, method="histc", export="histc")
def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """A histogram of ``input`` in ``bins`` equal bins over ``[min, max]`` (both 0: the
    data's range); values outside are left out; the input's dtype."""
    input = as_tensor_arg(input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"histogram_cpu\" not implemented for "
                           f"'{input.dtype.tensor_type.replace('Tensor', '')}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for dim 0")
    a = input.detach().cpu().numpy().reshape(-1).astype(np.float64)
    lo, hi = float(min), float(max)
    if lo == hi and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(f"torch.histc(): max must be larger than min, but got min {lo} "
                           f"max {hi}")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"torch.histc(): range of [{lo}, {hi}] is not finite")
    inside = a[(a >= lo) & (a <= hi)]
    idx = ((inside - lo) * bins / (hi - lo)).astype(np.int64)
    idx[idx == bins] = bins - 1  # the top edge belongs to the last bin
    r = np.bincount(idx, minlength=bins)[:bins].astype(input.dtype.np)
    return _on(input.device, r)


def _side(right: bool, side: str | None) -> str:
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        return side
    return "right" if right else "left"


@api(LT, export="searchsorted")
def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False,
                 right: bool = False, side: str | None = None, sorter=None) -> Tensor:
    """Where each of ``input``'s values would be inserted in ``sorted_sequence`` (sorted
    along its last dim; a batch of sequences matches ``input``'s leading dims) to keep it
    sorted: the first such place, or the last with ``right``."""
    seq = as_tensor_arg(sorted_sequence, "sorted_sequence")
    vals = as_tensor_arg(input, "input")  # (a number: 0-d, and so is the result)
    how = _side(right, side)
    s = seq.detach().cpu().numpy()
    v = vals.detach().cpu().numpy()
    if v.ndim == 0 and s.ndim != 1:
        raise RuntimeError(
            f"torch.searchsorted(): input value can be a scalar only when boundaries tensor "
            f"dimension is 1, but we got boundaries tensor dim({s.ndim}) and input value's "
            f"dim({v.ndim}) numel({v.size})")
    if s.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive "
                           "dimension, but got 0 dimension")
    if sorter is not None:
        s = np.take_along_axis(s, as_tensor_arg(sorter).cpu().numpy(), -1)
    if s.ndim == 1:
        r = np.asarray(np.searchsorted(s, v, side=how))
    else:
        if s.shape[:-1] != v.shape[:-1]:
            raise RuntimeError(
                f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first "
                f"N-1 dimensions of boundaries tensor and input value tensor must match, but "
                f"we got boundaries tensor {fmt_shape(s.shape)} and input value tensor "
                f"{fmt_shape(v.shape)}")
        s2 = s.reshape(-1, s.shape[-1])
        v2 = v.reshape(-1, v.shape[-1])
        r = np.stack([np.searchsorted(s2[i], v2[i], side=how) for i in range(s2.shape[0])]
                     ).reshape(v.shape)
    r = r.astype(np.int32 if out_int32 else np.int64)
    return _on(seq.device, r)


@api(LT, method="bucketize", export="bucketize")
def bucketize(input, boundaries: Tensor, *, out_int32: bool = False,
              right: bool = False) -> Tensor:
    """The bucket of each of ``input``'s values among the 1-D sorted ``boundaries``
    (``searchsorted(boundaries, input)``)."""
    boundaries = as_tensor_arg(boundaries, "boundaries")
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def _indices(fn, row: int, col: int, offset: int, dtype, device) -> Tensor:
    r, c = fn(row, offset, col)
    dt = dtypes.to_dtype(dtype).np if dtype is not None else np.int64
    t = wrap(np.stack([r, c]).astype(dt).reshape(2, -1))
    return t if device is None else t.to(device)


@api(LT, export="tril_indices")
def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None,
                 layout=None) -> Tensor:
    """The (row, column) indices of the lower triangle of a ``row x col`` matrix (from
    diagonal ``offset``), as a ``2 x N`` tensor, row by row."""
    return _indices(np.tril_indices, row, col, offset, dtype, device)


@api(LT, export="triu_indices")
def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None,
                 layout=None) -> Tensor:
    """The (row, column) indices of the upper triangle of a ``row x col`` matrix (from
    diagonal ``offset``), as a ``2 x N`` tensor, row by row."""
    return _indices(np.triu_indices, row, col, offset, dtype, device)

