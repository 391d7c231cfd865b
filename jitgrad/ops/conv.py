"""2-D convolution and pooling (NCHW), with torch.nn.functional's signatures and semantics.

Primitives (each a registered op with a VJP written with registered ops, so double backward
and tracing work):

- ``conv2d(x, w, b)`` -> ``ConvolutionBackward0``; its gradients are the ops
  ``conv2d_backward_input(g, w)`` (a transposed convolution, linear in ``g`` and in ``w``) and
  ``conv2d_backward_weight(g, x)`` (linear in ``g`` and in ``x``), both
  ``ConvolutionBackwardBackward0`` as in PyTorch; the VJPs of these two are again convolutions
  of the three kinds. The bias gradient is ``g.sum((0, 2, 3))``.
- ``max_pool2d(x)`` -> ``MaxPool2DWithIndicesBackward0``, saving the argmax indices (a param, as
  ``max_dim`` does); its gradient ``max_pool2d_backward(g, x)`` scatters ``g`` to them and has a
  gather by the same indices (``getitem``) as its own VJP.
- ``avg_pool2d(x)`` -> ``AvgPool2DBackward0``; ``avg_pool2d_backward(g, x)`` is its adjoint, and
  the adjoint of that is ``avg_pool2d`` again.

The pooling gradient ops take the pooled input ``x`` as PyTorch's do (its gradient there is
zero), so ``create_graph`` records the same nodes as PyTorch even for a constant ``g``.

Kernels: :mod:`jitgrad.kernels.conv` (blocked patch lowering fused with a Numba GEMM, pooling
loops). With stride 1 the input gradient runs as a forward convolution of ``g`` with the flipped
kernel. Padding is a 4-tuple ``(top, bottom, left, right)`` in the op params because
``padding="same"`` with an even dilated kernel pads one more pixel at the bottom/right.
Only float32/float64 are implemented (PyTorch also convolves and pools integer tensors).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ..kernels.parallel import parallel_ok
from ..shapes import fmt_shape
from ..tensor import Tensor, wrap
from . import samples as S
from .dispatch import as_tensor_arg, record
from .registry import OPAQUE, REDUCE, defop

__all__ = ["conv2d", "max_pool2d", "avg_pool2d", "conv2d_backward_input",
           "conv2d_backward_weight", "max_pool2d_backward", "avg_pool2d_backward"]

#: multiply-adds from which the conv kernels run in parallel
PARALLEL_MIN_MACS = 1 << 18
#: window taps (pooling) from which the pooling kernels run in parallel
PARALLEL_MIN_WORK = 1 << 15

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_mod = None


def _k():
    global _mod
    if _mod is None:
        from ..kernels import conv as mod
        from ..kernels.parallel import configure_threading

        configure_threading()
        _mod = mod
    return _mod


# ------------------------------------------------------------------- array implementations
def _out_hw(hw, k, stride, padding, dilation):
    """Convolution output size per spatial dim (padding: top, bottom, left, right)."""
    return tuple((hw[i] + padding[2 * i] + padding[2 * i + 1] - dilation[i] * (k[i] - 1) - 1)
                 // stride[i] + 1 for i in range(2))


def _par(macs: int) -> bool:
    return macs >= PARALLEL_MIN_MACS and parallel_ok(macs)


def _big(work: int) -> bool:
    return work >= PARALLEL_MIN_WORK and parallel_ok(work)


def _padded(x, padding):
    """``x`` (N, C, H, W) contiguous with ``padding`` (top, bottom, left, right) zeros."""
    x = np.ascontiguousarray(x)
    if not any(padding):
        return x
    t, b, lft, r = padding
    N, C, H, W = x.shape
    out = np.empty((N, C, H + t + b, W + lft + r), x.dtype)
    (_k().pad_par if _big(out.size) else _k().pad)(x, t, lft, out)
    return out


def _forward(x, w, b, stride, padding, dilation, groups, out):
    """``out`` = conv of ``x`` with ``w`` (+ ``b``) on the fused lowering + GEMM kernel."""
    Co, Cg, kh, kw = w.shape
    k = _k()
    fn = k.conv2d_forward_par if _par(out.size * Cg * kh * kw) else k.conv2d_forward
    fn(_padded(x, padding), np.ascontiguousarray(w).reshape(Co, Cg * kh * kw),
       None if b is None else np.ascontiguousarray(b), stride[0], stride[1], dilation[0],
       dilation[1], kh, kw, groups, out)
    return out


def _conv_fwd(x, w, b, stride, padding, dilation, groups):
    N = x.shape[0]
    Co, _, kh, kw = w.shape
    ohw = _out_hw(x.shape[2:], (kh, kw), stride, padding, dilation)
    return _forward(x, w, b, stride, padding, dilation, groups, np.empty((N, Co) + ohw, x.dtype))


def _conv_bwd_input(g, w, input_size, stride, padding, dilation, groups):
    N, Co = g.shape[:2]
    _, Cg, kh, kw = w.shape
    G = groups
    out = np.empty((N, Cg * G) + tuple(input_size), g.dtype)
    # with stride 1 the input gradient is a convolution of g with the flipped, transposed
    # kernel and the complementary padding (when that is not negative); it pays off from a
    # few input channels per group (fewer: the GEMM cannot amortise the patch lowering)
    tpad = tuple(dilation[i // 2] * ((kh, kw)[i // 2] - 1) - padding[i] for i in range(4))
    if stride == (1, 1) and min(tpad) >= 0 and Cg >= 4:
        wf = w[:, :, ::-1, ::-1].reshape(G, Co // G, Cg, kh, kw).transpose(0, 2, 1, 3, 4)
        return _forward(g, wf.reshape(G * Cg, Co // G, kh, kw), None, stride, tpad, dilation,
                        G, out)
    wt = np.ascontiguousarray(w.reshape(G, Co // G, Cg * kh * kw).transpose(0, 2, 1))
    k = _k()
    fn = k.conv2d_backward_input_par if _par(g.size * Cg * kh * kw) else k.conv2d_backward_input
    fn(np.ascontiguousarray(g), wt.reshape(G * Cg * kh * kw, Co // G), stride[0], stride[1],
       padding[0], padding[2], dilation[0], dilation[1], kh, kw, G, out)
    return out


def _conv_bwd_weight(g, x, kernel_size, stride, padding, dilation, groups):
    N, Co, OH, OW = g.shape
    Cg = x.shape[1] // groups
    kh, kw = kernel_size
    k = _k()
    rows = k.row_blocks(N * OH, OW, k.WGRAD_BLOCK_COLS)
    partial = np.empty((-(-N * OH // rows), Co, Cg * kh * kw), g.dtype)
    fn = (k.conv2d_backward_weight_par if _par(g.size * Cg * kh * kw)
          else k.conv2d_backward_weight)
    fn(np.ascontiguousarray(g), _padded(x, padding), stride[0], stride[1], dilation[0],
       dilation[1], kh, kw, groups, partial)
    # block partial sums added in block order (in float64): independent of the thread count
    return partial.sum(axis=0, dtype=np.float64).astype(g.dtype).reshape(Co, Cg, kh, kw)


# ------------------------------------------------------------------------ NumPy references
def _windows(xp, k, stride, dilation, ohw):
    """``xp[..., i*dh + oh*sh, j*dw + ow*sw]`` as an array ``(..., kh, kw, OH, OW)`` view."""
    sh, sw = xp.strides[-2:]
    shape = xp.shape[:-2] + (k[0], k[1]) + tuple(ohw)
    strides = xp.strides[:-2] + (sh * dilation[0], sw * dilation[1], sh * stride[0],
                                 sw * stride[1])
    return np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)


def _pad(x, padding, value=0.0):
    t, b, lft, r = padding
    return np.pad(x, ((0, 0), (0, 0), (t, b), (lft, r)), constant_values=value)


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


# ---------------------------------------------------------------------------- conv ops
def _run(op, inputs, params, res):
    return record(op, wrap(res), tuple(inputs), params)


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


def _conv_vjp(g, ins, out, p, n):
    x, w, _ = ins
    gx = conv2d_backward_input(g, w, {**p, "input_size": x._data.shape[2:]}) if n[0] else None
    gw = conv2d_backward_weight(g, x, {**p, "kernel_size": w._data.shape[2:]}) if n[1] else None
    gb = g.sum(dim=(0, 2, 3)) if n[2] else None
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
               save=(0, 1), samples=S.conv2d)
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


# --------------------------------------------------------------------- argument parsing
def _ints(v, n, what):
    """``v`` (int or sequence of 1 or ``n`` ints) as an ``n``-tuple, or None if malformed."""
    if isinstance(v, (bool, np.bool_)):
        return None
    try:
        return (operator.index(v),) * n
    except TypeError:
        pass
    try:
        vals = tuple(operator.index(e) for e in v)
    except TypeError:
        raise TypeError(f"{what} must be an int or a tuple of ints, got {v!r}") from None
    if len(vals) == 1:
        return vals * n
    return vals if len(vals) == n else None


def _conv_pair(v, name):
    r = _ints(v, 2, name)
    if r is None:
        raise RuntimeError(
            f"expected {name} to be a single integer value or a list of 2 values to match the "
            f"convolution dimensions, but got {name}={list(v)}")
    return r


_TYPE_NAMES = {"float32": ("Float", "float"), "float64": ("Double", "double")}


def _type_name(dt, c=False) -> str:
    names = _TYPE_NAMES.get(np.dtype(dt).name)
    if names is None:
        return np.dtype(dt).name
    return names[1] if c else names[0]


def _check_float(t: Tensor, fn: str) -> None:
    if t._data.dtype not in _FLOATS:
        raise RuntimeError(f"{fn}: jitgrad implements float32 and float64 tensors, got "
                           f"{t.dtype.name} (input of size {fmt_shape(t._data.shape)})")


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
    if dt != wdt:
        raise RuntimeError(f"expected scalar type {_type_name(dt)} but found {_type_name(wdt)}")
    if bias is not None and bias._data.dtype != dt:
        raise RuntimeError(f"Input type ({_type_name(dt, True)}) and bias type "
                           f"({_type_name(bias._data.dtype, True)}) should be the same")
    _check_float(input, "conv2d")
    p = {"stride": stride, "padding": pad4, "dilation": dilation, "groups": groups}
    if batched:
        return _conv_call(input, weight, bias, p)
    return _conv_call(input.unsqueeze(0), weight, bias, p).squeeze(0)


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
    xp = _planes(x)
    out = np.empty((xp.shape[0],) + ohw, x.dtype)
    idx = np.empty(out.shape, np.int64)
    big = _big(out.size * kernel_size[0] * kernel_size[1])
    (_k().max_pool_par if big else _k().max_pool)(
        xp, *kernel_size, *stride, *padding, *dilation, out, idx)
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


def _max_pool_bwd(g, x, indices, input_shape, **geometry):
    gp = _planes(g)
    ip = np.ascontiguousarray(indices).reshape(gp.shape)
    out = np.empty((gp.shape[0],) + tuple(input_shape[-2:]), g.dtype)
    big = _big(out.size)
    (_k().max_pool_backward_par if big else _k().max_pool_backward)(gp, ip, out)
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
    P = int(np.prod(input_shape[:-2], dtype=np.int64))
    sp = np.ascontiguousarray(src).reshape(P, -1)
    ip = np.ascontiguousarray(indices).reshape(P, -1)
    return np.take_along_axis(sp, ip, axis=1).reshape(indices.shape)


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
                zeros(p["input_shape"], dtype=gg.dtype) if n[1] else None) + (
                    (None,) * (len(n) - 2))
    return vjp


def _gather_vjp(g, ins, out, p, n):
    src, idx = ins
    return (_run(MAX_POOL2D_BACKWARD, (g, None, idx), {**p["geometry"],
                                                      "input_shape": p["input_shape"]},
                 _max_pool_bwd(g._data, None, idx._data, p["input_shape"])) if n[0] else None,
            None)


POOL_GATHER = defop(
    name="pool_gather", kind=REDUCE, inputs=("src", "indices"),
    params=("input_shape", "geometry"), node="MaxPool2DWithIndicesBackwardBackward0",
    ref=_pool_gather_ref,
    vjp=_gather_vjp, save=(1,), samples=S.pool_gather)


def _gather(gg: Tensor, idx: Tensor, p: dict) -> Tensor:
    q = {"input_shape": tuple(p["input_shape"]), "geometry": {k: p[k] for k in _GEOMETRY}}
    return _run(POOL_GATHER, (gg, idx), q, _pool_gather_ref(gg._data, idx._data,
                                                             q["input_shape"]))


MAX_POOL2D_BACKWARD = defop(
    name="max_pool2d_backward", kind=REDUCE, inputs=("grad", "input", "indices"),
    params=("input_shape",) + _GEOMETRY, node="MaxPool2DWithIndicesBackwardBackward0",
    ref=_max_pool_bwd_ref,
    fwd=lambda g, x, idx, input_shape, **geo: _max_pool_bwd(g, x, idx, input_shape),
    vjp=_pool_bwd_vjp(lambda gg, ins, p: _gather(gg, ins[2], p)), save=(2,),
    samples=S.max_pool2d_backward)
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
    xp = _planes(x)
    out = np.empty((xp.shape[0],) + ohw, x.dtype)
    big = _big(out.size * kernel_size[0] * kernel_size[1])
    (_k().avg_pool_par if big else _k().avg_pool)(
        xp, *_avg_args(kernel_size, stride, padding, count_include_pad, divisor_override), out)
    return out.reshape(x.shape[:-2] + ohw)


def _avg_pool_bwd(g, x, input_shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override):
    gp = _planes(g)
    out = np.empty((gp.shape[0],) + tuple(input_shape[-2:]), g.dtype)
    big = _big(gp.size * kernel_size[0] * kernel_size[1])
    (_k().avg_pool_backward_par if big else _k().avg_pool_backward)(
        gp, *_avg_args(kernel_size, stride, padding, count_include_pad, divisor_override), out)
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
    return _avg_call(input, {"input_shape": input._data.shape, "kernel_size": k, "stride": s,
                             "padding": pad, "ceil_mode": bool(ceil_mode),
                             "count_include_pad": bool(count_include_pad),
                             "divisor_override": divisor_override})
