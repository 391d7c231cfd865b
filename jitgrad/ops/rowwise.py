"""Eager softmax, log_softmax and logsumexp (and the two backward ops) along one dim, on the
row kernels of :mod:`jitgrad.kernels.softmax` (CUDA arrays: :mod:`jitgrad.cuda.rowwise`).

A kernel computes rows ``[lo, hi)`` of an ``(R, C)`` array; the rows are split over the
threads of :mod:`jitgrad.kernels.pool` from ``PARALLEL_MIN_SIZE`` elements, and from
``HOT_MIN_SIZE`` while the pool's workers spin (``kernels.pool.run_sized``), else the
calling thread runs them all. A row's result does not depend on the split.
"""

from __future__ import annotations

import numpy as np

from ..devices import is_cpu_array
from ..kernels.pool import run_sized
from .eager_kernels import use_kernels

__all__ = ["rowwise", "kernel_ok"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_sm = None


def _softmax_kernels():
    global _sm
    if _sm is None:
        from ..kernels import softmax as mod

        _sm = mod
    return _sm


def rowwise(name: str, arrays: tuple, dim: int, reduce_out: bool = False) -> np.ndarray:
    """Run softmax-family kernel ``name`` along ``dim`` of float arrays of one shape.

    The kernels work on the last axis of ``(R, C)`` arrays; another ``dim`` is moved last
    (one copy) and moved back (one copy: the result is row-major, as PyTorch's).
    ``reduce_out``: the result drops ``dim`` (logsumexp).
    """
    a0 = arrays[0]
    if type(a0) is not np.ndarray:  # CUDA memory: the CUDA row kernels
        from ..cuda.rowwise import rowwise_cuda

        return rowwise_cuda(name, arrays, dim, reduce_out)
    nd = a0.ndim
    last = dim == nd - 1
    if last:
        arrs = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]
    else:
        arrs = [np.ascontiguousarray(np.moveaxis(a, dim, -1)) for a in arrays]
    mshape = arrs[0].shape
    C = mshape[-1]
    R = a0.size // C if C else 0
    two = arrs if nd == 2 else [a.reshape(R, C) for a in arrs]  # (2-D: already (R, C))
    fn = getattr(_softmax_kernels(), name)
    out = np.empty(R if reduce_out else (R, C), a0.dtype)
    run_sized(fn, R, a0.size, (*two, out))  # a row's result does not depend on the split
    if reduce_out:
        return out.reshape(mshape[:-1])
    if nd != 2:
        out = out.reshape(mshape)  # (row-major, as PyTorch's result: a .view() of it works)
    return out if last else np.ascontiguousarray(np.moveaxis(out, -1, dim))


def kernel_ok(a, dim) -> bool:
    """Whether the softmax kernels apply (float32/64 arrays, non-empty, a real dim): host
    arrays run ``kernels/softmax.py``, CUDA arrays ``cuda/rowwise.py``."""
    return (a.dtype == _F32 or a.dtype == _F64) and a.size > 0 and a.ndim > 0 and \
        dim is not None and use_kernels() and (type(a) is np.ndarray or not is_cpu_array(a))
