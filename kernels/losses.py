"""Fused binary-cross-entropy-with-logits kernels (one pass forward, one pass backward).

``loss_i = (1 - y) x + L_i softplus(-x)`` with ``L_i = 1 + (pw - 1) y`` (``pw`` = pos_weight),
times ``w`` (weight); the gradient is ``dloss/dx = L_i sigmoid(x) - pw y``. ``softplus(-x)``
is computed as ``max(-x, 0) + log1p(exp(-|x|))`` so large logits stay finite. Optional
operands are ``None`` (Numba prunes those branches at compile time); ``g`` may be a scalar
(mean/sum reductions) or an array (``reduction="none"``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .access import ld
from .scalar import KERNEL_FASTMATH, exp, log1p, sigmoid

__all__ = ["bce_logits_sum", "bce_logits_sum_par", "bce_logits_none", "bce_logits_grad",
           "bce_logits_grad_par"]


@njit(inline="always")
def _loss(x, y, w, pw, i):
    xi = x[i]
    yi = y[i]
    one = xi - xi + 1
    sp = (-xi if xi < 0 else xi - xi) + log1p(exp(-abs(xi)))
    if pw is None:
        v = (one - yi) * xi + sp
    else:
        v = (one - yi) * xi + (one + (ld(pw, i) - one) * yi) * sp
    if w is not None:
        v = v * ld(w, i)
    return v


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def bce_logits_sum(x, y, w, pw):
    """Sum of the element losses, accumulated in float64."""
    s = 0.0
    for i in range(x.shape[0]):
        s += _loss(x, y, w, pw, i)
    return s


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy", parallel=True)
def bce_logits_sum_par(x, y, w, pw):
    """Parallel :func:`bce_logits_sum` over fixed 16384-element chunks (deterministic)."""
    n = x.shape[0]
    chunk = 16384
    nchunks = (n + chunk - 1) // chunk
    partial = np.empty(nchunks, np.float64)
    for c in prange(nchunks):
        s = 0.0
        for i in range(c * chunk, min(c * chunk + chunk, n)):
            s += _loss(x, y, w, pw, i)
        partial[c] = s
    total = 0.0
    for c in range(nchunks):
        total += partial[c]
    return total


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def bce_logits_none(x, y, w, pw, out):
    """Element losses (``reduction="none"``)."""
    for i in range(x.shape[0]):
        out[i] = _loss(x, y, w, pw, i)


@njit(inline="always")
def _grad(x, y, w, pw, g, i):
    xi = x[i]
    yi = y[i]
    s = sigmoid(xi)
    if pw is None:
        d = s - yi
    else:
        one = xi - xi + 1
        p = ld(pw, i)
        d = (one + (p - one) * yi) * s - p * yi
    d = d * ld(g, i)
    if w is not None:
        d = d * ld(w, i)
    return d


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def bce_logits_grad(x, y, w, pw, g, out):
    """``out = dloss/dx * g`` (``g``: scalar scale for mean/sum, or per-element array)."""
    for i in range(x.shape[0]):
        out[i] = _grad(x, y, w, pw, g, i)


@njit(cache=True, nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy", parallel=True)
def bce_logits_grad_par(x, y, w, pw, g, out):
    """Parallel :func:`bce_logits_grad`."""
    for i in prange(x.shape[0]):
        out[i] = _grad(x, y, w, pw, g, i)
