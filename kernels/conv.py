"""Convolution kernels (NCHW): blocked patch lowering fused with a GEMM.

A 2-D convolution is a matrix product on a *patch matrix* ("im2col"): the patch of output
pixel ``(n, oh, ow)`` holds ``xp[n, c, oh*sh + i*dh, ow*sw + j*dw]`` for every tap ``(c, i, j)``
of the zero-padded input ``xp``, and ``out[n, o, oh, ow] = w[o] . patch`` within each group.
The kernels never build the whole patch matrix: the work is split into blocks of about
:data:`BLOCK_COLS` output pixels (whole output rows, possibly spanning samples); each block is
lowered into a small buffer that stays in cache and multiplied at once:

- long patches (``C/groups*kh*kw >= DOT_MIN_K``): patch vectors contiguous (``colsT``) and
  dot products in 4x3 blocks (:func:`_mm_nt`), whose accumulators stay in registers;
- short patches (the first layer of a CNN on 1-channel images): one row per tap (``cols``) and
  four output channels at a time across the pixels (:func:`_mm`).

Measured on the project machine (2 cores, shared), this beats lowering the whole batch into one
patch matrix + one OpenBLAS GEMM by 1.1-6x: OpenBLAS's threads compete with Numba's for the
cores, and the full patch matrix (9x the input for a 3x3 kernel) streams through memory twice.

Gradients: of the weight, per block ``g_block @ cols_block^T`` into the block's own slot of
``partial`` (summed by the caller in block order, so the result does not depend on the thread
count); of the input, a convolution of ``g`` with the flipped kernel when the stride is 1 (the
caller uses :func:`conv2d_forward`), else blocks of whole samples: ``w^T @ g_block`` in patch
form added back to the pixels the patches came from ("col2im"), race-free across threads
because a block owns its samples.

Every kernel computes parts ``[lo, hi)`` (blocks, or planes for :func:`pad`) and releases the
GIL: the caller runs ``k(0, parts, ...)`` on its own thread, or splits the parts over threads
with :func:`jitgrad.kernels.pool.run_parts`; :func:`row_blocks` and :func:`sample_blocks` size
the blocks. A call allocates its block buffers once and reuses them for each of its blocks.
Pooling kernels are in :mod:`jitgrad.kernels.pooling`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cached import cached_njit

__all__ = ["pad", "conv2d_forward", "conv2d_backward_input", "conv2d_backward_weight",
           "row_blocks", "sample_blocks", "n_blocks", "BLOCK_COLS", "WGRAD_BLOCK_COLS", "DOT_MIN_K"]

#: unsigned indices: Numba then skips the negative-index wraparound, which otherwise blocks
#: vectorisation of the inner loops (4x slower lowering)
U = np.uintp
#: output pixels per block of the forward and input-gradient kernels (buffers stay in L2)
BLOCK_COLS = 256
#: output pixels per block of the weight gradient (fewer partial sums to add up)
WGRAD_BLOCK_COLS = 1024
#: columns per GEMM tile (the tile of ``b`` and four rows of ``c`` stay in cache)
_TILE = 256

# reassoc/contract only: NaN and inf propagate as in PyTorch (no nnan/ninf)
_FM = {"contract", "reassoc"}


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


def row_blocks(n_rows: int, ow: int, target: int) -> int:
    """Output rows per block so that a block covers about ``target`` output pixels (called
    from Python: the caller passes it to the kernels and counts the blocks)."""
    return max(1, min(n_rows, target // max(ow, 1)))


def sample_blocks(n: int, npix: int, target: int) -> int:
    """Samples per block so that a block covers about ``target`` output pixels."""
    return max(1, min(max(n, 1), target // max(npix, 1)))


def n_blocks(n: int, per_block: int) -> int:
    """How many blocks of ``per_block`` rows (or samples) cover ``n``."""
    return -(-n // per_block)


# ----------------------------------------------------------------------- GEMM micro-kernels
@njit(inline="always")
def _mm(a, a_r0, m, kk, b, b_r0, c, c_r0, ncols):
    """``c[c_r0:c_r0+m, :ncols] = a[a_r0:a_r0+m, :kk] @ b[b_r0:b_r0+kk, :ncols]``: four rows
    of ``c`` at a time (each element of ``b`` loaded once for four multiply-adds), in column
    tiles of ``_TILE``; the inner loop vectorises over columns."""
    for t0 in range(0, ncols, _TILE):
        t1 = min(t0 + _TILE, ncols)
        i = 0
        while i + 4 <= m:
            c0 = c[U(c_r0 + i)]
            c1 = c[U(c_r0 + i + 1)]
            c2 = c[U(c_r0 + i + 2)]
            c3 = c[U(c_r0 + i + 3)]
            for q in range(t0, t1):
                c0[U(q)] = 0
                c1[U(q)] = 0
                c2[U(q)] = 0
                c3[U(q)] = 0
            for k in range(kk):
                w0 = a[U(a_r0 + i), U(k)]
                w1 = a[U(a_r0 + i + 1), U(k)]
                w2 = a[U(a_r0 + i + 2), U(k)]
                w3 = a[U(a_r0 + i + 3), U(k)]
                br = b[U(b_r0 + k)]
                for q in range(t0, t1):
                    v = br[U(q)]
                    c0[U(q)] += w0 * v
                    c1[U(q)] += w1 * v
                    c2[U(q)] += w2 * v
                    c3[U(q)] += w3 * v
            i += 4
        while i < m:
            c0 = c[U(c_r0 + i)]
            for q in range(t0, t1):
                c0[U(q)] = 0
            for k in range(kk):
                w0 = a[U(a_r0 + i), U(k)]
                br = b[U(b_r0 + k)]
                for q in range(t0, t1):
                    c0[U(q)] += w0 * br[U(q)]
            i += 1


@njit(inline="always")
def _dot2(x, x_c0, y0, y1, y_c0, n, zero):
    s0 = zero
    s1 = zero
    for q in range(n):
        v = x[U(x_c0 + q)]
        s0 += v * y0[U(y_c0 + q)]
        s1 += v * y1[U(y_c0 + q)]
    return s0, s1


@njit(inline="always")
def _mm_nt(a, a_r0, a_c0, m, b, b_r0, b_c0, n, kk, c, c_r0):
    """``c[c_r0 + i, j] = a[a_r0 + i, a_c0:a_c0+kk] . b[b_r0 + j, b_c0:b_c0+kk]`` for
    ``i < m, j < n`` (``a @ b^T``): 4x3 blocks of dot products, so each loaded vector feeds
    three or four accumulators that LLVM keeps in registers (``reassoc``); 4x3 measured
    1.1-1.6x faster than 4x2 or 3x3 for patch lengths 144-576."""
    z = c.dtype.type(0)
    i = 0
    while i + 4 <= m:
        a0 = a[U(a_r0 + i)]
        a1 = a[U(a_r0 + i + 1)]
        a2 = a[U(a_r0 + i + 2)]
        a3 = a[U(a_r0 + i + 3)]
        j = 0
        while j + 3 <= n:
            b0 = b[U(b_r0 + j)]
            b1 = b[U(b_r0 + j + 1)]
            b2 = b[U(b_r0 + j + 2)]
            s00 = s01 = s02 = s10 = s11 = s12 = s20 = s21 = s22 = s30 = s31 = s32 = z
            for q in range(kk):
                u0 = b0[U(b_c0 + q)]
                u1 = b1[U(b_c0 + q)]
                u2 = b2[U(b_c0 + q)]
                v = a0[U(a_c0 + q)]
                s00 += v * u0
                s01 += v * u1
                s02 += v * u2
                v = a1[U(a_c0 + q)]
                s10 += v * u0
                s11 += v * u1
                s12 += v * u2
                v = a2[U(a_c0 + q)]
                s20 += v * u0
                s21 += v * u1
                s22 += v * u2
                v = a3[U(a_c0 + q)]
                s30 += v * u0
                s31 += v * u1
                s32 += v * u2
            r0 = c[U(c_r0 + i)]
            r1 = c[U(c_r0 + i + 1)]
            r2 = c[U(c_r0 + i + 2)]
            r3 = c[U(c_r0 + i + 3)]
            r0[U(j)], r0[U(j + 1)], r0[U(j + 2)] = s00, s01, s02
            r1[U(j)], r1[U(j + 1)], r1[U(j + 2)] = s10, s11, s12
            r2[U(j)], r2[U(j + 1)], r2[U(j + 2)] = s20, s21, s22
            r3[U(j)], r3[U(j + 1)], r3[U(j + 2)] = s30, s31, s32
            j += 3
        while j < n:
            b0 = b[U(b_r0 + j)]
            s0, s1 = _dot2(b0, b_c0, a0, a1, a_c0, kk, z)
            s2, s3 = _dot2(b0, b_c0, a2, a3, a_c0, kk, z)
            c[U(c_r0 + i), U(j)] = s0
            c[U(c_r0 + i + 1), U(j)] = s1
            c[U(c_r0 + i + 2), U(j)] = s2
            c[U(c_r0 + i + 3), U(j)] = s3
            j += 1
        i += 4
    while i < m:
        a0 = a[U(a_r0 + i)]
        j = 0
        while j + 2 <= n:
            s0, s1 = _dot2(a0, a_c0, b[U(b_r0 + j)], b[U(b_r0 + j + 1)], b_c0, kk, z)
            c[U(c_r0 + i), U(j)] = s0
            c[U(c_r0 + i), U(j + 1)] = s1
            j += 2
        if j < n:
            s0, _ = _dot2(a0, a_c0, b[U(b_r0 + j)], b[U(b_r0 + j)], b_c0, kk, z)
            c[U(c_r0 + i), U(j)] = s0
        i += 1


# ------------------------------------------------------------------ lowering and its adjoint
@njit(inline="always")
def _pad_plane(x, t, pt, pl, out):
    C = x.shape[1]
    n = U(t // C)
    c = U(t % C)
    H, W = x.shape[2], x.shape[3]
    Hp, Wp = out.shape[2], out.shape[3]
    for h in range(Hp):
        dst = out[n, c, U(h)]
        ih = h - pt
        if ih < 0 or ih >= H:
            for w in range(Wp):
                dst[U(w)] = 0
            continue
        src = x[n, c, U(ih)]
        for w in range(pl):
            dst[U(w)] = 0
        for w in range(W):
            dst[U(pl + w)] = src[U(w)]
        for w in range(pl + W, Wp):
            dst[U(w)] = 0


@cached_njit(nogil=True, error_model="numpy")
def pad(lo, hi, x, pt, pl, out):
    """``out`` (N, C, H + pt + pb, W + pl + pr): ``x`` at offset ``(pt, pl)``, zeros around,
    for the planes ``lo <= t < hi`` (``t = n*C + c``)."""
    for t in range(max(lo, 0), hi):  # (t >= 0: see _nonneg)
        _pad_plane(x, t, pt, pl, out)


@njit(inline="always")
def _lower_t(xp, q0, q1, OH, OW, sh, sw, dh, dw, kh, kw, colsT):
    """Patch vectors of the output pixels of rows ``q0 <= q < q1`` (``q = n*OH + oh``) of the
    padded input ``xp``: ``colsT[(q - q0)*OW + ow] = xp[n, :, oh*sh + (0..kh)*dh,
    ow*sw + (0..kw)*dw]`` flattened in ``(c, i, j)`` order."""
    C = xp.shape[1]
    for q in range(q0, q1):
        n = U(q // OH)
        oh = q % OH
        for ow in range(OW):
            dst = colsT[U((q - q0) * OW + ow)]
            r = 0
            for c in range(C):
                for i in range(kh):
                    src = xp[n, U(c), U(oh * sh + i * dh)]
                    b = ow * sw
                    for j in range(kw):
                        dst[U(r + j)] = src[U(b + j * dw)]
                    r += kw


@njit(inline="always")
def _lower(xp, q0, q1, OH, OW, sh, sw, dh, dw, kh, kw, cols):
    """Transpose of :func:`_lower_t`: ``cols`` (C*kh*kw, (q1 - q0)*OW), a row per tap."""
    for r in range(xp.shape[1] * kh * kw):
        c = U(r // (kh * kw))
        i = (r // kw) % kh
        j = r % kw
        row = cols[U(r)]
        for q in range(q0, q1):
            n = U(q // OH)
            src = xp[n, c, U(q % OH * sh + i * dh)]
            base = (q - q0) * OW
            b = j * dw
            for ow in range(OW):
                row[U(base + ow)] = src[U(ow * sw + b)]


@njit(inline="always")
def _unlower(cols, q0, q1, OH, OW, sh, sw, pt, pl, dh, dw, kh, kw, out):
    """Adjoint of :func:`_lower` on the unpadded ``out``: add the patch entries of rows
    ``q0 <= q < q1`` back to the pixels they were taken from (``out`` zeroed by the caller)."""
    H, W = out.shape[2], out.shape[3]
    for r in range(out.shape[1] * kh * kw):
        c = U(r // (kh * kw))
        h0 = (r // kw) % kh * dh - pt
        w0 = r % kw * dw - pl
        oh_lo, oh_hi = _valid(OH, h0, sh, H)
        ow_lo, ow_hi = _valid(OW, w0, sw, W)
        row = cols[U(r)]
        for q in range(q0, q1):
            oh = q % OH
            if oh < oh_lo or oh >= oh_hi:
                continue
            n = U(q // OH)
            ih = U(h0 + oh * sh)
            base = (q - q0) * OW
            for ow in range(ow_lo, ow_hi):
                out[n, c, ih, U(w0 + ow * sw)] += row[U(base + ow)]


@njit(inline="always")
def _gather(g, q0, q1, gb):
    """``gb[o, (q - q0)*OW + ow] = g[n, o, oh, ow]``: output rows as GEMM columns."""
    OH, OW = g.shape[2], g.shape[3]
    for o in range(g.shape[1]):
        row = gb[U(o)]
        for q in range(q0, q1):
            n = U(q // OH)
            oh = U(q % OH)
            base = (q - q0) * OW
            for ow in range(OW):
                row[U(base + ow)] = g[n, U(o), oh, U(ow)]


# -------------------------------------------------------------------------- conv kernels
#: patch length from which the forward multiplies in dot-product form (patch vectors
#: contiguous, accumulators in registers); below it the per-tap row form is faster
DOT_MIN_K = 32


@njit(inline="always")
def _nonneg(lo, per_block):
    """``lo`` clamped to >= 0 and the block size to >= 1: LLVM then knows that block and row
    indices are not negative, so Python's floor ``//`` and ``%`` in the lowering loops compile
    to plain unsigned arithmetic (with a signed ``lo`` argument the weight gradient ran 12-15%
    slower than with the block loop starting at 0)."""
    return max(lo, 0), max(per_block, 1)


@njit(inline="always")
def _fwd_block(xp, w2, b, t, rows, sh, sw, dh, dw, kh, kw, groups, out, y, buf):
    """Output rows ``[t*rows, (t+1)*rows)`` of ``out``; ``y`` (O, rows*OW) and ``buf`` (the
    patch buffer, either layout) are scratch at least one block large."""
    Co, Kg = w2.shape
    Og = Co // groups
    OH, OW = out.shape[2], out.shape[3]
    q0 = t * rows
    q1 = min(q0 + rows, out.shape[0] * OH)
    m = (q1 - q0) * OW
    if Kg >= DOT_MIN_K:
        _lower_t(xp, q0, q1, OH, OW, sh, sw, dh, dw, kh, kw, buf)
        for gi in range(groups):
            _mm_nt(w2, gi * Og, 0, Og, buf, 0, gi * Kg, m, Kg, y, gi * Og)
    else:
        _lower(xp, q0, q1, OH, OW, sh, sw, dh, dw, kh, kw, buf)
        for gi in range(groups):
            _mm(w2, gi * Og, Og, Kg, buf, gi * Kg, y, gi * Og, m)
    for o in range(Co):
        row = y[U(o)]
        if b is not None:
            bo = b[o]
            for q in range(m):
                row[U(q)] += bo
        for q in range(q0, q1):
            n = U(q // OH)
            oh = U(q % OH)
            base = (q - q0) * OW
            for ow in range(OW):
                out[n, U(o), oh, U(ow)] = row[U(base + ow)]


@cached_njit(nogil=True, fastmath=_FM, error_model="numpy")
def conv2d_forward(lo, hi, xp, w2, b, rows, sh, sw, dh, dw, kh, kw, groups, out):
    """``out`` (N, O, OH, OW) = conv of the padded input ``xp`` (N, C, Hp, Wp) with ``w2``
    (O, C/groups*kh*kw) (+ ``b`` (O,) or None): blocks ``lo <= t < hi`` of ``rows`` output
    rows (``q = n*OH + oh``) each (``rows = row_blocks(N*OH, OW, BLOCK_COLS)``)."""
    Co, Kg = w2.shape
    lo, rows = _nonneg(lo, rows)
    m = rows * out.shape[3]
    y = np.empty((Co, m), xp.dtype)
    if Kg >= DOT_MIN_K:  # patch vectors contiguous (colsT) / a row per tap (cols)
        buf = np.empty((m, Kg * groups), xp.dtype)
    else:
        buf = np.empty((Kg * groups, m), xp.dtype)
    for t in range(lo, hi):
        _fwd_block(xp, w2, b, t, rows, sh, sw, dh, dw, kh, kw, groups, out, y, buf)


@njit(inline="always")
def _bwd_input_block(g, wt, t, nb, sh, sw, pt, pl, dh, dw, kh, kw, groups, out, gb, dcols):
    N, Co, OH, OW = g.shape
    Kg, Og = wt.shape[0] // groups, wt.shape[1]
    n0 = t * nb
    n1 = min(n0 + nb, N)
    q0 = n0 * OH
    q1 = n1 * OH
    m = (q1 - q0) * OW
    _gather(g, q0, q1, gb)
    for gi in range(groups):
        _mm(wt, gi * Kg, Kg, Og, gb, gi * Og, dcols, gi * Kg, m)
    for n in range(n0, n1):
        for c in range(out.shape[1]):
            for ih in range(out.shape[2]):
                for iw in range(out.shape[3]):
                    out[U(n), U(c), U(ih), U(iw)] = 0
    _unlower(dcols, q0, q1, OH, OW, sh, sw, pt, pl, dh, dw, kh, kw, out)


@cached_njit(nogil=True, fastmath=_FM, error_model="numpy")
def conv2d_backward_input(lo, hi, g, wt, nb, sh, sw, pt, pl, dh, dw, kh, kw, groups, out):
    """``out`` (N, C, H, W): gradient of the input for output gradient ``g`` (N, O, OH, OW)
    of a convolution with any stride, for the blocks ``lo <= t < hi`` of ``nb`` samples each
    (``nb = sample_blocks(N, OH*OW, BLOCK_COLS)``; a block owns its samples' pixels). ``wt``
    (C*kh*kw, O/groups) stacks each group's transposed ``(O/groups, C/groups*kh*kw)`` weight
    matrix. (Stride 1 is a convolution of ``g`` with the flipped kernel: the caller uses
    :func:`conv2d_forward` for it.)"""
    lo, nb = _nonneg(lo, nb)
    m = nb * g.shape[2] * g.shape[3]
    gb = np.empty((g.shape[1], m), g.dtype)
    dcols = np.empty((wt.shape[0], m), g.dtype)
    for t in range(lo, hi):
        _bwd_input_block(g, wt, t, nb, sh, sw, pt, pl, dh, dw, kh, kw, groups, out, gb, dcols)


@njit(inline="always")
def _bwd_weight_block(g, xp, t, rows, sh, sw, dh, dw, kh, kw, groups, partial, gb, cols):
    N, Co, OH, OW = g.shape
    Kg = partial.shape[2]
    Og = Co // groups
    q0 = t * rows
    q1 = min(q0 + rows, N * OH)
    m = (q1 - q0) * OW
    _gather(g, q0, q1, gb)
    _lower(xp, q0, q1, OH, OW, sh, sw, dh, dw, kh, kw, cols)
    dst = partial[U(t)]
    for gi in range(groups):
        _mm_nt(gb, gi * Og, 0, Og, cols, gi * Kg, 0, Kg, m, dst, gi * Og)


@cached_njit(nogil=True, fastmath=_FM, error_model="numpy")
def conv2d_backward_weight(lo, hi, g, xp, rows, sh, sw, dh, dw, kh, kw, groups, partial):
    """``partial[t]`` (O, C/groups*kh*kw) for ``lo <= t < hi``: the weight gradient from block
    ``t`` of ``rows`` output rows (``rows = row_blocks(N*OH, OW, WGRAD_BLOCK_COLS)``) for the
    padded input ``xp``; the caller sums over ``t`` in block order."""
    lo, rows = _nonneg(lo, rows)
    m = rows * g.shape[3]
    gb = np.empty((g.shape[1], m), g.dtype)
    cols = np.empty((xp.shape[1] * kh * kw, m), g.dtype)
    for t in range(lo, hi):
        _bwd_weight_block(g, xp, t, rows, sh, sw, dh, dw, kh, kw, groups, partial, gb, cols)
