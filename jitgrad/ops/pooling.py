"""2-D max, average and adaptive average pooling (NCHW), with torch.nn.functional's signatures
and semantics.

Primitives (each a registered op with a VJP written with registered ops, so double backward
and tracing work):

- ``max_pool2d(x)`` -> ``MaxPool2DWithIndicesBackward0``, saving the argmax indices (a param, as
  ``max_dim`` does); its gradient ``max_pool2d_backward(g, x)`` scatters ``g`` to them and has a
  gather by the same indices (``getitem``) as its own VJP.
- ``avg_pool2d(x)`` -> ``AvgPool2DBackward0``; ``avg_pool2d_backward(g, x)`` is its adjoint, and
  the adjoint of that is ``avg_pool2d`` again.
- ``adaptive_avg_pool2d(x)`` -> ``AdaptiveAvgPool2DBackward0``, likewise with its adjoint; it is
  separable (``Ah @ x @ Aw.T`` with averaging matrices, on BLAS), so it has no kernel of its own.

The pooling gradient ops take the pooled input ``x`` as PyTorch's do (its gradient there is
zero), so ``create_graph`` records the same nodes as PyTorch even for a constant ``g``.

Kernels: :mod:`jitgrad.kernels.pooling`, over ``(P, H, W)`` planes; from
:data:`~.conv_common.PARALLEL_MIN_WORK` window taps the planes are split over the threads of
:mod:`jitgrad.kernels.pool`; on CUDA arrays the array functions run the CUDA kernels of
:mod:`jitgrad.cuda.conv` (the same windows, order and types). Only float32/float64 are
implemented (PyTorch also pools integer tensors). The public names are importable from
:mod:`jitgrad.ops.conv` too.
"""

from __future__ import annotations

import math

import numpy as np

from ..devices import array_namespace
from ..shapes import fmt_shape
from ..tensor import Tensor, wrap
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
from .dispatch import as_tensor_arg, record
from .registry import REDUCE, defop

__all__ = ["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "max_pool2d_backward",
           "avg_pool2d_backward", "adaptive_avg_pool2d_backward"]

_k = _kernel_module("pooling")


# ----------------------------------------------------------------------------- pooling
def _pool_pair(v, fn, name, default=None):
    if default is not None and (v is None or (hasattr(v, "__len__") and len(v) == 0)):
        return default
    r = _ints(v, 2, name)
    if r is None:
        if name == "dilation":
            raise RuntimeError(f"{fn}: dilation must be either a single int, or a tuple of two "
                               f"ints")
        what = "either be omitted, a single int" if name == "stride" else "either be a single int"
        raise RuntimeError(f"{fn}: {name} must {what}, or a tuple of two ints")
    return r


def _pool_out(size, k, pad, stride, dilation, ceil_mode):
    """PyTorch's ``pooling_output_shape`` with its checks."""
    if stride == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > math.trunc(((k - 1) * dilation + 1) / 2):
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                           f"pad={pad}, kernel_size={k} and dilation={dilation}")
    out = (size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) \
        // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool_geometry(input, fn, kernel_size, stride, padding, dilation, ceil_mode):
    """Checked ``(kernel, stride, padding, dilation, (OH, OW))`` of a pooling call."""
    xs = input._data.shape
    k = _pool_pair(kernel_size, fn, "kernel_size")
    s = _pool_pair(stride, fn, "stride", default=k)
    pad = _pool_pair(padding, fn, "padding")
    d = _pool_pair(dilation, fn, "dilation")
    nd = len(xs)
    if fn == "max_pool2d" and nd not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    if nd < 3:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(nd, 1)}, "
                         f"{max(nd, 1) - 1}], but got -3)")
    ohw = tuple(_pool_out(xs[-2 + i], k[i], pad[i], s[i], d[i], ceil_mode) for i in range(2))
    if k[0] <= 0 or k[1] <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {k[0]} kW: "
                           f"{k[1]}")
    if s[0] <= 0 or s[1] <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {s[0]} dW: {s[1]}")
    if d[0] <= 0 or d[1] <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {d[0]} "
                           f"dilationW: {d[1]}")
    if nd not in (3, 4) or 0 in xs[-3:] or (nd == 3 and xs[0] == 0):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch "
                           f"size for input, but got:{fmt_shape(xs)}")
    if k[1] // 2 < pad[1] or k[0] // 2 < pad[0]:
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got "
                           f"padW = {pad[1]}, padH = {pad[0]}, kW = {k[1]}, kH = {k[0]}")
    if ohw[0] < 1 or ohw[1] < 1:
        raise RuntimeError(f"Given input size: ({xs[-3]}x{xs[-2]}x{xs[-1]}). Calculated output "
                           f"size: ({xs[-3]}x{ohw[0]}x{ohw[1]}). Output size is too small")
    _check_float(input, fn)
    return k, s, pad, d, ohw


