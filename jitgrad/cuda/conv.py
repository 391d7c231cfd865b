"""Convolution and pooling on CUDA arrays: the second implementation of the array functions of
:mod:`jitgrad.ops.conv` and :mod:`jitgrad.ops.pooling` (same ops, same parameters; those
functions hand device arrays here).

The convolutions keep the CPU's formulation: a patch matrix per chunk of samples
(:func:`~.conv_kernels.lower`, sample-major columns), one batched GEMM over the groups
(``xp.matmul``: cuBLAS on a GPU, with CuPy's TF32 off by default; NumPy's BLAS in the
simulator) and the result moved to NCHW with the bias added. The input gradient is ``w2^T @
g`` in patch form gathered back to the pixels (:func:`~.conv_kernels.unlower`); the weight
gradient ``g @ cols^T`` per chunk, chunks added in order; the bias gradient the CPU's float64
lanes. Pooling and its adjoints are one kernel each (:mod:`.conv_kernels`).

What matches the CPU bit for bit: the data movement, the bias gradient, max pooling (values,
indices, gradient) and average pooling and its gradient (the CPU's order and types; the CPU's
fast-math may reassociate the window sum of wide windows, which the tests bound by a few
ulp). The GEMMs' summation order is the BLAS library's (OpenBLAS on the CPU, cuBLAS on a GPU;
the CPU's small-patch kernels add taps in order), so convolution values and gradients agree
with the CPU to the rounding of their dot products: ``|d| <= K * eps * sum |a*b|`` for ``K``
terms (checked in tests/cuda/test_conv_pool_cuda.py).
"""

from __future__ import annotations

import numpy as np

# (loaded by jitgrad.ops.conv / .pooling for their first CUDA array: after they are imported)
from ..kernels.conv import BIAS_SEGMENT
from ..ops.conv import _chunks, _out_hw
from . import conv_kernels as K
from . import fast_launch, runtime

__all__ = ["conv_fwd", "conv_bwd_input", "conv_bwd_weight", "conv_bwd_bias", "max_pool",
           "max_pool_bwd", "avg_pool", "avg_pool_bwd"]


def _run(kernel, work: int, inputs: tuple, scalars: tuple, outputs: tuple) -> None:
    """``kernel[grid](*inputs, *scalars, *outputs)`` with enough threads for ``work``
    elements (grid-stride: at most ``runtime.max_blocks()`` blocks)."""
    if work == 0:
        return
    threads = runtime.THREADS[runtime.backend()]
    blocks = runtime.blocks_for(work, threads)
    with np.errstate(all="ignore"):  # the simulator computes with NumPy scalars
        fast_launch.call(kernel, blocks, threads,
                         (*[runtime.kernel_arg(a, True) for a in inputs], *scalars,
                          *[runtime.kernel_arg(a) for a in outputs]))


def _lowered(x, n0, n1, geo):
    """The patch matrix of samples ``[n0, n1)`` (sample-major columns)."""
    pt, pl, sh, sw, dh, dw, kh, kw, OH, OW = geo
    cols = runtime.empty((x.shape[1] * kh * kw, (n1 - n0) * OH * OW), x.dtype)
    _run(K.lower, cols.size, (x,), (n0, *geo), (cols,))
    return cols


def _geometry(stride, padding, dilation, kernel, ohw):
    return (padding[0], padding[2], *stride, *dilation, *kernel, *ohw)


