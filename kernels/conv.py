"""Convolution kernels (NCHW) around BLAS GEMMs: patch lowering ("im2col"), its adjoint
("col2im") and the layout moves between NCHW and the GEMMs' layout.

A 2-D convolution is a matrix product on a *patch matrix* ``cols``: row ``r = (c, i, j)`` (a
tap of the kernel), column ``s`` (output pixel ``p = oh*OW + ow`` of sample ``n`` of a
chunk of ``nb`` samples) holds ``xp[n, c, oh*sh + i*dh, ow*sw + j*dw]`` of the zero-padded
input ``xp``. Columns are in one of two orders (the caller picks, argument ``bl``):

- *batch-last* ``s = p*nb + n``: the lowering moves runs of ``nb`` (or ``OW*nb``)
  contiguous values, and the GEMM results are transposed to NCHW. For small images (4x4:
  the digits CNN's second layer) the NCHW-ordered lowering was a loop of 4-element copies,
  3x slower;
- *sample-major* ``s = n*P + p``: runs of ``OW`` values, and the moves to and from NCHW are
  block copies of ``P`` values (an 8x8 image: 4x less time than transposing them).

With the weight as a matrix ``w2`` (O, C/groups*kh*kw), per group:

- forward: ``y = w2 @ cols`` (O, P*nb), then :func:`cn_to_nc` writes ``y`` (+ bias) in NCHW;
- weight gradient: ``dw2 = gc @ cols.T`` with ``gc`` the output gradient in the GEMM's
  layout (:func:`nc_to_cn`);
- input gradient: ``dcols = w2.T @ gc``, added back to the pixels the patches came from by
  :func:`unlower`.

Ungrouped convolutions with patches of at least ``SMALL_K`` taps use *patch rows* instead
(the transposed layout, taps in (i, j, c) order: :func:`lower_rows`, :func:`unlower_rows`,
:func:`rows_to_nc`, :func:`nc_to_rows`, their parts samples), whose GEMMs OpenBLAS runs
faster.

The GEMMs are NumPy's (OpenBLAS, near the machine's peak); the kernels here move data only.
Short patches (a first layer's 9 taps) in sample-major order skip the layout kernels:
:mod:`jitgrad.ops.conv` multiplies them per sample, a stack of small GEMMs straight into
NCHW.
Every kernel computes parts ``[lo, hi)`` (input channels or output channels) that own their
outputs and releases the GIL: the caller runs ``k(0, parts, ...)`` on its own thread, or
splits the parts over threads with :func:`jitgrad.kernels.pool.run_parts`; a result never
depends on the split. Pooling kernels are in :mod:`jitgrad.kernels.pooling`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cached import cached_njit

__all__ = ["lower", "unlower", "cn_to_nc", "nc_to_cn", "bias_grad", "lower_rows", "unlower_rows",
           "rows_to_nc", "nc_to_rows"]

#: unsigned indices: Numba then skips the negative-index wraparound, which otherwise blocks
#: vectorisation of the inner loops (4x slower lowering)
U = np.uintp


@njit(inline="always")
def _plane_in(x, n0, c, pt, pl, xs):
    """``xs`` (Hp, Wp, nb): channel ``c`` of samples ``n0 <= n < n0 + nb`` of ``x``, batch
    last, at offset ``(pt, pl)`` with zeros around."""
    H, W = x.shape[2], x.shape[3]
    Hp, Wp, nb = xs.shape
    for h in range(Hp):
        for w in range(Wp):
            dst = xs[U(h), U(w)]
            ih, iw = h - pt, w - pl
            if ih < 0 or ih >= H or iw < 0 or iw >= W:
                for n in range(nb):
                    dst[U(n)] = 0
            else:
                for n in range(nb):
                    dst[U(n)] = x[U(n0 + n), U(c), U(ih), U(iw)]


@njit(inline="always")
def _valid(n_out, start, step, size):
    """``[lo, hi)``: the outputs ``o`` whose input position ``start + o*step`` is in
    ``[0, size)``."""
    lo = 0
    if start < 0:
        lo = (-start + step - 1) // step
    last = size - 1 - start  # o*step <= last
    hi = 0 if last < 0 else min(n_out, last // step + 1)
    return lo, max(lo, hi)


@njit(inline="always")
def _lower_rows_nmajor(x, n0, c, pt, pl, sh, sw, dh, dw, kh, kw, OH, OW, cols):
    """:func:`lower`'s rows of channel ``c`` with sample-major columns ``n*P + p``: runs of
    up to ``OW`` values read straight from ``x``, zeros in the padding."""
    H, W = x.shape[2], x.shape[3]
    nb = cols.shape[1] // max(OH * OW, 1)
    for i in range(kh):
        for j in range(kw):
            row = cols[U((c * kh + i) * kw + j)]
            w0 = j * dw - pl
            ow_lo, ow_hi = _valid(OW, w0, sw, W)
            for n in range(nb):
                for oh in range(OH):
                    base = (n * OH + oh) * OW
                    ih = oh * sh + i * dh - pt
                    if ih < 0 or ih >= H:
                        for ow in range(OW):
                            row[U(base + ow)] = 0
                        continue
                    src = x[U(n0 + n), U(c), U(ih)]
                    for ow in range(ow_lo):
                        row[U(base + ow)] = 0
                    for ow in range(ow_lo, ow_hi):
                        row[U(base + ow)] = src[U(w0 + ow * sw)]
                    for ow in range(ow_hi, OW):
                        row[U(base + ow)] = 0


@njit(inline="always")
def _tap_runs(row, plane, i, j, sh, sw, dh, dw, OH, OW, nb, adjoint):
    """Batch-last patch row ``row`` of tap ``(i, j)`` and the padded plane ``plane``
    (Hp, Wp*nb): ``row`` gets the plane's values, or (``adjoint``) is added to them. Stride 1
    moves one run of ``OW*nb`` values per output row, else runs of ``nb``."""
    run = OW * nb
    for oh in range(OH):
        prow = plane[U(oh * sh + i * dh)]
        base = oh * run
        if sw == 1:
            p0 = j * dw * nb
            if adjoint:
                for q in range(run):
                    prow[U(p0 + q)] += row[U(base + q)]
            else:
                for q in range(run):
                    row[U(base + q)] = prow[U(p0 + q)]
        else:
            for ow in range(OW):
                p0 = (ow * sw + j * dw) * nb
                r0 = base + ow * nb
                if adjoint:
                    for n in range(nb):
                        prow[U(p0 + n)] += row[U(r0 + n)]
                else:
                    for n in range(nb):
                        row[U(r0 + n)] = prow[U(p0 + n)]


@cached_njit(nogil=True, error_model="numpy")
def lower(lo, hi, x, n0, bl, pt, pl, sh, sw, dh, dw, kh, kw, OH, OW, Hp, Wp, cols):
    """The rows of input channels ``lo <= c < hi`` of the patch matrix ``cols``
    (C*kh*kw, OH*OW*nb) of the samples ``n0 <= n < n0 + nb`` of ``x`` (N, C, H, W) padded to
    ``Hp x Wp`` (``pt`` rows on top, ``pl`` columns on the left); columns batch-last
    (``bl``: ``p*nb + n``) or sample-major (``n*P + p``)."""
    nb = cols.shape[1] // max(OH * OW, 1)
    if not bl:
        for c in range(max(lo, 0), hi):
            _lower_rows_nmajor(x, n0, c, pt, pl, sh, sw, dh, dw, kh, kw, OH, OW, cols)
        return
    xs = np.empty((Hp, Wp, nb), x.dtype)
    for c in range(max(lo, 0), hi):
        _plane_in(x, n0, c, pt, pl, xs)
        flat = xs.reshape(Hp, Wp * nb)
        for i in range(kh):
            for j in range(kw):
                _tap_runs(cols[U((c * kh + i) * kw + j)], flat, i, j, sh, sw, dh, dw, OH, OW,
                          nb, False)


@njit(inline="always")
def _unlower_nmajor(dcols, n0, c, pt, pl, sh, sw, dh, dw, kh, kw, OH, OW, out):
    """:func:`unlower` of channel ``c`` from sample-major columns."""
    H, W = out.shape[2], out.shape[3]
    nb = dcols.shape[1] // max(OH * OW, 1)
    for n in range(nb):
        plane = out[U(n0 + n), U(c)]
        for ih in range(H):
            for iw in range(W):
                plane[U(ih), U(iw)] = 0
        for i in range(kh):
            h0 = i * dh - pt
            oh_lo, oh_hi = _valid(OH, h0, sh, H)
            for j in range(kw):
                w0 = j * dw - pl
                ow_lo, ow_hi = _valid(OW, w0, sw, W)
                row = dcols[U((c * kh + i) * kw + j)]
                for oh in range(oh_lo, oh_hi):
                    dst = plane[U(h0 + oh * sh)]
                    base = (n * OH + oh) * OW
                    for ow in range(ow_lo, ow_hi):
                        dst[U(w0 + ow * sw)] += row[U(base + ow)]


@cached_njit(nogil=True, error_model="numpy")
def unlower(lo, hi, dcols, n0, bl, pt, pl, sh, sw, dh, dw, kh, kw, OH, OW, Hp, Wp, out):
    """Adjoint of :func:`lower`: channels ``lo <= c < hi`` of the samples ``n0 <= n < n0 +
    nb`` of ``out`` (N, C, H, W) set to the sum of the patch entries of ``dcols`` taken from
    them (taps in ``(i, j)`` order, then output pixels in order; a channel owns its pixels)."""
    H, W = out.shape[2], out.shape[3]
    nb = dcols.shape[1] // max(OH * OW, 1)
    if not bl:
        for c in range(max(lo, 0), hi):
            _unlower_nmajor(dcols, n0, c, pt, pl, sh, sw, dh, dw, kh, kw, OH, OW, out)
        return
    acc = np.empty((Hp, Wp * nb), dcols.dtype)
    for c in range(max(lo, 0), hi):
        acc[:] = 0
        for i in range(kh):
            for j in range(kw):
                _tap_runs(dcols[U((c * kh + i) * kw + j)], acc, i, j, sh, sw, dh, dw, OH, OW,
                          nb, True)
        for n in range(nb):
            for h in range(H):
                src = acc[U(h + pt)]
                dst = out[U(n0 + n), U(c), U(h)]
                for w in range(W):
                    dst[U(w)] = src[U((w + pl) * nb + n)]


@njit(inline="always")
def _columns(bl, nb, P):
    """Steps of a patch column ``s(n, p) = n*sn + p*sp`` per sample and per pixel:
    batch-last (``bl``: ``p*nb + n``) or sample-major (``n*P + p``)."""
    return (1, nb) if bl else (P, 1)


@cached_njit(nogil=True, error_model="numpy")
def cn_to_nc(lo, hi, y, b, n0, bl, out):
    """``out[n0 + n, o, p] = y[o, s(n, p)] (+ b[o])`` for the output channels ``lo <= o <
    hi``: a GEMM result (O, P*nb) in NCHW (``out`` (N, O, P)); ``b`` (O,) or None; columns
    as :func:`_columns` says."""
    P = out.shape[2]
    nb = y.shape[1] // max(P, 1)
    sn, sp = _columns(bl, nb, P)
    for o in range(max(lo, 0), hi):
        src = y[U(o)]
        for n in range(nb):
            dst = out[U(n0 + n), U(o)]
            if b is None:
                for p in range(P):
                    dst[U(p)] = src[U(n * sn + p * sp)]
            else:
                bo = b[o]
                for p in range(P):
                    dst[U(p)] = src[U(n * sn + p * sp)] + bo


@cached_njit(nogil=True, error_model="numpy")
def nc_to_cn(lo, hi, g, n0, bl, gc):
    """The adjoint move: ``gc[o, s(n, p)] = g[n0 + n, o, p]`` for the output channels
    ``lo <= o < hi`` of the NCHW gradient ``g`` (N, O, P)."""
    P = g.shape[2]
    nb = gc.shape[1] // max(P, 1)
    sn, sp = _columns(bl, nb, P)
    for o in range(max(lo, 0), hi):
        dst = gc[U(o)]
        for n in range(nb):
            src = g[U(n0 + n), U(o)]
            for p in range(P):
                dst[U(n * sn + p * sp)] = src[U(p)]


#: samples per segment of the bias gradient's lanes (see :func:`bias_grad`)
BIAS_SEGMENT = 32


@cached_njit(nogil=True, error_model="numpy")
def bias_grad(lo, hi, g, out):
    """``out[o] = sum(g[:, o, :])`` for the channels ``lo <= o < hi`` of ``g`` (N, O, P): the
    bias gradient. Position ``p`` of the samples of each segment of ``BIAS_SEGMENT`` is
    added into segment lane ``p`` in float64 (the lanes are independent, so the loop
    vectorises without reassociation), each segment's lanes into the lanes in order, then
    the lanes in order; one rounding to ``out``'s dtype. (The segments are what a GPU runs
    in parallel -- ``jitgrad/cuda/conv.py`` -- in this order, with these bits.)"""
    N, P = g.shape[0], g.shape[2]
    lanes = np.empty(P, np.float64)
    seg = np.empty(P, np.float64)
    for o in range(max(lo, 0), hi):
        lanes[:] = 0
        for n0 in range(0, N, BIAS_SEGMENT):
            seg[:] = 0
            for n in range(n0, min(n0 + BIAS_SEGMENT, N)):
                src = g[U(n), U(o)]
                for p in range(P):
                    seg[U(p)] += src[U(p)]
            for p in range(P):
                lanes[U(p)] += seg[U(p)]
        s = 0.0
        for p in range(P):
            s += lanes[U(p)]
        out[o] = s


# ------------------------------------------------------------------ the row layout
# Patches as rows (used by jitgrad.ops.conv for ungrouped convolutions with patches of at
# least SMALL_K taps): ``rows[n*P + p, (i*kw + j)*C + c]`` = ``xp[n, c, oh*sh + i*dh,
# ow*sw + j*dw]`` -- one row per output pixel ``p = oh*OW + ow`` of sample ``n`` of a chunk,
# its taps in (i, j, c) order, so a tap's channels are one contiguous run (the input moved
# channels-last first). OpenBLAS multiplies the GEMMs of this form (pixels as the long
# first dimension) faster: see jitgrad.ops.conv.ROWS. A part is a sample: it owns
# its rows and its output image.


@njit(inline="always")
def _hwc_padded(x, n, pt, pl, xs):
    """``xs`` (Hp, Wp, C): sample ``n`` of ``x`` (N, C, H, W) channels-last at offset
    ``(pt, pl)``, zeros around."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    xs[:] = 0
    for c in range(C):
        for h in range(H):
            src = x[U(n), U(c), U(h)]
            dst = xs[U(h + pt)]
            for w in range(W):
                dst[U(w + pl), U(c)] = src[U(w)]


