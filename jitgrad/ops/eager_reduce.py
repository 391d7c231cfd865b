"""Eager float sums and means on the deterministic float64-accumulating kernels of
:mod:`jitgrad.kernels.reduce` (integer and bool sums run on NumPy in int64)."""

from __future__ import annotations

import math

import numpy as np

from ..kernels.parallel import parallel_ok
from .eager_kernels import PARALLEL_MIN_SIZE, use_kernels

__all__ = ["sum_float"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_mod = None


def _kernels():
    global _mod
    if _mod is None:
        from ..kernels import reduce as mod
        from ..kernels.parallel import configure_threading

        configure_threading()
        _mod = mod
    return _mod


def trig_out_of_domain(name: str, a: np.ndarray) -> bool:
    """Whether some element of float ``a`` lies outside the vectorised sin/cos domain."""
    from ..kernels.vmath import ACCURATE_DOMAIN

    limit = ACCURATE_DOMAIN.get((name, "float32" if a.dtype == _F32 else "float64"))
    if limit is None or not use_kernels():
        return False
    m = _kernels().max_abs(np.ascontiguousarray(a).reshape(-1))
    return not m < limit  # NaN takes the libm path too (both give NaN)


def sum_float(a: np.ndarray, dims: tuple, keepdim: bool, scale: float = 1.0) -> np.ndarray:
    """``scale * a.sum(dims)`` for float32/float64 ``a``, accumulated in float64."""
    dt = a.dtype
    out_shape = tuple(1 if i in dims else s for i, s in enumerate(a.shape)) if keepdim else \
        tuple(s for i, s in enumerate(a.shape) if i not in dims)
    if a.size == 0 or not dims or not use_kernels():
        with np.errstate(invalid="ignore"):
            r = np.sum(a, axis=dims, keepdims=keepdim, dtype=np.float64) * scale
        return np.asarray(r, dtype=dt).reshape(out_shape)
    k = _kernels()
    nd = a.ndim
    d0, d1 = dims[0], dims[-1]
    if d1 - d0 + 1 != len(dims):  # not one block of adjacent axes: move them to the end
        rest = [i for i in range(nd) if i not in dims]
        a = np.transpose(a, rest + list(dims))
        d0, d1 = len(rest), nd - 1
    a = np.ascontiguousarray(a)
    shape = a.shape
    P = math.prod(shape[:d0])
    R = math.prod(shape[d0:d1 + 1])
    Q = math.prod(shape[d1 + 1:])
    big = a.size >= PARALLEL_MIN_SIZE and parallel_ok(a.size)  # same bits either way
    if P == 1 and Q == 1:
        flat = a.reshape(-1)
        total = k.sum_flat_par(flat) if big else k.sum_flat(flat)
        return np.asarray(total * scale, dtype=dt).reshape(out_shape)
    out = np.empty((P, Q), dt)
    a3 = a.reshape(P, R, Q)
    if not big:
        k.sum_mid(a3, scale, out)
    elif P >= 8 or Q < 2 * k.QBLOCK:
        k.sum_mid_par_outer(a3, scale, out)
    else:
        k.sum_mid_par_inner(a3, scale, out)
    return out.reshape(out_shape)

