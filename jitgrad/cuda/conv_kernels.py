"""CUDA kernels of the convolutions and pooling: the data movement around the GEMMs and the
pooling windows (the CUDA counterparts of :mod:`jitgrad.kernels.conv` and
:mod:`jitgrad.kernels.pooling`).

Every kernel is a grid-stride loop with one thread per *output* element that computes it
alone, so nothing is written by two threads: no atomics, and no result depends on the
launch configuration. The adjoints that the CPU writes as scatters (``unlower``, the pooling
backwards) are gathers here: an output pixel visits the taps or windows that read it and adds
their terms in the order the CPU's scatter adds them, so the sums have the CPU's bits.
Arithmetic keeps the CPU kernels' types (Numba types both the same way; the scalars passed in,
``zero`` of the array's dtype, and the explicit ``float64`` casts keep the simulator, which
runs the kernels as NumPy code, to the same types).
"""

from __future__ import annotations

from numba import cuda, float64

from ..kernels.pooling import avg_window, window_max
from .ordered_sum import column_total

__all__ = ["lower", "unlower", "bias_segments", "bias_lanes", "add_lanes", "max_pool",
           "max_pool_backward", "avg_pool", "avg_pool_backward"]


#: the CPU kernels' window rules (max pooling's first maximum; average pooling's bounds and
#: divisor), compiled for CUDA. Numba's cache of the kernels here is keyed on this file:
#: after editing them in kernels/pooling.py, clear it (or touch this file)
_window_max = cuda.jit(device=True)(window_max)
_avg_window = cuda.jit(device=True)(avg_window)


@cuda.jit(device=True)
def _plane_pos(e, H, W):
    """Flat index ``e`` of a ``(P, H, W)`` array as ``(p, h, w)``."""
    t = e // W
    return t // H, t % H, e % W


@cuda.jit(cache=True)
def lower(x, n0, pt, pl, sh, sw, dh, dw, kh, kw, OH, OW, cols):
    """The patch matrix ``cols`` (C*kh*kw, nb*OH*OW) of samples ``n0 <= n < n0 + nb`` of
    ``x`` (N, C, H, W): ``cols[(c*kh + i)*kw + j, n*P + oh*OW + ow] = x[n0 + n, c,
    oh*sh + i*dh - pt, ow*sw + j*dw - pl]``, zero outside the input (sample-major
    columns, as the CPU's for wide images)."""
    H, W = x.shape[2], x.shape[3]
    R, S = cols.shape
    P = OH * OW
    for e in range(cuda.grid(1), R * S, cuda.gridsize(1)):
        r = e // S
        s = e - r * S
        c = r // (kh * kw)
        t = r - c * kh * kw
        i = t // kw
        j = t - i * kw
        n = s // P
        q = s - n * P
        oh = q // OW
        ow = q - oh * OW
        ih = oh * sh + i * dh - pt
        iw = ow * sw + j * dw - pl
        if 0 <= ih < H and 0 <= iw < W:
            cols[r, s] = x[n0 + n, c, ih, iw]
        else:
            cols[r, s] = 0


