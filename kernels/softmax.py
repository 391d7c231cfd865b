"""Row-wise softmax family over the last axis of a C-contiguous ``(R, C)`` array.

Forward: softmax, log_softmax, logsumexp (max-shifted, float64 row sums: softmax's and its
backward's of partial sums ``SUM_BLOCK`` elements long in the row's type); backward:
``softmax_backward(g, y) = y * (g - sum(g * y))`` and
``log_softmax_backward(g, y) = g - exp(y) * sum(g)``. Every kernel computes rows
``[lo, hi)`` and releases the GIL: the caller runs ``k(0, R, ...)`` on its own thread, or
splits the rows over threads with :func:`jitgrad.kernels.pool.run_parts` (a row's result
does not depend on the split). A kernel slices its rows ``[lo, hi)`` and loops over the
slices from 0: a loop from the argument ``lo`` over the whole arrays compiles to slower code
(the backward kernels 3-7%, as max pooling's; see :mod:`.pooling`). ``exp``/``log`` are the
inlined vectorisable ones.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cached import cached_njit
from .scratch import scratch_f64
from .vmath import KERNEL_FASTMATH, exp, log

__all__ = ["softmax", "log_softmax", "logsumexp", "softmax_backward", "log_softmax_backward",
           "cross_entropy", "cross_entropy_small", "log_softmax_nll", "SMALL_C"]


#: unsigned indices: Numba then skips the negative-index wraparound (see kernels/conv.py)
U = np.uintp


@njit(inline="always")
def _row_max(x, r):
    """The largest element of row ``r``; NaN if the row holds one. Eight independent running
    maxima: a single one is a loop-carried compare+select chain of ~4 cycles per element that
    LLVM does not vectorise without ``nnan`` (4096x1024 float32: 0.76 vs 5.98 ms; float64
    1.44 vs 6.04 ms; rows of 10: 2.45 vs 2.72 ms). The maximum is exact, so the result does
    not depend on the order (a zero's sign may: either gives the same softmax)."""
    row = x[U(r)]
    n = row.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = row[0]
    c = 0
    while c + 8 <= n:
        v0 = row[U(c)]
        v1 = row[U(c + 1)]
        v2 = row[U(c + 2)]
        v3 = row[U(c + 3)]
        v4 = row[U(c + 4)]
        v5 = row[U(c + 5)]
        v6 = row[U(c + 6)]
        v7 = row[U(c + 7)]
        m0 = v0 if v0 > m0 else m0
        m1 = v1 if v1 > m1 else m1
        m2 = v2 if v2 > m2 else m2
        m3 = v3 if v3 > m3 else m3
        m4 = v4 if v4 > m4 else m4
        m5 = v5 if v5 > m5 else m5
        m6 = v6 if v6 > m6 else m6
        m7 = v7 if v7 > m7 else m7
        c += 8
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    m4 = m5 if m5 > m4 else m4
    m6 = m7 if m7 > m6 else m6
    m0 = m2 if m2 > m0 else m0
    m4 = m6 if m6 > m4 else m4
    m = m4 if m4 > m0 else m0
    while c < n:
        v = row[U(c)]
        m = v if v > m else m
        c += 1
    nan = False  # (comparisons skip NaNs: a separate vectorised pass finds them)
    for c in range(n):
        v = row[U(c)]
        nan |= v != v
    return row.dtype.type(np.nan) if nan else m


#: A row's sums add partial sums of ``SUM_BLOCK`` consecutive elements, each in the row's
#: type, into a float64 total: a partial's loop vectorises in the row's type, and the total
#: keeps the float64 sum's range and most of its accuracy (32x1024 float32 softmax: 49 -> 20
#: us, against 16 for PyTorch's float32 sums; the error stays ~2-3e-7 relative, as PyTorch's).
SUM_BLOCK = 64


@njit(inline="always")
def _softmax_row(x, out, r):
    # a row holding +inf, or only -inf, gives NaNs (as PyTorch): no masking of the max here
    m = _row_max(x, r)
    xr, orow = x[U(r)], out[U(r)]
    n = xr.shape[0]
    dt = xr.dtype.type
    s = 0.0
    for c0 in range(0, n, SUM_BLOCK):
        p = dt(0.0)
        for c in range(c0, min(c0 + SUM_BLOCK, n)):
            e = exp(xr[U(c)] - m)
            orow[U(c)] = e
            p += e
        s += p
    inv = dt(1.0 / s)  # (the scaling in the row's type: in float64 it doubled the kernel)
    for c in range(n):
        orow[U(c)] = orow[U(c)] * inv


@njit(inline="always")
def _lse_row(x, r, mask_inf):
    """The row's maximum and its float64 sum of exps, element by element: the log-softmax
    family keeps whole float64 sums (unlike softmax's ``SUM_BLOCK`` partials) for its
    accuracy next to the row's maximum, where ``log(sum)`` is tiny and its error is the
    result's (``tests/test_pytorch_semantics.py::test_log_softmax_is_exact_near_the_maximum``:
    float32 partials were 2 ulps of the sum off). ``mask_inf``: an infinite maximum is
    taken as 0, as PyTorch's ``logsumexp`` does (its ``log_softmax`` does not: a row
    holding +inf, or only -inf, gives NaNs)."""
    m = _row_max(x, r)
    if mask_inf and (m == np.inf or m == -np.inf):
        m = np.float32(0.0)  # unifies to the array's float type
    s = 0.0
    for c in range(x.shape[1]):
        s += exp(x[r, c] - m)
    return m, s


#: ``log_softmax`` over rows of at most this many columns (a classifier's logits) runs in
#: blocks of ``BLOCK`` rows, each loop vectorised across the block's rows: a loop along a
#: row of 10 is too short to vectorise, and its ``exp`` calls ran one at a time (128 x 10
#: float32: 6.3 -> 3.8-4.1 us; the cross-entropy kernel 10.6 -> 6.8-7.3 us). Each row's
#: arithmetic is the row code's, its sums added in column order, but the row code may
#: reassociate its sums (``KERNEL_FASTMATH``), so ``log_softmax`` and the cross-entropy
#: kernels' forward take the same path at the same width: the same bits. The backward
#: keeps the row code (vectorised along the row; the blocked form measured 2.2 -> 4.1 us).
SMALL_C = 16
BLOCK = 8


@njit(inline="always")
def _lse_block(x, r0, m, s):
    """``_lse_row`` (log-softmax's: an infinite maximum unmasked) for the ``BLOCK`` rows
    from ``r0``, ending with each row's maximum in ``m`` and the log of its sum in ``s``:
    each loop runs across the block's rows (the sums add each row's exps in column order).
    A block past the last row repeats that row in its extra lanes, so every row is computed
    by the same (vectorised) code wherever it falls."""
    dt = x.dtype.type
    last = x.shape[0] - 1
    for i in range(BLOCK):
        m[i] = _row_max(x, min(r0 + i, last))  # (float64 scratch: exact, read back as dt)
        s[i] = 0.0
    for c in range(x.shape[1]):
        for i in range(BLOCK):
            s[i] += exp(x[U(min(r0 + i, last)), U(c)] - dt(m[i]))
    for i in range(BLOCK):
        s[i] = log(dt(s[i]))  # (rounded to the array's type: exact in the float64 scratch)


@njit(inline="always")
def _log_softmax_block(x, out, r0, m, s):
    _lse_block(x, r0, m, s)
    dt = x.dtype.type
    nb = min(BLOCK, x.shape[0] - r0)
    for c in range(x.shape[1]):
        for i in range(nb):
            out[U(r0 + i), U(c)] = x[U(r0 + i), U(c)] - dt(m[i])
    for c in range(x.shape[1]):  # (a second pass: see _shifted)
        for i in range(nb):
            out[U(r0 + i), U(c)] = out[U(r0 + i), U(c)] - dt(s[i])


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def softmax(lo, hi, x, out):
    """``out[r] = exp(x[r] - max) / sum(exp(x[r] - max))`` for rows ``lo <= r < hi``."""
    x, out = x[lo:hi], out[lo:hi]
    for r in range(x.shape[0]):
        _softmax_row(x, out, r)


@njit(inline="always")
def _shifted(x, out, r, m, ls):
    """``out[r] = (x[r] - m) - ls``: PyTorch's grouping, exact near the row's maximum
    (``x - (m + ls)`` loses ``ls`` to the rounding of ``m + ls``: log_softmax of [0, 12] in
    float32 was -5.72e-6 instead of -6.20e-6). Two passes, as ``KERNEL_FASTMATH`` lets
    LLVM reassociate one expression into the hoisted ``x - (m + ls)``, and may do so in one
    kernel and not in another (a compiled step's bits would then differ from eager's)."""
    for c in range(x.shape[1]):
        out[r, c] = x[r, c] - m
    for c in range(x.shape[1]):
        out[r, c] = out[r, c] - ls


@njit(inline="always")
def _log_softmax_rows(x, out):
    if x.shape[1] <= SMALL_C:
        m, s = scratch_f64(BLOCK), scratch_f64(BLOCK)
        for r0 in range(0, x.shape[0], BLOCK):
            _log_softmax_block(x, out, r0, m, s)
        return
    for r in range(x.shape[0]):
        m, s = _lse_row(x, r, False)
        _shifted(x, out, r, m, log(x.dtype.type(s)))


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def log_softmax(lo, hi, x, out):
    """``out[r] = x[r] - logsumexp(x[r])``."""
    _log_softmax_rows(x[lo:hi], out[lo:hi])


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def log_softmax_nll(x, t, ignore_index, y, picked):
    """Eager cross-entropy's forward over a batch of class indices in one call:
    :func:`log_softmax` of all rows into ``y`` (its code: the same bits) and the NLL's
    picks ``-y[r, t[r]]`` (float64) into ``picked``. False, with nothing written, if a
    target is ``ignore_index`` or out of range (the caller's general path reports it)."""
    n = x.shape[1]
    for r in range(x.shape[0]):
        k = t[r]
        if k == ignore_index or k < 0 or k >= n:
            return False
    _log_softmax_rows(x, y)
    for r in range(x.shape[0]):
        picked[r] = -np.float64(y[r, t[r]])
    return True


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def logsumexp(lo, hi, x, out):
    """``out[r] = log(sum(exp(x[r])))``, max-shifted."""
    x, out = x[lo:hi], out[lo:hi]
    for r in range(x.shape[0]):
        m, s = _lse_row(x, r, True)
        out[r] = m + log(x.dtype.type(s))


@njit(inline="always")
def _softmax_bwd_row(g, y, out, r):
    gr, yr, orow = g[U(r)], y[U(r)], out[U(r)]
    n = gr.shape[0]
    dt = yr.dtype.type
    s = 0.0
    for c0 in range(0, n, SUM_BLOCK):
        p = dt(0.0)
        for c in range(c0, min(c0 + SUM_BLOCK, n)):
            p += gr[U(c)] * yr[U(c)]
        s += p
    t = dt(s)
    for c in range(n):
        orow[U(c)] = yr[U(c)] * (gr[U(c)] - t)


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def softmax_backward(lo, hi, g, y, out):
    """``out[r] = y[r] * (g[r] - sum(g[r] * y[r]))``."""
    g, y, out = g[lo:hi], y[lo:hi], out[lo:hi]
    for r in range(g.shape[0]):
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
    g, y, out = g[lo:hi], y[lo:hi], out[lo:hi]
    for r in range(g.shape[0]):
        _log_softmax_bwd_row(g, y, out, r)


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def cross_entropy(x, t, ignore_index, scale, y, gy, gx, picked):
    """Cross-entropy of a batch of class indices, forward and backward in one pass over the
    rows: ``log_softmax`` into ``y``, the NLL's picks ``-y[r, t[r]]`` (float64) into
    ``picked``, the NLL's gradient into ``gy`` (zeroed by the caller: ``scale`` at the
    targets) and its gradient through ``log_softmax`` into ``gx``. Each row is computed by
    the code of :func:`log_softmax` and :func:`log_softmax_backward` (the same inlined row
    functions): the bits of the four ops run one after the other. False, with nothing
    written, if a target is ``ignore_index`` or out of range, or if the rows are narrow
    enough for the blocked code (:func:`cross_entropy_small` computes those)."""
    n = x.shape[1]
    if n <= SMALL_C:
        return False
    for r in range(x.shape[0]):
        k = t[r]
        if k == ignore_index or k < 0 or k >= n:
            return False
    for r in range(x.shape[0]):
        m, s = _lse_row(x, r, False)
        _shifted(x, y, r, m, log(x.dtype.type(s)))
        k = t[r]
        picked[r] = -np.float64(y[r, k])
        gy[r, k] = scale
        _log_softmax_bwd_row(gy, y, gx, r)
    return True


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def cross_entropy_small(x, t, ignore_index, scale, y, gy, gx, picked):
    """:func:`cross_entropy` for rows of at most :data:`SMALL_C` classes: the forward by
    ``log_softmax``'s blocked code at that width, the backward by the row code (the
    bits of the four ops, as there)."""
    n = x.shape[1]
    for r in range(x.shape[0]):
        k = t[r]
        if k == ignore_index or k < 0 or k >= n:
            return False
    m, s = scratch_f64(BLOCK), scratch_f64(BLOCK)
    R = x.shape[0]
    for r0 in range(0, R, BLOCK):
        _log_softmax_block(x, y, r0, m, s)
        for r in range(r0, min(r0 + BLOCK, R)):
            k = t[r]
            picked[r] = -np.float64(y[r, k])
            gy[r, k] = scale
            _log_softmax_bwd_row(gy, y, gx, r)
    return True
