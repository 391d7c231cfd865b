"""Fused binary-cross-entropy-with-logits kernels (one pass forward, one pass backward).

``loss_i = (1 - y) x + L_i softplus(-x)`` with ``L_i = 1 + (pw - 1) y`` (``pw`` = pos_weight),
times ``w`` (weight); the gradient is ``dloss/dx = L_i sigmoid(x) - pw y``. ``softplus(-x)``
is computed as ``max(-x, 0) + log1p(exp(-|x|))`` so large logits stay finite. Optional
operands are ``None`` (Numba prunes those branches at compile time); ``g`` may be a scalar
(mean/sum reductions) or an array (``reduction="none"``).

The sum and the gradient compute parts ``[lo, hi)`` and release the GIL: the caller runs
``k(0, parts, ...)`` on its own thread, or splits the parts over threads with
:func:`jitgrad.kernels.pool.run_parts`. The sum's parts are fixed chunks of :data:`SUM_CHUNK`
elements; the caller adds their float64 partial sums (``math.fsum``: correctly rounded), so
the total does not depend on how the chunks were split over threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .access import ld
from .cached import cached_njit
from .vmath import KERNEL_FASTMATH, exp, log1p, sigmoid

__all__ = ["bce_logits_sum", "bce_logits_none", "bce_logits_grad", "sum_chunks", "SUM_CHUNK",
           "nll_picked", "nll_grad_plain"]

#: elements per partial sum of :func:`bce_logits_sum` (the parts it is split into)
SUM_CHUNK = 16384
#: element indices are unsigned: with a loop start that is an argument (``lo``) Numba cannot
#: tell that a signed index is not negative, and its wraparound select blocks vectorisation
#: (2^18 float32 elements: 510 vs 113 us for the gradient)
U = np.uintp


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


def sum_chunks(n: int) -> int:
    """The number of parts (:data:`SUM_CHUNK`-element chunks) of :func:`bce_logits_sum` over
    ``n`` elements."""
    return max(1, -(-n // SUM_CHUNK))


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def bce_logits_sum(lo, hi, x, y, w, pw, partial):
    """``partial[c]``: the sum of the element losses of chunk ``c`` (elements
    ``[c*SUM_CHUNK, (c+1)*SUM_CHUNK)``), accumulated in float64, for ``lo <= c < hi``."""
    n = x.shape[0]
    for c in range(lo, hi):
        s = 0.0
        for i in range(U(c * SUM_CHUNK), U(min(c * SUM_CHUNK + SUM_CHUNK, n))):
            s += _loss(x, y, w, pw, i)
        partial[c] = s


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
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


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def bce_logits_grad(lo, hi, x, y, w, pw, g, out):
    """``out[i] = dloss/dx[i] * g`` for ``lo <= i < hi`` (``g``: scalar scale for mean/sum, or
    per-element array)."""
    for i in range(U(lo), U(hi)):
        out[i] = _grad(x, y, w, pw, g, i)


# ------------------------------------------------------------------------------------ NLL
@cached_njit(nogil=True, error_model="numpy")
def nll_picked(x, t, ignore_index, out):
    """``out[r] = -x[r, t[r]]`` in float64 for a batch of class indices (``x`` (N, C));
    False, with ``out`` partly written, if a target is ``ignore_index`` or out of range
    (the caller then takes the general path, which reports it)."""
    n = x.shape[1]
    for r in range(t.shape[0]):
        k = t[r]
        if k == ignore_index or k < 0 or k >= n:
            return False
        out[r] = -np.float64(x[r, k])
    return True


@cached_njit(nogil=True, error_model="numpy")
def nll_grad_plain(t, scale, ignore_index, out):
    """``out[r, t[r]] = scale`` on a zeroed (N, C) ``out``; False, with ``out`` partly
    written, if a target is ``ignore_index`` or out of range (as :func:`nll_picked`)."""
    n = out.shape[1]
    for r in range(t.shape[0]):
        k = t[r]
        if k == ignore_index or k < 0 or k >= n:
            return False
        out[r, k] = scale
    return True
