"""Pooling kernels (NCHW, as ``(P, H, W)`` planes with ``P = N*C``): max and average pooling
and their adjoints, with PyTorch's window and divisor rules.

Max pooling stores the flat ``ih*W + iw`` index of each window's maximum (PyTorch's
``indices``): the first maximum in window order, NaN counting as the largest value. Every
kernel computes planes ``[lo, hi)`` and releases the GIL: the caller runs ``k(0, P, ...)`` on
its own thread, or splits the planes over threads with :func:`jitgrad.kernels.pool.run_parts`
(a plane owns its output, so the backward kernels are race-free and the result does not depend
on the split). The forward kernels call a loop over all planes of their arguments
(``_*_planes``, compiled into them) on the slices ``[lo, hi)``: the same loop from the
argument ``lo`` over the whole arrays, or over slices taken in the kernel itself, compiled to
slower code (average pooling of 64x64x32x32: 8700 vs 8390 us). Max pooling's backward zeroes
each plane and adds the gradients at their flat positions (no division into ``ih, iw``:
227 -> ~100 us at batch 128 of the digits CNN).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cached import cached_njit

__all__ = ["max_pool", "max_pool_backward", "avg_pool", "avg_pool_backward", "avg_window",
           "window_max"]

# reassoc/contract only: NaN and inf propagate as in PyTorch (no nnan/ninf)
_FM = {"contract", "reassoc"}


# ----------------------------------------------------------------------------- max pool
@njit(inline="always")
def _first(start, step):
    """The first tap ``start + m*step`` at or after 0 (the earlier ones lie in the padding)."""
    while start < 0:
        start += step
    return start


def window_max(x, p, hs, he, ws, we, dh, dw, best):
    """The first maximum of the taps ``[hs, he) x [ws, we)`` (steps ``dh``, ``dw``) of plane
    ``p`` of ``x`` (NaN counts as the largest value) and its flat ``ih*W + iw`` index;
    ``best``: -inf of ``x``'s dtype. Plain Python, compiled for the CPU here and for CUDA by
    :mod:`jitgrad.cuda.conv_kernels` (one rule for both)."""
    W = x.shape[2]
    bi = hs * W + ws
    for ih in range(hs, he, dh):
        for iw in range(ws, we, dw):
            v = x[p, ih, iw]
            if v > best or v != v:
                best = v
                bi = ih * W + iw
    return best, bi


_window_max = njit(inline="always")(window_max)


@njit(inline="always")
def _max_pool_plane(x, p, kh, kw, sh, sw, ph, pw, dh, dw, out, idx):
    H, W = x.shape[1], x.shape[2]
    OH, OW = out.shape[1], out.shape[2]
    ninf = x.dtype.type(-np.inf)
    for oh in range(OH):
        hs = oh * sh - ph
        he = min(hs + (kh - 1) * dh + 1, H)
        hs = _first(hs, dh)
        for ow in range(OW):
            ws = ow * sw - pw
            we = min(ws + (kw - 1) * dw + 1, W)
            ws = _first(ws, dw)
            best, bi = _window_max(x, p, hs, he, ws, we, dh, dw, ninf)
            out[p, oh, ow] = best
            idx[p, oh, ow] = bi


@njit(inline="always")
def _max4(a, b, c, d, ka, kb, kc, kd):
    """The first maximum of four taps and its index by plain ``>`` (selects, no branches)."""
    best, bi = a, ka
    if b > best:
        best, bi = b, kb
    if c > best:
        best, bi = c, kc
    if d > best:
        best, bi = d, kd
    return best, bi


@njit(inline="always")
def _max4_nan(a, b, c, d, ka, kb, kc, kd):
    """:func:`_max4` with NaN counted as the largest value (the last NaN wins)."""
    best, bi = a, ka
    if b > best or b != b:
        best, bi = b, kb
    if c > best or c != c:
        best, bi = c, kc
    if d > best or d != d:
        best, bi = d, kd
    return best, bi


@njit(inline="always")
def _max_pool_plane_2x2(x, p, sh, sw, out, idx):
    """:func:`_max_pool_plane` for 2x2 windows inside the plane (no padding, no dilation):
    the taps unrolled and compared with plain ``>``, so LLVM selects instead of branching;
    a window whose sum is NaN (it holds a NaN, or infinities of both signs) is compared
    again with the NaN rule (2.7x faster than the general loop on the digits CNN)."""
    W = x.shape[2]
    U = np.uintp
    for oh in range(out.shape[1]):
        r0 = x[U(p), U(oh * sh)]
        r1 = x[U(p), U(oh * sh + 1)]
        o = out[U(p), U(oh)]
        ii = idx[U(p), U(oh)]
        k0 = oh * sh * W
        for ow in range(out.shape[2]):
            w0 = ow * sw
            a, b, c, d = r0[U(w0)], r0[U(w0 + 1)], r1[U(w0)], r1[U(w0 + 1)]
            ka = k0 + w0
            best, bi = _max4(a, b, c, d, ka, ka + 1, ka + W, ka + W + 1)
            s = a + b + c + d
            if s != s:
                best, bi = _max4_nan(a, b, c, d, ka, ka + 1, ka + W, ka + W + 1)
            o[U(ow)] = best
            ii[U(ow)] = bi


@njit(nogil=True, error_model="numpy")
def _max_pool_planes(x, kh, kw, sh, sw, ph, pw, dh, dw, out, idx):
    inside = (out.shape[1] - 1) * sh + 2 <= x.shape[1] and (out.shape[2] - 1) * sw + 2 <= \
        x.shape[2]
    if kh == 2 and kw == 2 and ph == 0 and pw == 0 and dh == 1 and dw == 1 and inside:
        for p in range(x.shape[0]):
            _max_pool_plane_2x2(x, p, sh, sw, out, idx)
        return
    for p in range(x.shape[0]):
        _max_pool_plane(x, p, kh, kw, sh, sw, ph, pw, dh, dw, out, idx)


@cached_njit(nogil=True, error_model="numpy")
def max_pool(lo, hi, x, kh, kw, sh, sw, ph, pw, dh, dw, out, idx):
    """Max pooling of planes ``lo <= p < hi`` of ``x`` ``(P, H, W)`` into ``out`` ``(P, OH, OW)``
    with the flat ``ih*W + iw`` index of each maximum in ``idx`` (first maximum; NaN wins)."""
    _max_pool_planes(x[lo:hi], kh, kw, sh, sw, ph, pw, dh, dw, out[lo:hi], idx[lo:hi])


@cached_njit(nogil=True, error_model="numpy")
def max_pool_backward(lo, hi, g, idx, out):
    """``out`` ``(P, H, W)``: the gradients ``g`` ``(P, OH, OW)`` summed into the positions
    ``idx`` of each plane ``lo <= p < hi`` (the adjoint of gathering by ``idx``; a plane owns
    its output)."""
    U = np.uintp
    hw = out.shape[1] * out.shape[2]
    o2 = out.reshape(out.shape[0], hw)
    g2 = g.reshape(g.shape[0], g.shape[1] * g.shape[2])
    i2 = idx.reshape(g2.shape)
    for p in range(max(lo, 0), hi):
        dst = o2[U(p)]
        for k in range(hw):
            dst[U(k)] = 0
        src = g2[U(p)]
        ii = i2[U(p)]
        for q in range(g2.shape[1]):
            k = ii[U(q)]
            if 0 <= k < hw:
                dst[U(k)] += src[U(q)]


# ----------------------------------------------------------------------------- avg pool
def avg_window(oh, ow, kh, kw, sh, sw, ph, pw, H, W, count_pad, divisor):
    """PyTorch's window bounds and divisor of output ``(oh, ow)``: plain Python, compiled
    for the CPU here and for CUDA by :mod:`jitgrad.cuda.conv_kernels` (one rule for both)."""
    hs = oh * sh - ph
    ws = ow * sw - pw
    he = min(hs + kh, H + ph)
    we = min(ws + kw, W + pw)
    size = (he - hs) * (we - ws)
    hs = max(hs, 0)
    ws = max(ws, 0)
    he = min(he, H)
    we = min(we, W)
    if divisor != 0:
        d = divisor
    elif count_pad:
        d = size
    else:
        d = (he - hs) * (we - ws)
    return hs, he, ws, we, d


_avg_window = njit(inline="always")(avg_window)


@njit(inline="always")
def _avg_pool_plane(x, p, kh, kw, sh, sw, ph, pw, count_pad, divisor, out):
    H, W = x.shape[1], x.shape[2]
    for oh in range(out.shape[1]):
        for ow in range(out.shape[2]):
            hs, he, ws, we, d = _avg_window(oh, ow, kh, kw, sh, sw, ph, pw, H, W, count_pad,
                                            divisor)
            s = x.dtype.type(0)
            if hs < he and ws < we:
                for ih in range(hs, he):
                    for iw in range(ws, we):
                        s += x[p, ih, iw]
                s = s / d
            out[p, oh, ow] = s


@njit(nogil=True, fastmath=_FM, error_model="numpy")
def _avg_pool_planes(x, kh, kw, sh, sw, ph, pw, count_pad, divisor, out):
    for p in range(x.shape[0]):
        _avg_pool_plane(x, p, kh, kw, sh, sw, ph, pw, count_pad, divisor, out)


@cached_njit(nogil=True, fastmath=_FM, error_model="numpy")
def avg_pool(lo, hi, x, kh, kw, sh, sw, ph, pw, count_pad, divisor, out):
    """Average pooling of planes ``lo <= p < hi`` of ``x`` ``(P, H, W)`` (PyTorch's divisor
    rules; ``divisor`` 0: none)."""
    _avg_pool_planes(x[lo:hi], kh, kw, sh, sw, ph, pw, count_pad, divisor, out[lo:hi])


@njit(inline="always")
def _avg_back_plane(g, p, kh, kw, sh, sw, ph, pw, count_pad, divisor, out):
    H, W = out.shape[1], out.shape[2]
    for ih in range(H):
        for iw in range(W):
            out[p, ih, iw] = 0
    for oh in range(g.shape[1]):
        for ow in range(g.shape[2]):
            hs, he, ws, we, d = _avg_window(oh, ow, kh, kw, sh, sw, ph, pw, H, W, count_pad,
                                            divisor)
            if hs < he and ws < we:
                v = g[p, oh, ow] / d
                for ih in range(hs, he):
                    for iw in range(ws, we):
                        out[p, ih, iw] += v


@njit(nogil=True, fastmath=_FM, error_model="numpy")
def _avg_pool_backward_planes(g, kh, kw, sh, sw, ph, pw, count_pad, divisor, out):
    for p in range(g.shape[0]):
        _avg_back_plane(g, p, kh, kw, sh, sw, ph, pw, count_pad, divisor, out)


@cached_njit(nogil=True, fastmath=_FM, error_model="numpy")
def avg_pool_backward(lo, hi, g, kh, kw, sh, sw, ph, pw, count_pad, divisor, out):
    """Adjoint of :func:`avg_pool` on planes ``lo <= p < hi``: each ``g / divisor`` spread
    over its window (a plane owns its output)."""
    _avg_pool_backward_planes(g[lo:hi], kh, kw, sh, sw, ph, pw, count_pad, divisor,
                              out[lo:hi])