@njit(inline="always")
def _row_taps(rows, n, plane, sh, sw, dh, dw, kh, kw, OH, OW, adjoint):
    """The patch rows of sample ``n`` of a chunk and its padded channels-last image
    ``plane`` (Hp, Wp, C): each row gets its taps' channel runs from the image, or
    (``adjoint``) they are added to the image (pixels in order, then taps)."""
    C = plane.shape[2]
    for oh in range(OH):
        for ow in range(OW):
            row = rows[U((n * OH + oh) * OW + ow)]
            for i in range(kh):
                for j in range(kw):
                    px = plane[U(oh * sh + i * dh), U(ow * sw + j * dw)]
                    base = (i * kw + j) * C
                    if adjoint:
                        for c in range(C):
                            px[U(c)] += row[U(base + c)]
                    else:
                        for c in range(C):
                            row[U(base + c)] = px[U(c)]


@cached_njit(nogil=True, error_model="numpy")
def lower_rows(lo, hi, x, n0, pt, pl, sh, sw, dh, dw, kh, kw, OH, OW, Hp, Wp, rows):
    """The rows of samples ``n0 + lo <= n < n0 + hi`` of the patch rows ``rows``
    (nb*OH*OW, kh*kw*C) of ``x`` (N, C, H, W) padded to ``Hp x Wp``."""
    C = x.shape[1]
    xs = np.empty((Hp, Wp, C), x.dtype)
    for n in range(max(lo, 0), hi):
        _hwc_padded(x, n0 + n, pt, pl, xs)
        _row_taps(rows, n, xs, sh, sw, dh, dw, kh, kw, OH, OW, False)


