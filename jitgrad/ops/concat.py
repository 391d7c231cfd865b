"""Joining tensors: cat (concatenate) along an existing dim, stack along a new one."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..amp.autocast_mode import autocast_op
from ..creation import zeros
from ..devices import row_major
from ..shapes import fmt_shape, wrap_dim
from ..tensor import Tensor
from .api import api
from .dispatch import as_tensor_arg, call
from .indexing import narrow, select
from .registry import MOVEMENT, defop

__all__ = ["cat", "concatenate", "stack"]


def _cat_vjp(g, ins, out, p, n):
    d = p["dim"]
    res = []
    start = 0
    for size, need in zip(p["sizes"], n):
        if size is None:  # a skipped 1-D empty input: an empty gradient
            res.append(zeros(0, dtype=g.dtype, device=g.device) if need else None)
            continue
        res.append(narrow(g, d, start, size) if need else None)
        start += size
    return tuple(res)


def _cat_ref(*arrs, dim, sizes):
    # (row-major, as PyTorch's: NumPy concatenates F-ordered inputs in F order)
    return row_major(np.concatenate([a for a, s in zip(arrs, sizes) if s is not None],
                                    axis=dim))


CAT = defop(name="cat", kind=MOVEMENT, inputs=("*tensors",), params=("dim", "sizes"),
            node="CatBackward0", ref=_cat_ref, vjp=_cat_vjp)
def _stack_ref(*arrs, dim, sizes):
    """``np.stack(arrs, axis=dim)`` for arrays of one shape (``stack`` checked them): its
    concatenation of ``a[..., None, ...]`` views, without its per-call checks."""
    at = (slice(None),) * (dim if dim >= 0 else dim + arrs[0].ndim + 1) + (None,)
    return row_major(np.concatenate([a[at] for a in arrs], axis=dim))


STACK = defop(name="stack", kind=MOVEMENT, inputs=("*tensors",), params=("dim", "sizes"),
              node="StackBackward0", ref=_stack_ref,
              vjp=lambda g, ins, out, p, n: tuple(select(g, p["dim"], i) if need else None
                                                  for i, need in enumerate(n)))


def _seq_tensors(tensors, name):
    if isinstance(tensors, Tensor):
        raise TypeError(f"{name}(): argument 'tensors' must be tuple of Tensors, not Tensor")
    ts = list(tensors)
    if not ts:  # (PyTorch's two messages and types)
        if name == "cat":
            raise ValueError("torch.cat(): expected a non-empty list of Tensors")
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return [t if type(t) is Tensor else as_tensor_arg(t, "tensors") for t in ts]


def _common_dtype(ts):
    dt = ts[0]._data.dtype
    for t in ts:
        if t._data.dtype != dt:
            break
    else:  # one dtype: the result's (nothing to promote)
        return ts
    d = dtypes.result_type(*ts)
    return [t if t._data.dtype == d.np else t.to(d) for t in ts]


@api(CAT, export=("cat", "concatenate"))
@autocast_op
def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate along an existing dim.

    As in PyTorch, 1-D empty tensors (shape ``(0,)``) are skipped by the shape checks and
    the concatenation, but take part in dtype promotion and ``requires_grad`` (their
    gradient is empty)."""
    ts = _seq_tensors(tensors, "cat")
    keep = []
    for i, t in enumerate(ts):
        a = t._data
        if a.ndim == 0:
            raise RuntimeError(
                f"zero-dimensional tensor (at position {i}) cannot be concatenated"
            )
        if not (a.ndim == 1 and a.size == 0):
            keep.append(i)
    keep = keep or list(range(len(ts)))
    ref = ts[keep[0]]._data
    d = wrap_dim(dim, ref.ndim)
    rs = ref.shape
    for i in keep[1:]:
        s = ts[i]._data.shape
        if len(s) == len(rs) and s[:d] == rs[:d] and s[d + 1:] == rs[d + 1:]:  # (they match)
            continue
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
    if len(keep) == len(ts):
        sizes = tuple([t._data.shape[d] for t in ts])
    else:
        kept = set(keep)
        sizes = tuple(t._data.shape[d] if i in kept else None for i, t in enumerate(ts))
    return call(CAT, tuple(ts), {"dim": d, "sizes": sizes})


concatenate = cat


@api(STACK, export="stack")
@autocast_op
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
