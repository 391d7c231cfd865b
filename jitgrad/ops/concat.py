"""Joining tensors: cat (concatenate) along an existing dim, stack along a new one."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..shapes import fmt_shape, wrap_dim
from ..tensor import Tensor
from .api import api
from .dispatch import call
from .indexing import narrow, select
from .registry import MOVEMENT, defop

__all__ = ["cat", "concatenate", "stack"]


def _cat_vjp(g, ins, out, p, n):
    d = p["dim"]
    res = []
    start = 0
    for size, need in zip(p["sizes"], n):
        if need:
            res.append(narrow(g, d, start, size))
        else:
            res.append(None)
        start += size
    return tuple(res)


CAT = defop(name="cat", kind=MOVEMENT, inputs=("*tensors",), params=("dim", "sizes"),
            node="CatBackward0", ref=lambda *arrs, dim, sizes: np.concatenate(arrs, axis=dim),
            vjp=_cat_vjp)
STACK = defop(name="stack", kind=MOVEMENT, inputs=("*tensors",), params=("dim", "sizes"),
              node="StackBackward0", ref=lambda *arrs, dim, sizes: np.stack(arrs, axis=dim),
              vjp=lambda g, ins, out, p, n: tuple(select(g, p["dim"], i) if need else None
                                                  for i, need in enumerate(n)))


def _seq_tensors(tensors, name):
    if isinstance(tensors, Tensor):
        raise TypeError(f"{name}(): argument 'tensors' must be tuple of Tensors, not Tensor")
    ts = list(tensors)
    if not ts:
        raise RuntimeError(f"{name}(): expected a non-empty list of Tensors")
    from .dispatch import as_tensor_arg

    return [as_tensor_arg(t, "tensors") for t in ts]


def _common_dtype(ts):
    d = dtypes.result_type(*ts)
    return [t if t._data.dtype == d.np else t.to(d) for t in ts]


@api(CAT, export=("cat", "concatenate"))
def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate along an existing dim."""
    ts = _seq_tensors(tensors, "cat")
    ts = [t for t in ts if not (t._data.ndim == 1 and t._data.size == 0)] or ts[:1]
    ref = ts[0]._data
    if ref.ndim == 0:
        raise RuntimeError(
            "zero-dimensional tensor (at position 0) cannot be concatenated"
        )
    d = wrap_dim(dim, ref.ndim)
    for i, t in enumerate(ts[1:], 1):
        s = t._data.shape
        if len(s) != ref.ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {ref.ndim} and {len(s)}"
            )
        for k in range(ref.ndim):
            if k != d and s[k] != ref.shape[k]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{ref.shape[k]} but got size {s[k]} for tensor number {i} in the list."
                )
    ts = _common_dtype(ts)
    p = {"dim": d, "sizes": tuple(t._data.shape[d] for t in ts)}
    return call(CAT, tuple(ts), p)


concatenate = cat


@api(STACK, export="stack")
def stack(tensors, dim: int = 0) -> Tensor:
    """Stack along a new dim."""
    ts = _seq_tensors(tensors, "stack")
    s0 = ts[0]._data.shape
    for i, t in enumerate(ts[1:], 1):
        if t._data.shape != s0:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {fmt_shape(s0)} at entry 0 "
                f"and {fmt_shape(t._data.shape)} at entry {i}"
            )
    d = wrap_dim(dim, len(s0) + 1)
    ts = _common_dtype(ts)
    return call(STACK, tuple(ts), {"dim": d, "sizes": (1,) * len(ts)})
