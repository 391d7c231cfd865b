"""Row-wise softmax family over the last axis of a C-contiguous ``(R, C)`` array.

Forward: softmax, log_softmax, logsumexp (max-shifted, float64 row sums); backward:
``softmax_backward(g, y) = y * (g - sum(g * y))`` and
``log_softmax_backward(g, y) = g - exp(y) * sum(g)``. Each kernel has a sequential and a
row-parallel twin; ``exp``/``log`` are the inlined vectorisable ones.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .scalar import KERNEL_FASTMATH, exp, log

__all__ = ["softmax", "softmax_par", "log_softmax", "log_softmax_par", "logsumexp",
           "logsumexp_par", "softmax_backward", "softmax_backward_par", "log_softmax_backward",
           "log_softmax_backward_par"]


@njit(inline="always")
def _row_max(x, r):
    m = x[r, 0]
    for c in range(1, x.shape[1]):
        v = x[r, c]
        if v > m or v != v:
            m = v
    return m


@njit(inline="always")
def _softmax_row(x, out, r):
    # a row holding +inf, or only -inf, gives NaNs (as PyTorch): no masking of the max here
    m = _row_max(x, r)
    s = 0.0
    for c in range(x.shape[1]):
        e = exp(x[r, c] - m)
        out[r, c] = e
        s += e
    inv = 1.0 / s
    for c in range(x.shape[1]):
        out[r, c] = out[r, c] * inv


@njit(inline="always")
def _lse_row(x, r):
    m = _row_max(x, r)
    if m == np.inf or m == -np.inf:  # PyTorch masks an infinite max to 0
        m = np.float32(0.0)  # unifies to the array's float type
    s = 0.0
    for c in range(x.shape[1]):
        s += exp(x[r, c] - m)
    return m, s


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def softmax(x, out):
    """``out[r] = exp(x[r] - max) / sum(exp(x[r] - max))``."""
    for r in range(x.shape[0]):
        _softmax_row(x, out, r)


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy", parallel=True)
def softmax_par(x, out):
    """Row-parallel :func:`softmax`."""
    for r in prange(x.shape[0]):
        _softmax_row(x, out, r)


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def log_softmax(x, out):
    """``out[r] = x[r] - logsumexp(x[r])``."""
    for r in range(x.shape[0]):
        m, s = _lse_row(x, r)
        shift = m + log(x.dtype.type(s))
        for c in range(x.shape[1]):
            out[r, c] = x[r, c] - shift


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy", parallel=True)
def log_softmax_par(x, out):
    """Row-parallel :func:`log_softmax`."""
    for r in prange(x.shape[0]):
        m, s = _lse_row(x, r)
        shift = m + log(x.dtype.type(s))
        for c in range(x.shape[1]):
            out[r, c] = x[r, c] - shift


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def logsumexp(x, out):
    """``out[r] = log(sum(exp(x[r])))``, max-shifted."""
    for r in range(x.shape[0]):
        m, s = _lse_row(x, r)
        out[r] = m + log(x.dtype.type(s))


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy", parallel=True)
def logsumexp_par(x, out):
    """Row-parallel :func:`logsumexp`."""
    for r in prange(x.shape[0]):
        m, s = _lse_row(x, r)
        out[r] = m + log(x.dtype.type(s))


@njit(inline="always")
def _softmax_bwd_row(g, y, out, r):
    s = 0.0
    for c in range(g.shape[1]):
        s += g[r, c] * y[r, c]
    t = y.dtype.type(s)
    for c in range(g.shape[1]):
        out[r, c] = y[r, c] * (g[r, c] - t)


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def softmax_backward(g, y, out):
    """``out[r] = y[r] * (g[r] - sum(g[r] * y[r]))``."""
    for r in range(g.shape[0]):
        _softmax_bwd_row(g, y, out, r)


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy", parallel=True)
def softmax_backward_par(g, y, out):
    """Row-parallel :func:`softmax_backward`."""
    for r in prange(g.shape[0]):
        _softmax_bwd_row(g, y, out, r)


@njit(inline="always")
def _log_softmax_bwd_row(g, y, out, r):
    s = 0.0
    for c in range(g.shape[1]):
        s += g[r, c]
    t = y.dtype.type(s)
    for c in range(g.shape[1]):
        out[r, c] = g[r, c] - exp(y[r, c]) * t


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def log_softmax_backward(g, y, out):
    """``out[r] = g[r] - exp(y[r]) * sum(g[r])``."""
    for r in range(g.shape[0]):
        _log_softmax_bwd_row(g, y, out, r)


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy", parallel=True)
def log_softmax_backward_par(g, y, out):
    """Row-parallel :func:`log_softmax_backward`."""
    for r in prange(g.shape[0]):
        _log_softmax_bwd_row(g, y, out, r)
