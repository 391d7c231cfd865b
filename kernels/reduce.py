"""Summation kernels: float64 accumulation, deterministic parallel reduction.

Every sum accumulates in float64 (float32 inputs included), so a 1e7-element float32 sum is
accurate to ~1e-12 relative before the final rounding. Parallel work is split into chunks of a
fixed size (never "one chunk per thread") and the partial sums are combined in chunk order, so
the result is bit-identical for any thread count.

Shapes are normalised by the caller to ``(P, R, Q)``: sum over the middle axis of a
C-contiguous array (``R`` reduced, ``P`` outer, ``Q`` inner).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["sum_flat", "sum_flat_par", "sum_mid", "sum_mid_par_outer", "sum_mid_par_inner",
           "max_abs", "CHUNK"]

#: elements per partial sum of a parallel flat reduction (fixed: determinism)
CHUNK = 1 << 14
#: inner-axis block per task of the column-parallel reduction (fixed: determinism)
QBLOCK = 256

# reassoc lets LLVM keep several float64 accumulators in vector lanes; no nnan/ninf so NaN
# and inf propagate as NumPy's sum does.
_FM = {"reassoc", "contract"}


@njit(cache=True, nogil=True, fastmath=_FM, error_model="numpy")
def sum_flat(a):
    """Sum of a 1-D array, accumulated in float64: the chunks of :func:`sum_flat_par`, summed
    in the same order on one thread, so both give bit-identical results (the caller may pick
    either at run time)."""
    n = a.shape[0]
    nchunks = (n + CHUNK - 1) // CHUNK
    partial = np.empty(nchunks, np.float64)
    for c in range(nchunks):
        start = c * CHUNK
        stop = min(start + CHUNK, n)
        s = 0.0
        for i in range(start, stop):
            s += a[i]
        partial[c] = s
    total = 0.0
    for c in range(nchunks):
        total += partial[c]
    return total


@njit(cache=True, nogil=True, fastmath=_FM, error_model="numpy", parallel=True)
def sum_flat_par(a):
    """Parallel sum of a 1-D array over fixed-size chunks, combined in chunk order."""
    n = a.shape[0]
    nchunks = (n + CHUNK - 1) // CHUNK
    partial = np.empty(nchunks, np.float64)
    for c in prange(nchunks):
        start = c * CHUNK
        stop = min(start + CHUNK, n)
        s = 0.0
        for i in range(start, stop):
            s += a[i]
        partial[c] = s
    total = 0.0
    for c in range(nchunks):
        total += partial[c]
    return total


@njit(cache=True, nogil=True, fastmath=_FM, error_model="numpy")
def sum_mid(a, scale, out):
    """``out[p, q] = scale * sum_r a[p, r, q]`` with float64 accumulators (sequential)."""
    P, R, Q = a.shape
    if Q == 1:
        for p in range(P):
            s = 0.0
            for r in range(R):
                s += a[p, r, 0]
            out[p, 0] = s * scale
        return
    acc = np.empty(Q, np.float64)
    for p in range(P):
        acc[:] = 0.0
        for r in range(R):
            for q in range(Q):
                acc[q] += a[p, r, q]
        for q in range(Q):
            out[p, q] = acc[q] * scale


@njit(cache=True, nogil=True, fastmath=_FM, error_model="numpy", parallel=True)
def sum_mid_par_outer(a, scale, out):
    """:func:`sum_mid` with the outer axis ``P`` split across threads."""
    P, R, Q = a.shape
    for p in prange(P):
        if Q == 1:
            s = 0.0
            for r in range(R):
                s += a[p, r, 0]
            out[p, 0] = s * scale
        else:
            acc = np.zeros(Q, np.float64)
            for r in range(R):
                for q in range(Q):
                    acc[q] += a[p, r, q]
            for q in range(Q):
                out[p, q] = acc[q] * scale


@njit(cache=True, nogil=True, fastmath=_FM, error_model="numpy", parallel=True)
def sum_mid_par_inner(a, scale, out):
    """:func:`sum_mid` with the inner axis ``Q`` split into fixed blocks across threads
    (column sums of tall matrices, where ``P`` is small)."""
    P, R, Q = a.shape
    nblocks = (Q + QBLOCK - 1) // QBLOCK
    for task in prange(P * nblocks):
        p = task // nblocks
        q0 = (task % nblocks) * QBLOCK
        q1 = min(q0 + QBLOCK, Q)
        acc = np.zeros(q1 - q0, np.float64)
        for r in range(R):
            for q in range(q0, q1):
                acc[q - q0] += a[p, r, q]
        for q in range(q0, q1):
            out[p, q] = acc[q - q0] * scale


@njit(cache=True, nogil=True, fastmath=_FM, error_model="numpy")
def max_abs(a):
    """Largest ``|a[i]|`` of a 1-D array (NaN if any element is NaN); 0 for an empty array."""
    m = a.dtype.type(0)
    nan = False
    for i in range(a.shape[0]):
        v = abs(a[i])
        nan |= v != v
        m = v if v > m else m
    return np.nan if nan else m
