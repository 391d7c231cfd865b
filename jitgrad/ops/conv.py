"""2-D convolution (NCHW), with torch.nn.functional's signatures and semantics.

Primitives (each a registered op with a VJP written with registered ops, so double backward
and tracing work): ``conv2d(x, w, b)`` -> ``ConvolutionBackward0``; its gradients are the ops
``conv2d_backward_input(g, w)`` (a transposed convolution, linear in ``g`` and in ``w``) and
``conv2d_backward_weight(g, x)`` (linear in ``g`` and in ``x``), both
``ConvolutionBackwardBackward0`` as in PyTorch; the VJPs of these two are again convolutions
of the three kinds. The bias gradient is the op ``conv2d_backward_bias(g)`` (``g`` summed
over N, H and W by one kernel; the generic sum moved the channels first, 2x slower).

Kernels: ungrouped convolutions with patches of at least ``SMALL_K`` taps multiply patch
*rows* (a row per output pixel, taps in (i, j, c) order: ``rows @ wt``, ``g_rows @ wr``,
``rows.T @ g_rows``, :func:`_rows_layout`); the others a patch matrix ("im2col",
:mod:`jitgrad.kernels.conv`) per chunk of samples and
one NumPy (OpenBLAS) GEMM per group, with the result in its final layout: the forward's GEMM
``w2 @ cols`` (O, N*OH*OW) written in NCHW with the bias added by one pass; the weight
gradient ``g @ cols^T``; the input gradient ``w2^T @ g`` in patch form added back to the
pixels ("col2im"). Eager and compiled mode call these same functions (a plan's conv is a
call step), so they give the same bits. Padding is a 4-tuple ``(top, bottom, left, right)``
in the op params because ``padding="same"`` with an even dilated kernel pads one more pixel
at the bottom/right. Only float32/float64 are implemented (PyTorch also convolves integer
tensors).

On CUDA arrays the same array functions run :mod:`jitgrad.cuda.conv` (the same
formulation: CUDA kernels for the lowering and its adjoint, cuBLAS GEMMs).

Pooling lives in :mod:`jitgrad.ops.pooling`; its public names are re-exported here.
"""

from __future__ import annotations

import numpy as np

from ..amp.autocast_mode import autocast_op
from ..devices import check_same_device
from ..dtypes import from_numpy_dtype
from ..kernels.parallel import note_blas
from ..shapes import fmt_shape
from ..tensor import Tensor
from . import samples as S
from .api import api
from .conv_common import (
    _big,
    _check_float,
    _ints,
    _is_cuda,
    _kernel_module,
    _launch,
    _on_cuda,
    _pad,
    _run,
    _windows,
    half_through_float,
)
from .dispatch import as_tensor_arg
from .pooling import (
    adaptive_avg_pool2d,
    adaptive_avg_pool2d_backward,
    avg_pool2d,
    avg_pool2d_backward,
    max_pool2d,
    max_pool2d_backward,
)
from .registry import OPAQUE, defop

__all__ = ["conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "conv2d_backward_input",
           "conv2d_backward_weight", "max_pool2d_backward", "avg_pool2d_backward",
           "adaptive_avg_pool2d_backward", "conv2d_backward_bias"]

_k = _kernel_module("conv")


# ------------------------------------------------------------------- array implementations
#: patch-matrix elements lowered at a time (a chunk of samples; 16 MiB of float32): bounds
#: the scratch memory of a convolution of a large batch
COLS_CHUNK = 1 << 22


