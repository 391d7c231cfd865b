"""Row kernels for layer normalisation (forward and input gradient) and the embedding
gradient.

Layer norm works on ``(M, N)`` rows (the normalised dims flattened): per row, the mean and
biased variance are accumulated in float64 in two passes (no cancellation), then the row is
normalised. The backward recomputes the row statistics instead of storing them, so the
forward leaves no residuals but its input. ``w``/``b`` may be ``None``: Numba compiles the
branch away. Each row kernel has a ``prange`` twin for large inputs.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .scalar import KERNEL_FASTMATH

__all__ = ["layer_norm", "layer_norm_par", "layer_norm_backward", "layer_norm_backward_par",
           "embedding_backward"]


@njit(inline="always")
def _row_stats(x, i, eps):
    n = x.shape[1]
    s = 0.0
    for j in range(n):
        s += x[i, j]
    mean = s / n
    v = 0.0
    for j in range(n):
        d = x[i, j] - mean
        v += d * d
    return mean, 1.0 / np.sqrt(v / n + eps)


@njit(inline="always")
def _ln_row(x, w, b, eps, out, i):
    mean, rstd = _row_stats(x, i, eps)
    for j in range(x.shape[1]):
        y = (x[i, j] - mean) * rstd
        if w is not None:
            y = y * w[j]
        if b is not None:
            y = y + b[j]
        out[i, j] = y


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def layer_norm(x, w, b, eps, out):
    """``out = (x - mean) / sqrt(var + eps) * w + b`` per row of ``x``."""
    for i in range(x.shape[0]):
        _ln_row(x, w, b, eps, out, i)


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy", parallel=True)
def layer_norm_par(x, w, b, eps, out):
    """Parallel :func:`layer_norm` (rows are independent)."""
    for i in prange(x.shape[0]):
        _ln_row(x, w, b, eps, out, i)


@njit(inline="always")
def _ln_bwd_row(g, x, w, eps, out, i):
    n = x.shape[1]
    mean, rstd = _row_stats(x, i, eps)
    s1 = 0.0
    s2 = 0.0
    for j in range(n):
        a = g[i, j] * w[j] if w is not None else g[i, j]
        s1 += a
        s2 += a * ((x[i, j] - mean) * rstd)
    s1 /= n
    s2 /= n
    for j in range(n):
        a = g[i, j] * w[j] if w is not None else g[i, j]
        out[i, j] = rstd * (a - s1 - (x[i, j] - mean) * rstd * s2)


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def layer_norm_backward(g, x, w, eps, out):
    """Input gradient of :func:`layer_norm` per row: ``rstd * (a - mean(a) - xhat *
    mean(a * xhat))`` with ``a = g * w``."""
    for i in range(x.shape[0]):
        _ln_bwd_row(g, x, w, eps, out, i)


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy", parallel=True)
def layer_norm_backward_par(g, x, w, eps, out):
    """Parallel :func:`layer_norm_backward`."""
    for i in prange(x.shape[0]):
        _ln_bwd_row(g, x, w, eps, out, i)


@njit(cache=True, nogil=True)
def embedding_backward(g, idx, padding_idx, out):
    """``out[idx[i]] += g[i]`` for every ``i`` whose index is not ``padding_idx`` (``out``
    zeroed by the caller)."""
    d = g.shape[1]
    for i in range(idx.shape[0]):
        k = idx[i]
        if k == padding_idx:
            continue
        for j in range(d):
            out[k, j] += g[i, j]