def _planes(a):
    """``a`` (..., H, W) as contiguous ``(P, H, W)`` planes."""
    return np.ascontiguousarray(a).reshape((-1,) + a.shape[-2:])


def _max_pool_fwd(x, kernel_size, stride, padding, dilation, ohw):
    if _is_cuda(x):
        return _on_cuda().max_pool(x, kernel_size, stride, padding, dilation, ohw)
    xp = _planes(x)
    out = np.empty((xp.shape[0],) + ohw, x.dtype)
    idx = np.empty(out.shape, np.int64)
    _launch(_k().max_pool, xp.shape[0],
            (xp, *kernel_size, *stride, *padding, *dilation, out, idx),
            _big(out.size * kernel_size[0] * kernel_size[1]))
    shape = x.shape[:-2] + ohw
    return out.reshape(shape), idx.reshape(shape)


def _max_pool_ref(x, kernel_size, stride, padding, dilation, ceil_mode, indices=None,
                  input_shape=None):  # indices: a tensor only the VJP uses
    """NumPy max pooling (NaN propagates; windows clipped to the input as PyTorch's)."""
    lead = x.shape[:-2]
    x4 = x.reshape((-1, 1) + x.shape[-2:]).astype(np.float64)
    ohw = tuple(_pool_out(x.shape[-2 + i], kernel_size[i], padding[i], stride[i], dilation[i],
                          ceil_mode) for i in range(2))
    # pad enough on the bottom/right for ceil_mode windows
    extra = [max(0, (ohw[i] - 1) * stride[i] + dilation[i] * (kernel_size[i] - 1) + 1
                 - x.shape[-2 + i] - padding[i]) for i in range(2)]
    xp = _pad(x4, (padding[0], extra[0], padding[1], extra[1]), -np.inf)
    win = _windows(xp, kernel_size, stride, dilation, ohw)
    return win.max(axis=(2, 3)).reshape(lead + ohw).astype(x.dtype)


def _max_pool_bwd(g, x, indices, input_shape, kernel_size, stride, padding, dilation,
                  ceil_mode=False):
    """``g`` summed into the argmax positions ``indices`` of the pooling of that geometry
    (``x``, the pooled input, is not read)."""
    if _is_cuda(g):
        return _on_cuda().max_pool_bwd(g, indices, input_shape, kernel_size, stride, padding,
                                       dilation)
    gp = _planes(g)
    ip = np.ascontiguousarray(indices).reshape(gp.shape)
    out = np.empty((gp.shape[0],) + tuple(input_shape[-2:]), g.dtype)
    _launch(_k().max_pool_backward, gp.shape[0], (gp, ip, out), _big(out.size))
    return out.reshape(input_shape)