@cached_njit(nogil=True, error_model="numpy")
def unlower_rows(lo, hi, drows, n0, pt, pl, sh, sw, dh, dw, kh, kw, OH, OW, Hp, Wp, out):
    """Adjoint of :func:`lower_rows`: samples ``n0 + lo <= n < n0 + hi`` of ``out``
    (N, C, H, W) set to the sum of the patch entries of ``drows`` taken from them (output
    pixels in order, then taps in (i, j) order; a sample owns its image)."""
    C, H, W = out.shape[1], out.shape[2], out.shape[3]
    acc = np.empty((Hp, Wp, C), drows.dtype)
    for n in range(max(lo, 0), hi):
        acc[:] = 0
        _row_taps(drows, n, acc, sh, sw, dh, dw, kh, kw, OH, OW, True)
        img = out[U(n0 + n)]
        for c in range(C):
            for h in range(H):
                src = acc[U(h + pt)]
                dst = img[U(c), U(h)]
                for w in range(W):
                    dst[U(w)] = src[U(w + pl), U(c)]


@cached_njit(nogil=True, error_model="numpy")
def rows_to_nc(lo, hi, y, b, n0, out):
    """``out[n0 + n, o, p] = y[n*P + p, o] (+ b[o])`` for the samples ``lo <= n < hi`` of a
    chunk: a GEMM result in the row layout (nb*P, O) in NCHW (``out`` (N, O, P))."""
    Co, P = out.shape[1], out.shape[2]
    for n in range(max(lo, 0), hi):
        img = out[U(n0 + n)]
        for p in range(P):
            src = y[U(n * P + p)]
            if b is None:
                for o in range(Co):
                    img[U(o), U(p)] = src[U(o)]
            else:
                for o in range(Co):
                    img[U(o), U(p)] = src[U(o)] + b[U(o)]


@cached_njit(nogil=True, error_model="numpy")
def nc_to_rows(lo, hi, g, n0, gr):
    """The adjoint move: ``gr[n*P + p, o] = g[n0 + n, o, p]`` for the samples ``lo <= n <
    hi`` of a chunk of the NCHW gradient ``g`` (N, O, P)."""
    Co, P = g.shape[1], g.shape[2]
    for n in range(max(lo, 0), hi):
        img = g[U(n0 + n)]
        for p in range(P):
            dst = gr[U(n * P + p)]
            for o in range(Co):
                dst[U(o)] = img[U(o), U(p)]
