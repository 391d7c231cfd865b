"""Row-wise softmax family over the last axis of a C-contiguous ``(R, C)`` array.

Forward: softmax, log_softmax, logsumexp (max-shifted, float64 row sums); backward:
``softmax_backward(g, y) = y * (g - sum(g * y))`` and
``log_softmax_backward(g, y) = g - exp(y) * sum(g)``. Every kernel computes rows
``[lo, hi)`` and releases the GIL: the caller runs ``k(0, R, ...)`` on its own thread, or
splits the rows over threads with :func:`jitgrad.kernels.pool.run_parts` (a row's result
does not depend on the split). ``exp``/``log`` are the inlined vectorisable ones.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cached import cached_njit
from .scalar import KERNEL_FASTMATH, exp, log

__all__ = ["softmax", "log_softmax", "logsumexp", "softmax_backward", "log_softmax_backward"]


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


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def softmax(lo, hi, x, out):
    """``out[r] = exp(x[r] - max) / sum(exp(x[r] - max))`` for rows ``lo <= r < hi``."""
    for r in range(lo, hi):
        _softmax_row(x, out, r)


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def log_softmax(lo, hi, x, out):
    """``out[r] = x[r] - logsumexp(x[r])``."""
    for r in range(lo, hi):
        m, s = _lse_row(x, r)
        shift = m + log(x.dtype.type(s))
        for c in range(x.shape[1]):
            out[r, c] = x[r, c] - shift


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def logsumexp(lo, hi, x, out):
    """``out[r] = log(sum(exp(x[r])))``, max-shifted."""
    for r in range(lo, hi):
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


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def softmax_backward(lo, hi, g, y, out):
    """``out[r] = y[r] * (g[r] - sum(g[r] * y[r]))``."""
    for r in range(lo, hi):
        _softmax_bwd_row(g, y, out, r)


@njit(inline="always")
def _log_softmax_bwd_row(g, y, out, r):
    s = 0.0
    for c in range(g.shape[1]):
        s += g[r, c]
    t = y.dtype.type(s)
    for c in range(g.shape[1]):
        out[r, c] = g[r, c] - exp(y[r, c]) * t


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def log_softmax_backward(lo, hi, g, y, out):
    """``out[r] = g[r] - exp(y[r]) * sum(g[r])``."""
    for r in range(lo, hi):
        _log_softmax_bwd_row(g, y, out, r)