def _pool_indices_ref(x, kernel_size, stride, padding, dilation, ceil_mode, input_shape=None):
    """NumPy argmax positions (flat ``h*W + w`` per plane) of every pooling window."""
    lead = x.shape[:-2]
    H, W = x.shape[-2:]
    ohw = tuple(_pool_out(x.shape[-2 + i], kernel_size[i], padding[i], stride[i], dilation[i],
                          ceil_mode) for i in range(2))
    x4 = x.reshape((-1, 1, H, W)).astype(np.float64)
    extra = [max(0, (ohw[i] - 1) * stride[i] + dilation[i] * (kernel_size[i] - 1) + 1
                 - x.shape[-2 + i] - padding[i]) for i in range(2)]
    xp = _pad(x4, (padding[0], extra[0], padding[1], extra[1]), -np.inf)
    flat_pos = _pad(np.arange(H * W, dtype=np.float64).reshape(1, 1, H, W),
                    (padding[0], extra[0], padding[1], extra[1]), -1.0)
    win = _windows(xp, kernel_size, stride, dilation, ohw)  # (P, 1, kh, kw, OH, OW)
    pos = _windows(np.ascontiguousarray(np.broadcast_to(flat_pos, xp.shape)), kernel_size,
                   stride, dilation, ohw)
    P = win.shape[0]
    w2 = np.moveaxis(win, (2, 3), (-2, -1)).reshape(P, 1, ohw[0], ohw[1], -1)
    p2 = np.moveaxis(pos, (2, 3), (-2, -1)).reshape(P, 1, ohw[0], ohw[1], -1)
    # NaN counts as the maximum (the last NaN wins), else the first maximum, as PyTorch
    nan = np.isnan(w2)
    k_nan = w2.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
    k_max = np.argmax(np.where(nan, -np.inf, w2), axis=-1)
    k = np.where(nan.any(axis=-1), k_nan, k_max)
    idx = np.take_along_axis(p2, k[..., None], axis=-1)[..., 0]
    return idx.reshape(lead + ohw).astype(np.int64)


def _max_pool_indices_fwd(x, kernel_size, stride, padding, dilation, ceil_mode,
                          input_shape=None):
    ohw = tuple(_pool_out(x.shape[-2 + i], kernel_size[i], padding[i], stride[i], dilation[i],
                          ceil_mode) for i in range(2))
    return _max_pool_fwd(x, kernel_size, stride, padding, dilation, ohw)[1]


def _max_pool_values_and_indices(x, kernel_size, stride, padding, dilation, ceil_mode,
                                 input_shape=None):
    """Both outputs of one kernel call (a compiled plan pairs max_pool2d with its indices)."""
    ohw = tuple(_pool_out(x.shape[-2 + i], kernel_size[i], padding[i], stride[i], dilation[i],
                          ceil_mode) for i in range(2))
    return _max_pool_fwd(x, kernel_size, stride, padding, dilation, ohw)


def _max_pool_values_fwd(x, kernel_size, stride, padding, dilation, ceil_mode, indices=None,
                         input_shape=None):
    """The Numba kernel's pooled values (compiled plans; eager calls the kernel directly)."""
    ohw = tuple(_pool_out(x.shape[-2 + i], kernel_size[i], padding[i], stride[i], dilation[i],
                          ceil_mode) for i in range(2))
    return _max_pool_fwd(x, kernel_size, stride, padding, dilation, ohw)[0]