def _grouped(a, groups: int):
    """``a`` (rows, cols) as ``(groups, rows/groups, cols)``."""
    return a.reshape(groups, a.shape[0] // groups, a.shape[1])


def conv_fwd(x, w, b, stride, padding, dilation, groups):
    """``conv(x, w) (+ b)`` (see :func:`jitgrad.ops.conv._conv_fwd`)."""
    xp = runtime.xp()
    x = xp.ascontiguousarray(x)
    N = x.shape[0]
    Co, Cg, kh, kw = w.shape
    ohw = _out_hw(x.shape[2:], (kh, kw), stride, padding, dilation)
    P = ohw[0] * ohw[1]
    w3 = _grouped(xp.ascontiguousarray(w).reshape(Co, Cg * kh * kw), groups)
    out = runtime.empty((N, Co) + ohw, x.dtype)
    geo = _geometry(stride, padding, dilation, (kh, kw), ohw)
    for n0, n1 in _chunks(N, x.shape[1] * kh * kw * P):
        y = xp.matmul(w3, _grouped(_lowered(x, n0, n1, geo), groups))
        y = y.reshape(Co, n1 - n0, P).transpose(1, 0, 2)
        if b is not None:
            y = y + b.reshape(1, Co, 1)
        out[n0:n1] = y.reshape((n1 - n0, Co) + ohw)
    return out


def conv_bwd_input(g, w, input_size, stride, padding, dilation, groups):
    """Gradient of the input (see :func:`jitgrad.ops.conv._conv_bwd_input`)."""
    xp = runtime.xp()
    N, Co, OH, OW = g.shape
    _, Cg, kh, kw = w.shape
    C = Cg * groups
    out = runtime.empty((N, C) + tuple(input_size), g.dtype)
    w3t = _grouped(xp.ascontiguousarray(w).reshape(Co, Cg * kh * kw), groups).transpose(0, 2, 1)
    g3 = xp.ascontiguousarray(g).reshape(N, Co, OH * OW)
    geo = _geometry(stride, padding, dilation, (kh, kw), (OH, OW))
    for n0, n1 in _chunks(N, C * kh * kw * OH * OW):
        gc = g3[n0:n1].transpose(1, 0, 2).reshape(groups, Co // groups, (n1 - n0) * OH * OW)
        dcols = xp.matmul(w3t, gc).reshape(C * kh * kw, gc.shape[2])
        _run(K.unlower, (n1 - n0) * out[0].size, (dcols,), (n0, *geo, g.dtype.type(0)), (out,))
    return out


def conv_bwd_weight(g, x, kernel_size, stride, padding, dilation, groups):
    """Gradient of the weight (see :func:`jitgrad.ops.conv._conv_bwd_weight`)."""
    xp = runtime.xp()
    N, Co, OH, OW = g.shape
    Cg = x.shape[1] // groups
    kh, kw = kernel_size
    x = xp.ascontiguousarray(x)
    g3 = xp.ascontiguousarray(g).reshape(N, Co, OH * OW)
    geo = _geometry(stride, padding, dilation, kernel_size, (OH, OW))
    dw = None
    for n0, n1 in _chunks(N, x.shape[1] * kh * kw * OH * OW):
        gc = g3[n0:n1].transpose(1, 0, 2).reshape(groups, Co // groups, (n1 - n0) * OH * OW)
        cols = _grouped(_lowered(x, n0, n1, geo), groups)
        part = xp.matmul(gc, cols.transpose(0, 2, 1))
        dw = part if dw is None else dw + part
    if dw is None:  # no samples
        return xp.zeros((Co, Cg, kh, kw), g.dtype)
    return dw.reshape(Co, Cg, kh, kw)


def conv_bwd_bias(g):
    """Gradient of the bias in the CPU's order (``kernels/conv.bias_grad``): per segment of
    ``BIAS_SEGMENT`` samples a float64 sum per channel and pixel (a thread each), the
    segments added in order into the lanes, then each channel's lanes in order."""
    xp = runtime.xp()
    N, Co = g.shape[:2]
    P = g.shape[2] * g.shape[3]
    g2 = xp.ascontiguousarray(g).reshape(N, Co * P)
    parts = runtime.empty(((N + BIAS_SEGMENT - 1) // BIAS_SEGMENT, Co * P), np.float64)
    lanes = runtime.empty((Co, P), np.float64)
    out = runtime.empty(Co, g.dtype)
    _run(K.bias_segments, parts.size, (g2,), (BIAS_SEGMENT, np.float64(0)), (parts,))
    _run(K.bias_lanes, lanes.size, (parts,), (np.float64(0),), (lanes,))
    _run(K.add_lanes, Co, (lanes,), (np.float64(0),), (out,))
    return out


def _planes(a):
    return runtime.xp().ascontiguousarray(a).reshape((-1,) + a.shape[-2:])


def max_pool(x, kernel_size, stride, padding, dilation, ohw):
    """Pooled values and argmax indices (see :func:`jitgrad.ops.pooling._max_pool_fwd`)."""
    xp = _planes(x)
    out = runtime.empty((xp.shape[0],) + tuple(ohw), x.dtype)
    idx = runtime.empty(out.shape, np.int64)
    _run(K.max_pool, out.size, (xp,), (*kernel_size, *stride, *padding, *dilation,
                                       x.dtype.type(-np.inf)), (out, idx))
    shape = x.shape[:-2] + tuple(ohw)
    return out.reshape(shape), idx.reshape(shape)


def max_pool_bwd(g, indices, input_shape, kernel_size, stride, padding, dilation):
    """The gradients ``g`` summed into the argmax positions ``indices`` (a gather)."""
    gp = _planes(g)
    ip = _planes(indices)
    out = runtime.empty((gp.shape[0],) + tuple(input_shape[-2:]), g.dtype)
    _run(K.max_pool_backward, out.size, (gp, ip),
         (*kernel_size, *stride, *padding, *dilation, g.dtype.type(0)), (out,))
    return out.reshape(input_shape)


def avg_pool(x, ohw, avg_args: tuple):
    """Average pooling (``avg_args``: the CPU kernel's window and divisor arguments)."""
    xp = _planes(x)
    out = runtime.empty((xp.shape[0],) + tuple(ohw), x.dtype)
    _run(K.avg_pool, out.size, (xp,), (*avg_args, x.dtype.type(0)), (out,))
    return out.reshape(x.shape[:-2] + tuple(ohw))


def avg_pool_bwd(g, input_shape, avg_args: tuple):
    """Adjoint of :func:`avg_pool` (a gather)."""
    gp = _planes(g)
    out = runtime.empty((gp.shape[0],) + tuple(input_shape[-2:]), g.dtype)
    _run(K.avg_pool_backward, out.size, (gp,), (*avg_args, g.dtype.type(0)), (out,))
    return out.reshape(input_shape)