def _out_hw(hw, k, stride, padding, dilation):
    """Convolution output size per spatial dim (padding: top, bottom, left, right)."""
    return tuple((hw[i] + padding[2 * i] + padding[2 * i + 1] - dilation[i] * (k[i] - 1) - 1)
                 // stride[i] + 1 for i in range(2))


def _chunks(n: int, per_sample: int):
    """Sample ranges ``[n0, n1)`` whose patch matrices hold about ``COLS_CHUNK`` elements."""
    step = max(1, min(n, COLS_CHUNK // max(per_sample, 1)))
    return [(n0, min(n0 + step, n)) for n0 in range(0, n, step)]


def _lowered(x, n0, n1, geo, kernel):
    """The patch matrix ``(C*kh*kw, OH*OW*(n1 - n0))`` of samples ``[n0, n1)`` of ``x``."""
    C = x.shape[1]
    OH, OW = geo[-4:-2]
    cols = np.empty((C * kernel[0] * kernel[1], OH * OW * (n1 - n0)), x.dtype)
    _launch(_k().lower, C, (x, n0, *geo, cols), _big(cols.size))
    return cols


def _lowered_rows(x, n0, n1, geo, kernel):
    """The patch rows ``(OH*OW*(n1 - n0), kh*kw*C)`` of samples ``[n0, n1)`` of ``x``
    (:func:`jitgrad.kernels.conv.lower_rows`)."""
    OH, OW = geo[-4:-2]
    rows = np.empty((OH * OW * (n1 - n0), kernel[0] * kernel[1] * x.shape[1]), x.dtype)
    _launch(_k().lower_rows, n1 - n0, (x, n0, *geo[1:], rows), _big(rows.size))
    return rows


def _as_rows(g3, n0, n1):
    """Samples ``[n0, n1)`` of the NCHW gradient ``g3`` (N, O, P) as rows (P*(n1 - n0), O)."""
    gr = np.empty(((n1 - n0) * g3.shape[2], g3.shape[1]), g3.dtype)
    _launch(_k().nc_to_rows, n1 - n0, (g3, n0, gr), _big(gr.size))
    return gr


#: ungrouped convolutions with patches of at least SMALL_K taps multiply patch rows (pixels
#: first): OpenBLAS runs those GEMMs in 0.62-1.06x the time of the column forms over nine
#: conv shapes (float32, one process); the digits CNN's compiled step 0.95x, eager 0.91x.
#: False: patch columns for every convolution (tests compare the layouts)
ROWS = True


def _rows_layout(groups: int, kg: int, geo) -> bool:
    """Whether a convolution multiplies patch rows (``ROWS``) rather than patch columns:
    ungrouped, its patches (``kg`` taps) not short."""
    return ROWS and groups == 1 and not _small_k(geo, kg)


def _as_cn(g3, n0, n1, bl):
    """Samples ``[n0, n1)`` of the NCHW gradient ``g3`` (N, O, P) as ``(O, P*(n1 - n0))``
    (columns batch-last with ``bl``)."""
    gc = np.empty((g3.shape[1], (n1 - n0) * g3.shape[2]), g3.dtype)
    _launch(_k().nc_to_cn, g3.shape[1], (g3, n0, bl, gc), _big(gc.size))
    return gc


def _gemm(a, b, out, groups, b_t=False):
    """``out[g] = a[g] @ b[g]`` per group ``g``, each operand's ``g``-th block of rows
    (``b[g].T`` with ``b_t``), through NumPy's BLAS, noted for the thread rules."""
    ma, mb, mo = a.shape[0] // groups, b.shape[0] // groups, out.shape[0] // groups
    for g in range(groups):
        bg = b[g * mb:(g + 1) * mb]
        np.matmul(a[g * ma:(g + 1) * ma], bg.T if b_t else bg, out=out[g * mo:(g + 1) * mo])
    note_blas(out.size * a.shape[1])


def _patches_first(og: int, kg: int, s: int) -> bool:
    """Whether a patch-column weight gradient (grouped convolutions, or ``ROWS`` off)
    ``gc @ cols.T`` (per group: ``og`` output channels, ``kg`` taps, ``s`` patch columns)
    is faster as ``(cols @ gc.T).T``: with few output
    channels and long patches the tall operand first suits OpenBLAS's kernels (float32,
    SkylakeX and Haswell kernels alike, one process, medians; the two forms gave the same
    bits in every case): og=64 kg=288 s=2048 (the digits CNN's second layer) 553 -> 484 us,
    32/288/2048 386 -> 266, 64/576/2048 1092 -> 887, 32/576/8192 2972 -> 2158; not where
    the channels are many or the columns few: 128/288/2048 907 -> 939, 256/1152/1024
    3262 -> 3503, 512/2304/196 2340 -> 6745. A fixed rule, not a timing probe, so a
    shape's bits never depend on the run."""
    return og <= 64 and kg >= 4 * og and s >= 1024


def _gemm_transposed(a, b, out, groups):
    """``out[g] = a[g] @ b[g].T`` per group, computed as ``(b[g] @ a[g].T).T`` (see
    :func:`_patches_first`)."""
    ma, mb, mo = a.shape[0] // groups, b.shape[0] // groups, out.shape[0] // groups
    t = np.empty((mb, ma), out.dtype)
    for g in range(groups):
        np.matmul(b[g * mb:(g + 1) * mb], a[g * ma:(g + 1) * ma].T, out=t)
        out[g * mo:(g + 1) * mo] = t.T
    note_blas(out.size * a.shape[1])


#: output rows shorter than this use batch-last patch columns (see jitgrad.kernels.conv)
BATCH_LAST_BELOW_OW = 8
#: patches shorter than this (C/groups*kh*kw) are multiplied per sample, a stack of small
#: GEMMs straight into NCHW (sample-major columns only), instead of one GEMM with K this
#: short (K=9 ran at a fifth of BLAS's speed). Digits CNN's first layer (9 taps), batch 128,
#: one thread: forward 237 us as one GEMM, 181 us through the Numba kernels this replaced,
#: 101 us as a stack; weight gradient 271, 235 and 80 us.
SMALL_K = 32


def _small_k(geo, kg: int) -> bool:
    """Whether a convolution with patches of ``kg`` taps runs per-sample GEMMs."""
    return kg < SMALL_K and not geo[0]


def _per_sample_forward(cols, w2, groups, out3):
    """``out3[n, group rows] = w2[group] @ cols[group taps, sample n]`` for the samples of a
    sample-major patch matrix ``cols`` (taps, n*P + pixel) into ``out3`` (n, O, P), NCHW:
    one GEMM per sample and group (``np.matmul`` over the stack; each sample's product does
    not depend on the others, so neither on the chunking)."""
    nb, co, npix = out3.shape
    og, kg = co // groups, w2.shape[1]
    c3 = cols.reshape(cols.shape[0], nb, npix)
    for g in range(groups):
        np.matmul(w2[g * og:(g + 1) * og], c3[g * kg:(g + 1) * kg].transpose(1, 0, 2),
                  out=out3[:, g * og:(g + 1) * og])
    note_blas(og * kg * npix)


def _per_sample_weight_grad(g3, cols, groups, acc):
    """``acc[o, k] += sum over n of (g3[n, o] . cols[k, sample n])`` for the samples of a
    chunk (``g3`` (n, O, P), ``cols`` sample-major): one GEMM per sample and group (a
    P-long dot per weight); the samples' products are added to ``acc`` one after another in
    float64 (a sum over the stack's first axis adds its rows in order, starting from
    ``acc``), so the result does not depend on how the samples were chunked."""
    nb, co, npix = g3.shape
    og, kg = co // groups, cols.shape[0] // groups
    c3 = cols.reshape(cols.shape[0], nb, npix)
    stack = np.empty((nb + 1, og, kg), np.float64)
    for g in range(groups):
        rows = slice(g * og, (g + 1) * og)
        stack[0] = acc[rows]
        stack[1:] = np.matmul(g3[:, rows], c3[g * kg:(g + 1) * kg].transpose(1, 2, 0))
        np.sum(stack, axis=0, out=acc[rows])
    note_blas(og * kg * npix)


def _geometry(hw, stride, padding, dilation, kernel, ohw):
    """The lowering kernels' geometry arguments: the column order (batch-last or not), top
    and left padding, stride, dilation, kernel, output size and padded input size."""
    return (ohw[1] < BATCH_LAST_BELOW_OW, padding[0], padding[2], *stride, *dilation, *kernel,
            *ohw, hw[0] + padding[0] + padding[1], hw[1] + padding[2] + padding[3])


def _conv_fwd(x, w, b, stride, padding, dilation, groups, keep_cols=None):
    """``conv(x, w) (+ b)``: per chunk of samples, the patch matrix (or patch rows,
    :func:`_rows_layout`), one GEMM per group and the result written in NCHW with the bias
    added. ``keep_cols``: a list that receives each chunk's patches (a plan hands them to the
    weight gradient, see :func:`conv_with_patches`)."""
    if _is_cuda(x):
        return _on_cuda().conv_fwd(x, w, b, stride, padding, dilation, groups)
    x = np.ascontiguousarray(x)
    N = x.shape[0]
    Co, Cg, kh, kw = w.shape
    ohw = _out_hw(x.shape[2:], (kh, kw), stride, padding, dilation)
    P = ohw[0] * ohw[1]
    b = None if b is None else np.ascontiguousarray(b)
    out = np.empty((N, Co) + ohw, x.dtype)
    geo = _geometry(x.shape[2:], stride, padding, dilation, (kh, kw), ohw)
    if _rows_layout(groups, Cg * kh * kw, geo):
        wt = np.ascontiguousarray(w.transpose(2, 3, 1, 0)).reshape(kh * kw * Cg, Co)
        for n0, n1 in _chunks(N, x.shape[1] * kh * kw * P):
            rows = _lowered_rows(x, n0, n1, geo, (kh, kw))
            if keep_cols is not None:
                keep_cols.append(rows)
            y = np.matmul(rows, wt)
            note_blas(y.size * wt.shape[0])
            _launch(_k().rows_to_nc, n1 - n0, (y, b, n0, out.reshape(N, Co, P)), _big(y.size))
        return out
    w2 = np.ascontiguousarray(w).reshape(Co, Cg * kh * kw)
    small = _small_k(geo, Cg * kh * kw)
    for n0, n1 in _chunks(N, x.shape[1] * kh * kw * P):
        cols = _lowered(x, n0, n1, geo, (kh, kw))
        if keep_cols is not None:
            keep_cols.append(cols)
        if small:
            out3 = out.reshape(N, Co, P)[n0:n1]
            _per_sample_forward(cols, w2, groups, out3)
            if b is not None:
                out3 += b[:, None]
            continue
        y = np.empty((Co, cols.shape[1]), x.dtype)
        _gemm(w2, cols, y, groups)
        _launch(_k().cn_to_nc, Co, (y, b, n0, geo[0], out.reshape(N, Co, P)), _big(y.size))
    return out


def _conv_bwd_input(g, w, input_size, stride, padding, dilation, groups):
    """Gradient of the input: per chunk, ``w2^T @ g`` in patch form added back to the
    pixels (:func:`~jitgrad.kernels.conv.unlower`; in the row layout ``g_rows @ wr`` and
    :func:`~jitgrad.kernels.conv.unlower_rows`)."""
    if _is_cuda(g):
        return _on_cuda().conv_bwd_input(g, w, input_size, stride, padding, dilation, groups)
    N, Co, OH, OW = g.shape
    _, Cg, kh, kw = w.shape
    C = Cg * groups
    out = np.empty((N, C) + tuple(input_size), g.dtype)
    g3 = np.ascontiguousarray(g).reshape(N, Co, OH * OW)
    geo = _geometry(input_size, stride, padding, dilation, (kh, kw), (OH, OW))
    if _rows_layout(groups, Cg * kh * kw, geo):
        wr = np.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(Co, kh * kw * Cg)
        for n0, n1 in _chunks(N, C * kh * kw * OH * OW):
            drows = np.matmul(_as_rows(g3, n0, n1), wr)
            note_blas(drows.size * Co)
            _launch(_k().unlower_rows, n1 - n0, (drows, n0, *geo[1:], out), _big(drows.size))
        return out
    w2t = np.ascontiguousarray(w).reshape(groups, Co // groups, Cg * kh * kw).transpose(0, 2, 1)
    w2t = np.ascontiguousarray(w2t).reshape(C * kh * kw, Co // groups)
    for n0, n1 in _chunks(N, C * kh * kw * OH * OW):
        gc = _as_cn(g3, n0, n1, geo[0])
        dcols = np.empty((C * kh * kw, gc.shape[1]), g.dtype)
        _gemm(w2t, gc, dcols, groups)
        _launch(_k().unlower, C, (dcols, n0, *geo, out), _big(dcols.size))
    return out


def _conv_bwd_weight(g, x, kernel_size, stride, padding, dilation, groups, cols_of=None):
    """Gradient of the weight: ``g @ cols^T`` per group (``rows.T @ g_rows`` in the row
    layout), chunks added in order. ``cols_of``: the chunks' patches of ``x`` made by the
    forward (``_conv_fwd``'s ``keep_cols``),
    used instead of lowering ``x`` again: the same arrays, so the same bits."""
    if _is_cuda(g):
        return _on_cuda().conv_bwd_weight(g, x, kernel_size, stride, padding, dilation, groups)
    N, Co, OH, OW = g.shape
    Cg = x.shape[1] // groups
    kh, kw = kernel_size
    x = np.ascontiguousarray(x)
    g3 = np.ascontiguousarray(g).reshape(N, Co, OH * OW)
    geo = _geometry(x.shape[2:], stride, padding, dilation, kernel_size, (OH, OW))
    if _rows_layout(groups, Cg * kh * kw, geo):
        # dw as (kh*kw*Cg, Co), taps in (i, j, c) order: rows.T @ g_rows per chunk (the
        # faster of the two forms), chunks added in order
        dwt = np.zeros((kh * kw * Cg, Co), g.dtype)
        part = None
        for k, (n0, n1) in enumerate(_chunks(N, x.shape[1] * kh * kw * OH * OW)):
            rows = _lowered_rows(x, n0, n1, geo, kernel_size) if cols_of is None else cols_of[k]
            part = np.matmul(rows.T, _as_rows(g3, n0, n1), out=part)
            note_blas(part.size * rows.shape[0])
            if k == 0:
                dwt, part = part, None
            else:
                dwt += part
        return np.ascontiguousarray(dwt.reshape(kh, kw, Cg, Co).transpose(3, 2, 0, 1))
    dw = np.zeros((Co, Cg * kh * kw), g.dtype)
    small = _small_k(geo, Cg * kh * kw)
    acc = np.zeros(dw.shape, np.float64) if small else None  # per-sample sums
    part = None if small else np.empty_like(dw)               # later chunks' GEMM results
    for k, (n0, n1) in enumerate(_chunks(N, x.shape[1] * kh * kw * OH * OW)):
        cols = _lowered(x, n0, n1, geo, kernel_size) if cols_of is None else cols_of[k]
        if small:
            _per_sample_weight_grad(g3[n0:n1], cols, groups, acc)
            continue
        gc = _as_cn(g3, n0, n1, geo[0])
        if _patches_first(Co // groups, cols.shape[0] // groups, cols.shape[1]):
            _gemm_transposed(gc, cols, dw if k == 0 else part, groups)
        else:
            _gemm(gc, cols, dw if k == 0 else part, groups, b_t=True)
        if k:
            dw += part
    if small:
        dw[...] = acc
    return dw.reshape(Co, Cg, kh, kw)


#: patch-matrix elements a compiled plan may keep from convolutions' forwards for their
#: weight gradients (64 MiB of float32); a plan shares the patches of the convolutions that
#: come first until it is spent
SHARED_PATCHES_MAX = 1 << 24


def _patch_elements(x_shape, w_shape, params) -> int:
    """Elements of the patch matrices ``conv2d(x, w)`` lowers (all chunks)."""
    ohw = _out_hw(x_shape[2:], w_shape[2:], params["stride"], params["padding"],
                  params["dilation"])
    return x_shape[0] * x_shape[1] * w_shape[2] * w_shape[3] * ohw[0] * ohw[1]


def conv_with_patches(x, w, b, **params):
    """``(conv2d(x, w, b), patch matrices)`` on arrays: a plan's forward that keeps its patch
    matrices for :func:`weight_grad_from_patches` (``compiler/shared_patches.py``)."""
    cols: list = []
    return _conv_fwd(x, w, b, **params, keep_cols=cols), cols


def weight_grad_from_patches(cols, g, x, **params):
    """``conv2d_backward_weight(g, x)`` on arrays from the forward's patch matrices of
    ``x``: the bits of lowering ``x`` again, without the lowering."""
    return _conv_bwd_weight(g, x, **params, cols_of=cols)


def _conv_bwd_bias(g, grad_shape=None):
    """Gradient of the bias: ``g`` summed over samples and pixels, per channel."""
    if _is_cuda(g):
        return _on_cuda().conv_bwd_bias(g)
    g3 = np.ascontiguousarray(g).reshape(g.shape[0], g.shape[1], g.shape[2] * g.shape[3])
    out = np.empty(g.shape[1], g.dtype)
    _launch(_k().bias_grad, g.shape[1], (g3, out), _big(g.size))
    return out


# ------------------------------------------------------------------------ NumPy references
def _conv_ref(x, w, b, stride, padding, dilation, groups):
    Co, Cg, kh, kw = w.shape
    N, C = x.shape[:2]
    ohw = _out_hw(x.shape[2:], (kh, kw), stride, padding, dilation)
    win = _windows(_pad(x.astype(np.float64), padding), (kh, kw), stride, dilation, ohw)
    win = win.reshape(N, groups, Cg, kh, kw, *ohw)
    wg = w.astype(np.float64).reshape(groups, Co // groups, Cg, kh, kw)
    out = np.einsum("ngcijhw,gocij->ngohw", win, wg).reshape(N, Co, *ohw)
    if b is not None:
        out = out + b.reshape(1, Co, 1, 1)
    return out.astype(x.dtype)


def _conv_bwd_input_ref(g, w, input_size, stride, padding, dilation, groups):
    N, Co, OH, OW = g.shape
    _, Cg, kh, kw = w.shape
    H, W = input_size
    t, b, lft, r = padding
    xp = np.zeros((N, groups, Cg, H + t + b, W + lft + r))
    gg = g.astype(np.float64).reshape(N, groups, Co // groups, OH, OW)
    wg = w.astype(np.float64).reshape(groups, Co // groups, Cg, kh, kw)
    for i in range(kh):
        for j in range(kw):
            hs, ws = i * dilation[0], j * dilation[1]
            xp[..., hs:hs + stride[0] * (OH - 1) + 1:stride[0],
               ws:ws + stride[1] * (OW - 1) + 1:stride[1]] += np.einsum(
                "ngohw,goc->ngchw", gg, wg[..., i, j])
    return xp.reshape(N, groups * Cg, H + t + b, W + lft + r)[
        :, :, t:t + H, lft:lft + W].astype(g.dtype)


def _conv_bwd_weight_ref(g, x, kernel_size, stride, padding, dilation, groups):
    N, Co, OH, OW = g.shape
    C = x.shape[1]
    win = _windows(_pad(x.astype(np.float64), padding), kernel_size, stride, dilation, (OH, OW))
    win = win.reshape(N, groups, C // groups, *kernel_size, OH, OW)
    gg = g.astype(np.float64).reshape(N, groups, Co // groups, OH, OW)
    gw = np.einsum("ngohw,ngcijhw->gocij", gg, win)
    return gw.reshape(Co, C // groups, *kernel_size).astype(g.dtype)


def _conv_bwd_bias_ref(g, grad_shape=None):
    return g.astype(np.float64).sum(axis=(0, 2, 3)).astype(g.dtype)


# ---------------------------------------------------------------------------- conv ops
def _conv_call(x, w, b, p):
    q = {k: p[k] for k in CONV2D.params}
    return _run(CONV2D, (x, w, b), q,
                _conv_fwd(x._data, w._data, None if b is None else b._data, **q))


def conv2d_backward_input(grad: Tensor, weight: Tensor, p: dict) -> Tensor:
    """Gradient of conv2d w.r.t. its input (``p``: the conv params and ``input_size``)."""
    q = {k: p[k] for k in CONV2D_BACKWARD_INPUT.params}
    return _run(CONV2D_BACKWARD_INPUT, (grad, weight), q,
                _conv_bwd_input(grad._data, weight._data, **q))


def conv2d_backward_weight(grad: Tensor, input: Tensor, p: dict) -> Tensor:
    """Gradient of conv2d w.r.t. its weight (``p``: the conv params and ``kernel_size``)."""
    q = {k: p[k] for k in CONV2D_BACKWARD_WEIGHT.params}
    return _run(CONV2D_BACKWARD_WEIGHT, (grad, input), q,
                _conv_bwd_weight(grad._data, input._data, **q))


def conv2d_backward_bias(grad: Tensor) -> Tensor:
    """Gradient of conv2d w.r.t. its bias: ``grad`` (N, O, H, W) summed over N, H and W."""
    return _run(CONV2D_BACKWARD_BIAS, (grad,), {"grad_shape": tuple(grad._data.shape)},
                _conv_bwd_bias(grad._data))


def _bwd_bias_vjp(gg, ins, out, p, n):
    return (gg.reshape(1, -1, 1, 1).expand(*p["grad_shape"]),)


def _conv_vjp(g, ins, out, p, n):
    x, w, _ = ins
    gx = conv2d_backward_input(g, w, {**p, "input_size": x._data.shape[2:]}) if n[0] else None
    gw = conv2d_backward_weight(g, x, {**p, "kernel_size": w._data.shape[2:]}) if n[1] else None
    gb = conv2d_backward_bias(g) if n[2] else None
    return gx, gw, gb


def _bwd_input_vjp(gg, ins, out, p, n):
    # <gg, A(g, w)> = <g, conv(gg, w)>: A is the adjoint of conv in x, bilinear in (g, w)
    g, w = ins
    dg = _conv_call(gg, w, None, p) if n[0] else None
    dw = conv2d_backward_weight(g, gg, {**p, "kernel_size": w._data.shape[2:]}) if n[1] else None
    return dg, dw


def _bwd_weight_vjp(gg, ins, out, p, n):
    g, x = ins
    dg = _conv_call(x, gg, None, p) if n[0] else None
    dx = conv2d_backward_input(g, gg, {**p, "input_size": x._data.shape[2:]}) if n[1] else None
    return dg, dx


_CONV_P = ("stride", "padding", "dilation", "groups")
CONV2D = defop(name="conv2d", kind=OPAQUE, inputs=("input", "weight", "bias"), params=_CONV_P,
               node="ConvolutionBackward0", ref=_conv_ref, fwd=_conv_fwd, vjp=_conv_vjp,
               save=(0, 1), samples=S.conv2d,
               # a plan computing this op's weight gradient too lowers the input once
               extra={"shares_patches": ("conv2d_backward_weight", conv_with_patches,
                                         weight_grad_from_patches, _patch_elements)})
CONV2D_BACKWARD_INPUT = defop(
    name="conv2d_backward_input", kind=OPAQUE, inputs=("grad", "weight"),
    params=("input_size",) + _CONV_P, node="ConvolutionBackwardBackward0",
    ref=_conv_bwd_input_ref, fwd=_conv_bwd_input, vjp=_bwd_input_vjp, save=(0, 1),
    samples=S.conv2d_backward_input)
CONV2D_BACKWARD_WEIGHT = defop(
    name="conv2d_backward_weight", kind=OPAQUE, inputs=("grad", "input"),
    params=("kernel_size",) + _CONV_P, node="ConvolutionBackwardBackward0",
    ref=_conv_bwd_weight_ref, fwd=_conv_bwd_weight, vjp=_bwd_weight_vjp, save=(0, 1),
    samples=S.conv2d_backward_weight)
CONV2D_BACKWARD_BIAS = defop(
    name="conv2d_backward_bias", kind=OPAQUE, inputs=("grad",), params=("grad_shape",),
    node="ConvolutionBackwardBackward0", ref=_conv_bwd_bias_ref, fwd=_conv_bwd_bias,
    vjp=_bwd_bias_vjp, save=(), samples=S.conv2d_backward_bias)

# the gradient functions come before their ops (the ops' VJP rules call them)
api(CONV2D_BACKWARD_INPUT)(conv2d_backward_input)
api(CONV2D_BACKWARD_WEIGHT)(conv2d_backward_weight)
api(CONV2D_BACKWARD_BIAS)(conv2d_backward_bias)


# --------------------------------------------------------------------- argument parsing
def _conv_pair(v, name):
    r = _ints(v, 2, name)
    if r is None:
        raise RuntimeError(
            f"expected {name} to be a single integer value or a list of 2 values to match the "
            f"convolution dimensions, but got {name}={list(v)}")
    return r


def _type_name(dt, c=False) -> str:
    """PyTorch's name of NumPy dtype ``dt`` in its errors: the scalar type's ("Float",
    "Long"), or with ``c`` ATen's C++ type's ("float", "long int")."""
    d = from_numpy_dtype(dt)
    return d.cpp_name if c else d.tensor_type[:-len("Tensor")]


@api(CONV2D)
@autocast_op
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation) of ``input`` (N, C, H, W) or (C, H, W) with
    ``weight`` (O, C/groups, kH, kW), as ``torch.nn.functional.conv2d``.

    >>> import jitgrad
    >>> from jitgrad.ops.conv import conv2d
    >>> conv2d(jitgrad.ones(1, 1, 3, 3), jitgrad.ones(1, 1, 2, 2)).tolist()
    [[[[4.0, 4.0], [4.0, 4.0]]]]
    """
    input = as_tensor_arg(input, "input")
    weight = as_tensor_arg(weight, "weight")
    if bias is not None:
        bias = as_tensor_arg(bias, "bias")
    xs = input._data.shape
    if len(xs) not in (3, 4):
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got "
                           f"input of size: {fmt_shape(xs)}")
    batched = len(xs) == 4
    if not batched:
        xs = (1,) + xs
    ws = weight._data.shape
    if isinstance(padding, str) and padding not in ("same", "valid"):
        raise RuntimeError(f"Invalid padding string: {padding!r}")
    stride = _conv_pair(stride, "stride")
    dilation = _conv_pair(dilation, "dilation")
    if isinstance(groups, (bool, np.bool_)) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"groups must be an int, got {groups!r}")
    groups = int(groups)
    if len(ws) != 4:
        raise RuntimeError(
            f"expected stride to be a single integer value or a list of {len(ws) - 2} values to "
            f"match the convolution dimensions, but got stride={list(stride)}")
    if padding == "valid":
        pad4 = (0, 0, 0, 0)
    elif padding == "same":
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        pad4 = ()
        for i in range(2):
            total = dilation[i] * (ws[2 + i] - 1)
            pad4 += (total // 2, total - total // 2)
    else:
        ph, pw = _conv_pair(padding, "padding")
        pad4 = (ph, ph, pw, pw)
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if min(pad4) < 0:
        raise RuntimeError("negative padding is not supported")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    if ws[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {fmt_shape(ws)} instead")
    if ws[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{fmt_shape(ws)}] instead")
    if xs[1] != ws[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {fmt_shape(ws)}, expected input"
            f"{fmt_shape(xs)} to have {ws[1] * groups} channels, but got {xs[1]} channels "
            f"instead")
    if bias is not None and (bias._data.ndim != 1 or bias._data.shape[0] != ws[0]):
        raise RuntimeError(
            f"Given weight of size {fmt_shape(ws)}, expected bias to be 1-dimensional with "
            f"{ws[0]} elements, but got bias of size {fmt_shape(bias._data.shape)} instead")
    padded = [xs[2 + i] + pad4[2 * i] + pad4[2 * i + 1] for i in range(2)]
    kernel = [dilation[i] * (ws[2 + i] - 1) + 1 for i in range(2)]
    if padded[0] < kernel[0] or padded[1] < kernel[1]:
        raise RuntimeError(
            f"Calculated padded input size per channel: ({padded[0]} x {padded[1]}). Kernel "
            f"size: ({kernel[0]} x {kernel[1]}). Kernel size can't be greater than actual input "
            f"size")
    dt, wdt = input._data.dtype, weight._data.dtype
    if bias is not None and bias._data.dtype != dt:  # (checked first, as PyTorch's)
        raise RuntimeError(f"Input type ({_type_name(dt, True)}) and bias type "
                           f"({_type_name(bias._data.dtype, True)}) should be the same")
    if dt != wdt:
        raise RuntimeError(f"expected scalar type {_type_name(dt)} but found {_type_name(wdt)}")
    check_same_device([t._data for t in (input, weight, bias) if t is not None])
    _check_float(input, "conv2d")
    _check_float(weight, "conv2d")
    if dt == np.float16:
        return half_through_float(conv2d, input, weight, bias, stride, padding, dilation, groups)
    p = {"stride": stride, "padding": pad4, "dilation": dilation, "groups": groups}
    if batched:
        return _conv_call(input, weight, bias, p)
    return _conv_call(input.unsqueeze(0), weight, bias, p).squeeze(0)