def _max_pool_bwd_ref(g, x, indices=None, *, input_shape, kernel_size, stride, padding,
                      dilation, ceil_mode):
    if indices is None:  # (the registry's reference test passes only grad and input)
        indices = _pool_indices_ref(x, kernel_size, stride, padding, dilation, ceil_mode)
    H, W = input_shape[-2:]
    P = int(np.prod(input_shape[:-2], dtype=np.int64))
    out = np.zeros((P, H * W), np.float64)
    rows = np.repeat(np.arange(P), indices.size // max(P, 1))
    np.add.at(out, (rows, indices.reshape(-1)), g.reshape(-1))
    return out.reshape(input_shape).astype(g.dtype)


def _pool_gather_ref(src, indices, input_shape, geometry=None):
    """``out[p, k] = src[p, indices[p, k]]`` over planes: the adjoint of the max-pool scatter
    (given the pooled input instead of the indices, the indices are computed from it)."""
    if indices.dtype.kind == "f":
        indices = _pool_indices_ref(indices, **geometry)
    xp = array_namespace(src)  # (np.ascontiguousarray would make a device array a host one)
    P = int(np.prod(input_shape[:-2], dtype=np.int64))
    sp = xp.ascontiguousarray(src).reshape(P, -1)
    ip = xp.ascontiguousarray(indices).reshape(P, -1)
    return xp.take_along_axis(sp, ip, axis=1).reshape(indices.shape)


_GEOMETRY = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")


def max_pool2d_backward(grad: Tensor, input: Tensor, indices: Tensor, p: dict) -> Tensor:
    """Gradient of max_pool2d: ``grad`` summed into the argmax positions ``indices`` (a
    tensor, so a compiled backward recomputes them every call). ``input`` (the pooled tensor)
    only takes part as in PyTorch: its gradient is zero."""
    q = {"input_shape": tuple(p["input_shape"]), **{k: p[k] for k in _GEOMETRY}}
    return _run(MAX_POOL2D_BACKWARD, (grad, input, indices), q,
                _max_pool_bwd(grad._data, None, indices._data, **q))


def _pool_bwd_vjp(adjoint):
    """VJP of a pooling gradient op (linear in ``grad``; piecewise constant in ``input``)."""
    def vjp(gg, ins, out, p, n):
        from ..creation import zeros

        return (adjoint(gg, ins, p) if n[0] else None,
                zeros(p["input_shape"], dtype=gg.dtype, device=gg.device) if n[1] else None) + (
                    (None,) * (len(n) - 2))
    return vjp


def _gather_vjp(g, ins, out, p, n):
    src, idx = ins
    return (_run(MAX_POOL2D_BACKWARD, (g, None, idx), {**p["geometry"],
                                                      "input_shape": p["input_shape"]},
                 _max_pool_bwd(g._data, None, idx._data, p["input_shape"], **p["geometry"]))
            if n[0] else None, None)


POOL_GATHER = defop(
    name="pool_gather", kind=REDUCE, inputs=("src", "indices"),
    params=("input_shape", "geometry"), node="MaxPool2DWithIndicesBackwardBackward0",
    ref=_pool_gather_ref,
    vjp=_gather_vjp, save=(1,), samples=S.pool_gather)


@api(POOL_GATHER)
def _gather(gg: Tensor, idx: Tensor, p: dict) -> Tensor:
    q = {"input_shape": tuple(p["input_shape"]), "geometry": {k: p[k] for k in _GEOMETRY}}
    return _run(POOL_GATHER, (gg, idx), q, _pool_gather_ref(gg._data, idx._data,
                                                             q["input_shape"]))


MAX_POOL2D_BACKWARD = defop(
    name="max_pool2d_backward", kind=REDUCE, inputs=("grad", "input", "indices"),
    params=("input_shape",) + _GEOMETRY, node="MaxPool2DWithIndicesBackwardBackward0",
    ref=_max_pool_bwd_ref,
    fwd=_max_pool_bwd,
    vjp=_pool_bwd_vjp(lambda gg, ins, p: _gather(gg, ins[2], p)), save=(2,),
    samples=S.max_pool2d_backward)

# max_pool2d_backward comes before its op (the op's VJP rule calls it): declared here
api(MAX_POOL2D_BACKWARD)(max_pool2d_backward)

MAX_POOL2D_INDICES = defop(
    name="max_pool2d_indices", kind=REDUCE, inputs=("input",),
    params=_GEOMETRY + ("input_shape",), node=None, ref=_pool_indices_ref,
    fwd=_max_pool_indices_fwd, samples=S.max_pool2d,
    extra={"joint": ("max_pool2d", _max_pool_values_and_indices)})
MAX_POOL2D = defop(
    name="max_pool2d", kind=REDUCE, inputs=("input",),
    params=_GEOMETRY + ("indices", "input_shape"),
    node="MaxPool2DWithIndicesBackward0", ref=_max_pool_ref, fwd=_max_pool_values_fwd,
    save=(0,),
    vjp=lambda g, ins, out, p, n: (max_pool2d_backward(g, ins[0], p["indices"], p),),
    samples=S.max_pool2d)


@api(MAX_POOL2D, MAX_POOL2D_INDICES)
def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """2-D max pooling of ``input`` (N, C, H, W) or (C, H, W), as
    ``torch.nn.functional.max_pool2d``; ``return_indices``: also the flat ``h*W + w`` index of
    each maximum (the first one in its window; NaN counts as the maximum).

    >>> import jitgrad
    >>> from jitgrad.ops.conv import max_pool2d
    >>> max_pool2d(jitgrad.arange(16.0).reshape(1, 4, 4), 2).tolist()
    [[[5.0, 7.0], [13.0, 15.0]]]
    """
    input = as_tensor_arg(input, "input")
    k, s, pad, d, ohw = _pool_geometry(input, "max_pool2d", kernel_size, stride, padding,
                                       dilation, ceil_mode)
    if input._data.dtype == np.float16:
        return half_through_float(max_pool2d, input, kernel_size, stride, padding, dilation,
                                  ceil_mode, return_indices)
    out, idx = _max_pool_fwd(input._data, k, s, pad, d, ohw)
    geo = {"kernel_size": k, "stride": s, "padding": pad, "dilation": d,
           "ceil_mode": bool(ceil_mode)}
    # the argmax positions are their own (traced, non-differentiable) op, so a compiled
    # plan recomputes them each call; the backward reads them as a tensor input
    indices = record(MAX_POOL2D_INDICES, wrap(idx), (input,),
                     {**geo, "input_shape": input._data.shape})
    p = {**geo, "indices": indices, "input_shape": input._data.shape}
    res = record(MAX_POOL2D, wrap(out), (input,), p)
    return (res, indices) if return_indices else res


# ---------------------------------------------------------------------------- avg pool
_AVG_P = ("input_shape", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
          "divisor_override")


def _avg_args(kernel_size, stride, padding, count_include_pad, divisor_override):
    return (*kernel_size, *stride, *padding, bool(count_include_pad),
            int(divisor_override or 0))


def _avg_out_hw(shape, kernel_size, stride, padding, ceil_mode):
    return tuple(_pool_out(shape[-2 + i], kernel_size[i], padding[i], stride[i], 1, ceil_mode)
                 for i in range(2))


def _avg_pool_fwd(x, input_shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override):
    ohw = _avg_out_hw(x.shape, kernel_size, stride, padding, ceil_mode)
    if _is_cuda(x):
        return _on_cuda().avg_pool(x, ohw, _avg_args(kernel_size, stride, padding,
                                                     count_include_pad, divisor_override))
    xp = _planes(x)
    out = np.empty((xp.shape[0],) + ohw, x.dtype)
    _launch(_k().avg_pool, xp.shape[0],
            (xp, *_avg_args(kernel_size, stride, padding, count_include_pad, divisor_override),
             out), _big(out.size * kernel_size[0] * kernel_size[1]))
    return out.reshape(x.shape[:-2] + ohw)


def _avg_pool_bwd(g, x, input_shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override):
    if _is_cuda(g):
        return _on_cuda().avg_pool_bwd(g, input_shape, _avg_args(
            kernel_size, stride, padding, count_include_pad, divisor_override))
    gp = _planes(g)
    out = np.empty((gp.shape[0],) + tuple(input_shape[-2:]), g.dtype)
    _launch(_k().avg_pool_backward, gp.shape[0],
            (gp, *_avg_args(kernel_size, stride, padding, count_include_pad, divisor_override),
             out), _big(gp.size * kernel_size[0] * kernel_size[1]))
    return out.reshape(input_shape)


def _avg_matrix(H, W, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    """The pooling as a dense ``(OH*OW, H*W)`` matrix (reference only: small inputs)."""
    ohw = _avg_out_hw((H, W), kernel_size, stride, padding, ceil_mode)
    A = np.zeros(ohw + (H, W))
    for oh in range(ohw[0]):
        for ow in range(ohw[1]):
            hs, ws = oh * stride[0] - padding[0], ow * stride[1] - padding[1]
            he, we = min(hs + kernel_size[0], H + padding[0]), min(ws + kernel_size[1],
                                                                   W + padding[1])
            size = (he - hs) * (we - ws)
            hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, H), min(we, W)
            div = divisor_override or (size if count_include_pad else (he - hs) * (we - ws))
            A[oh, ow, hs:he, ws:we] = 1.0 / div
    return A.reshape(ohw[0] * ohw[1], H * W), ohw


def _avg_pool_ref(x, input_shape, **p):
    A, ohw = _avg_matrix(*x.shape[-2:], **p)
    y = x.reshape(-1, x.shape[-2] * x.shape[-1]).astype(np.float64) @ A.T
    return y.reshape(x.shape[:-2] + ohw).astype(x.dtype)


def _avg_pool_bwd_ref(g, x, input_shape, **p):
    A, _ = _avg_matrix(*input_shape[-2:], **p)
    y = g.reshape(-1, g.shape[-2] * g.shape[-1]).astype(np.float64) @ A
    return y.reshape(input_shape).astype(g.dtype)


def avg_pool2d_backward(grad: Tensor, input: Tensor, p: dict) -> Tensor:
    """Gradient of avg_pool2d (its adjoint); ``input`` takes part as in PyTorch (zero
    gradient)."""
    q = {k: p[k] for k in AVG_POOL2D_BACKWARD.params}
    return _run(AVG_POOL2D_BACKWARD, (grad, input), q, _avg_pool_bwd(grad._data, None, **q))


def _avg_call(x: Tensor, p: dict) -> Tensor:
    q = {k: p[k] for k in AVG_POOL2D.params}
    return _run(AVG_POOL2D, (x,), q, _avg_pool_fwd(x._data, **q))


AVG_POOL2D = defop(
    name="avg_pool2d", kind=REDUCE, inputs=("input",), params=_AVG_P, node="AvgPool2DBackward0",
    ref=_avg_pool_ref, fwd=_avg_pool_fwd, save=(0,),
    vjp=lambda g, ins, out, p, n: (avg_pool2d_backward(g, ins[0], p),), samples=S.avg_pool2d)
AVG_POOL2D_BACKWARD = defop(
    name="avg_pool2d_backward", kind=REDUCE, inputs=("grad", "input"), params=_AVG_P,
    node="AvgPool2DBackwardBackward0", ref=_avg_pool_bwd_ref, fwd=_avg_pool_bwd,
    vjp=_pool_bwd_vjp(lambda gg, ins, p: _avg_call(gg, p)), samples=S.avg_pool2d_backward)

# avg_pool2d_backward comes before its op (the op's VJP rule calls it): declared here
api(AVG_POOL2D_BACKWARD)(avg_pool2d_backward)


@api(AVG_POOL2D)
def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """2-D average pooling of ``input`` (N, C, H, W) or (C, H, W), as
    ``torch.nn.functional.avg_pool2d``.

    >>> import jitgrad
    >>> from jitgrad.ops.conv import avg_pool2d
    >>> avg_pool2d(jitgrad.arange(16.0).reshape(1, 4, 4), 2).tolist()
    [[[2.5, 4.5], [10.5, 12.5]]]
    """
    input = as_tensor_arg(input, "input")
    k = _pool_pair(kernel_size, "avg_pool2d", "kernel_size")
    s = _pool_pair(stride, "avg_pool2d", "stride", default=k)
    pad = _pool_pair(padding, "avg_pool2d", "padding")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    _pool_geometry(input, "avg_pool2d", k, s, pad, 1, ceil_mode)
    if input._data.dtype == np.float16:
        return half_through_float(avg_pool2d, input, kernel_size, stride, padding, ceil_mode,
                                  count_include_pad, divisor_override)
    return _avg_call(input, {"input_shape": input._data.shape, "kernel_size": k, "stride": s,
                             "padding": pad, "ceil_mode": bool(ceil_mode),
                             "count_include_pad": bool(count_include_pad),
                             "divisor_override": divisor_override})


# ------------------------------------------------------------------- adaptive avg pool
def _adaptive_matrix(n_in: int, n_out: int, dtype) -> np.ndarray:
    """``(n_out, n_in)``: row ``i`` averages PyTorch's adaptive window
    ``[floor(i * n_in / n_out), ceil((i + 1) * n_in / n_out))``."""
    A = np.zeros((n_out, n_in), dtype)
    for i in range(n_out):
        start, end = (i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)
        A[i, start:end] = 1.0 / (end - start)
    return A


def _adaptive_matrices(input_shape, output_size, dtype):
    return (_adaptive_matrix(input_shape[-2], output_size[0], dtype),
            _adaptive_matrix(input_shape[-1], output_size[1], dtype))


def _adaptive_avg_pool_ref(x, input_shape, output_size):
    """Adaptive average pooling, separable: ``Ah @ x @ Aw.T`` over the last two dims."""
    xp = array_namespace(x)
    Ah, Aw = (xp.asarray(A) for A in _adaptive_matrices(x.shape, output_size, x.dtype))
    return xp.ascontiguousarray(np.matmul(np.matmul(Ah, x), Aw.T))


def _adaptive_avg_pool_bwd_ref(g, x, input_shape, output_size):
    """Its adjoint: ``Ah.T @ g @ Aw``."""
    xp = array_namespace(g)
    Ah, Aw = (xp.asarray(A) for A in _adaptive_matrices(input_shape, output_size, g.dtype))
    return xp.ascontiguousarray(np.matmul(np.matmul(Ah.T, g), Aw))


def adaptive_avg_pool2d_backward(grad: Tensor, input: Tensor, p: dict) -> Tensor:
    """Gradient of adaptive_avg_pool2d (its adjoint); ``input`` takes part as in PyTorch
    (zero gradient)."""
    q = {k: p[k] for k in ADAPTIVE_AVG_POOL2D_BACKWARD.params}
    return _run(ADAPTIVE_AVG_POOL2D_BACKWARD, (grad, input), q,
                _adaptive_avg_pool_bwd_ref(grad._data, None, **q))


def _adaptive_call(x: Tensor, p: dict) -> Tensor:
    q = {k: p[k] for k in ADAPTIVE_AVG_POOL2D.params}
    return _run(ADAPTIVE_AVG_POOL2D, (x,), q, _adaptive_avg_pool_ref(x._data, **q))


_ADAPTIVE_P = ("input_shape", "output_size")
ADAPTIVE_AVG_POOL2D = defop(
    name="adaptive_avg_pool2d", kind=REDUCE, inputs=("input",), params=_ADAPTIVE_P,
    node="AdaptiveAvgPool2DBackward0", ref=_adaptive_avg_pool_ref, save=(0,),
    vjp=lambda g, ins, out, p, n: (adaptive_avg_pool2d_backward(g, ins[0], p),),
    samples=S.adaptive_avg_pool2d)
ADAPTIVE_AVG_POOL2D_BACKWARD = defop(
    name="adaptive_avg_pool2d_backward", kind=REDUCE, inputs=("grad", "input"),
    params=_ADAPTIVE_P, node="AdaptiveAvgPool2DBackwardBackward0",
    ref=_adaptive_avg_pool_bwd_ref, vjp=_pool_bwd_vjp(lambda gg, ins, p: _adaptive_call(gg, p)),
    samples=S.adaptive_avg_pool2d_backward)

# adaptive_avg_pool2d_backward comes before its op (the op's VJP rule calls it): declared here
api(ADAPTIVE_AVG_POOL2D_BACKWARD)(adaptive_avg_pool2d_backward)


def _output_size(output_size, input_shape) -> tuple[int, int]:
    """PyTorch's checks of ``output_size`` (an int, or two ints or None: the input's size)."""
    name = "adaptive_avg_pool2d"
    sizes = (output_size, output_size) if not isinstance(output_size, (tuple, list)) \
        else tuple(output_size)
    for i, v in enumerate(sizes):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
            raise TypeError(f"{name}(): argument 'output_size' (position 2) must be tuple of "
                            f"ints, but found element of type {type(v).__name__} at pos {i}")
    if len(sizes) != 2:
        raise RuntimeError(f"{name}: output_size must be 2")
    sizes = tuple(input_shape[-2 + i] if v is None else int(v) for i, v in enumerate(sizes))
    if sizes[0] < 0 or sizes[1] < 0:
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to "
                           f"0 but received {{{sizes[0]}, {sizes[1]}}}")
    return sizes


@api(ADAPTIVE_AVG_POOL2D)
def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """2-D adaptive average pooling of ``input`` (N, C, H, W) or (C, H, W) to ``output_size``
    (an int, or a pair whose None entries keep the input's size), as
    ``torch.nn.functional.adaptive_avg_pool2d``: output cell ``i`` averages input rows
    ``floor(i * H / OH)`` to ``ceil((i + 1) * H / OH)``, columns alike. A 1x1 output is a
    mean over the last two dims (``MeanBackward1``), as in PyTorch.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.adaptive_avg_pool2d(jitgrad.arange(16.0).reshape(1, 4, 4), (2, 1)).tolist()
    [[[3.5], [11.5]]]
    """
    input = as_tensor_arg(input, "input")
    xs = input._data.shape
    size = _output_size(output_size, xs)
    if len(xs) not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{list(xs)}")
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"adaptive_avg_pool2d" not implemented for '
                                  f"'{input.dtype.tensor_type[:-len('Tensor')]}'")
    if size == (1, 1):
        return input.mean(dim=(-1, -2), keepdim=True)
    return _adaptive_call(input, {"input_shape": xs, "output_size": size})