@cuda.jit(cache=True)
def unlower(dcols, n0, pt, pl, sh, sw, dh, dw, kh, kw, OH, OW, zero, out):
    """Adjoint of :func:`lower` as a gather: pixel ``(n0 + n, c, ih, iw)`` of ``out``
    (N, C, H, W) is the sum of the entries of ``dcols`` lowered from it, taps in ``(i, j)``
    order (the order in which the CPU's ``unlower`` adds them; a tap reads a pixel at most
    once)."""
    C, H, W = out.shape[1], out.shape[2], out.shape[3]
    P = OH * OW
    nb = dcols.shape[1] // P
    for e in range(cuda.grid(1), nb * C * H * W, cuda.gridsize(1)):
        t, ih, iw = _plane_pos(e, H, W)
        n, c = t // C, t % C
        acc = zero
        for i in range(kh):
            th = ih + pt - i * dh
            if th < 0 or th % sh != 0 or th // sh >= OH:
                continue
            for j in range(kw):
                tw = iw + pl - j * dw
                if tw < 0 or tw % sw != 0 or tw // sw >= OW:
                    continue
                acc += dcols[(c * kh + i) * kw + j, n * P + (th // sh) * OW + tw // sw]
        out[n0 + n, c, ih, iw] = acc


@cuda.jit(cache=True)
def bias_segments(g, segment, zero64, parts):
    """``parts[s, e]``: ``g[n, e]`` (N, O * P) over the samples ``n`` of segment ``s``
    (``segment`` samples each) added in order in float64 from zero: a thread per (segment,
    channel pixel), so a large batch keeps the GPU busy (the CPU's ``bias_grad`` segments)."""
    S, E = parts.shape
    N = g.shape[0]
    for u in range(cuda.grid(1), S * E, cuda.gridsize(1)):
        s = u // E
        e = u - s * E
        acc = zero64
        for n in range(s * segment, min(s * segment + segment, N)):
            acc += g[n, e]
        parts[s, e] = acc


@cuda.jit(cache=True)
def bias_lanes(parts, zero64, lanes):
    """``lanes[o, p]``: the segments' partials of channel pixel ``e = o * P + p`` added in
    order in float64 (the CPU's ``bias_grad`` lanes)."""
    Co, P = lanes.shape
    for e in range(cuda.grid(1), Co * P, cuda.gridsize(1)):
        o = e // P
        lanes[o, e - o * P] = column_total(parts, e, zero64)


@cuda.jit(cache=True)
def add_lanes(lanes, zero64, out):
    """``out[o]``: the lanes of row ``o`` added in order in float64, rounded once to
    ``out``'s dtype (a thread per row)."""
    for o in range(cuda.grid(1), lanes.shape[0], cuda.gridsize(1)):
        s = zero64
        for p in range(lanes.shape[1]):
            s += lanes[o, p]
        out[o] = s


@cuda.jit(cache=True)
def max_pool(x, kh, kw, sh, sw, ph, pw, dh, dw, ninf, out, idx):
    """Max pooling of ``x`` (P, H, W) into ``out`` (P, OH, OW), with the flat ``ih*W + iw``
    index of each window's first maximum in ``idx`` (NaN counts as the largest value);
    windows clipped to the input as the CPU's."""
    H, W = x.shape[1], x.shape[2]
    OH, OW = out.shape[1], out.shape[2]
    for e in range(cuda.grid(1), out.shape[0] * OH * OW, cuda.gridsize(1)):
        p, oh, ow = _plane_pos(e, OH, OW)
        hs = oh * sh - ph
        he = min(hs + (kh - 1) * dh + 1, H)
        while hs < 0:  # the taps before the first in the plane lie in the padding
            hs += dh
        ws = ow * sw - pw
        we = min(ws + (kw - 1) * dw + 1, W)
        while ws < 0:
            ws += dw
        best, bi = _window_max(x, p, hs, he, ws, we, dh, dw, ninf)
        out[p, oh, ow] = best
        idx[p, oh, ow] = bi


@cuda.jit(cache=True)
def max_pool_backward(g, idx, kh, kw, sh, sw, ph, pw, dh, dw, zero, out):
    """``out`` (P, H, W): the gradients ``g`` (P, OH, OW) of the windows whose maximum
    ``idx`` is the pixel, as a gather: the windows that hold a pixel visited in row-major
    order (taps in reverse), the order in which the CPU's scatter adds them."""
    OH, OW = g.shape[1], g.shape[2]
    H, W = out.shape[1], out.shape[2]
    for e in range(cuda.grid(1), out.shape[0] * H * W, cuda.gridsize(1)):
        p, ih, iw = _plane_pos(e, H, W)
        q = ih * W + iw
        acc = zero
        for a in range(kh):
            th = ih + ph - (kh - 1 - a) * dh
            if th < 0 or th % sh != 0 or th // sh >= OH:
                continue
            oh = th // sh
            for b in range(kw):
                tw = iw + pw - (kw - 1 - b) * dw
                if tw < 0 or tw % sw != 0 or tw // sw >= OW:
                    continue
                ow = tw // sw
                if idx[p, oh, ow] == q:
                    acc += g[p, oh, ow]
        out[p, ih, iw] = acc


@cuda.jit(cache=True)
def avg_pool(x, kh, kw, sh, sw, ph, pw, count_pad, divisor, zero, out):
    """Average pooling of ``x`` (P, H, W) into ``out`` (P, OH, OW): the window's sum in
    ``x``'s dtype, taps in order, divided by PyTorch's divisor (``divisor`` 0: none)."""
    H, W = x.shape[1], x.shape[2]
    OH, OW = out.shape[1], out.shape[2]
    for e in range(cuda.grid(1), out.shape[0] * OH * OW, cuda.gridsize(1)):
        p, oh, ow = _plane_pos(e, OH, OW)
        hs, he, ws, we, d = _avg_window(oh, ow, kh, kw, sh, sw, ph, pw, H, W, count_pad,
                                        divisor)
        s = zero
        if hs < he and ws < we:
            for ih in range(hs, he):
                for iw in range(ws, we):
                    s += x[p, ih, iw]
            out[p, oh, ow] = s / float64(d)
        else:
            out[p, oh, ow] = s


@cuda.jit(cache=True)
def avg_pool_backward(g, kh, kw, sh, sw, ph, pw, count_pad, divisor, zero, out):
    """Adjoint of :func:`avg_pool` as a gather: pixel ``(p, ih, iw)`` of ``out`` adds
    ``g / divisor`` (in float64, rounded to ``out``'s dtype at each step, as the CPU's
    scatter) of the windows that hold it, in row-major order."""
    OH, OW = g.shape[1], g.shape[2]
    H, W = out.shape[1], out.shape[2]
    for e in range(cuda.grid(1), out.shape[0] * H * W, cuda.gridsize(1)):
        p, ih, iw = _plane_pos(e, H, W)
        out[p, ih, iw] = zero
        oh0 = max(0, (ih + ph - kh + sh) // sh)
        ow0 = max(0, (iw + pw - kw + sw) // sw)
        for oh in range(oh0, min(OH, (ih + ph) // sh + 1)):
            for ow in range(ow0, min(OW, (iw + pw) // sw + 1)):
                hs, he, ws, we, d = _avg_window(oh, ow, kh, kw, sh, sw, ph, pw, H, W,
                                                count_pad, divisor)
                if hs <= ih < he and ws <= iw < we:
                    out[p, ih, iw] += g[p, oh, ow] / float64(d)
