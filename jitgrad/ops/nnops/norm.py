"""Layer and batch normalisation as ops with PyTorch's nodes (``NativeLayerNormBackward0``,
``NativeBatchNormBackward0``) and fused backward ops whose own VJPs are written in jitgrad ops
(so second derivatives work and the compiler can trace them).

Both normalise ``x`` over a set of dims (layer norm: the trailing ``normalized_shape``; batch
norm in training: every dim but the channel dim 1) with the biased variance. The input
gradient for ``a = g * w`` is ``r * P(a)`` with ``r = 1/sqrt(var + eps)`` and the projection
``P(v) = v - mean(v) - xhat * mean(v * xhat)``; the backward ops compute it (recomputing the
statistics, so the forward saves nothing but its inputs).
"""

from __future__ import annotations

import math

import numpy as np

from ...amp.autocast_mode import autocast_op
from ...devices import array_namespace, is_cpu_array, row_major
from ...kernels.pool import run_sized
from ...memory_format import channels_last, channels_last_3d, has_layout
from ...shapes import as_shape, fmt_shape
from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..dispatch import as_tensor_arg
from ..eager_kernels import use_kernels
from ..elementwise import rsqrt
from ..losses import _call_optional
from ..reduce_base import Exactly
from ..registry import REDUCE, defop

__all__ = ["layer_norm", "batch_norm", "layer_norm_backward", "batch_norm_backward"]


# ---------------------------------------------------------------- shared NumPy math
def _np_stats(x, dims, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=dims, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=dims, keepdims=True)
    return x64, mean, 1.0 / np.sqrt(var + eps)


def _np_norm(x, w, b, dims, eps):
    x64, mean, r = _np_stats(x, dims, eps)
    y = (x64 - mean) * r
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y.astype(x.dtype)


def _np_norm_grad(g, x, w, dims, eps):
    x64, mean, r = _np_stats(x, dims, eps)
    xh = (x64 - mean) * r
    a = g.astype(np.float64) if w is None else g * w
    gx = r * (a - a.mean(axis=dims, keepdims=True) - xh * (a * xh).mean(axis=dims,
                                                                        keepdims=True))
    return gx.astype(x.dtype)


# ------------------------------------------------------- shared VJPs (jitgrad ops)
def _count(x: Tensor, dims) -> int:
    return math.prod(x._data.shape[d] for d in dims)


def _xhat(x: Tensor, dims, eps) -> tuple:
    """(normalised x, 1/sqrt(var + eps)), built from differentiable ops."""
    dims = Exactly(dims)
    mean = x.mean(dims, keepdim=True)
    r = rsqrt(x.var(dims, correction=0, keepdim=True) + eps)
    return (x - mean) * r, r


def _sum_except(t: Tensor, dims, shape) -> Tensor:
    """``t`` summed over ``dims`` and reshaped to a parameter's ``shape``."""
    return (t.sum(dims) if dims else t).reshape(shape)


def _norm_grad_vjp(v, g, x, w, dims, eps, grad_op):
    """VJP of ``gx = r P(g w)`` (the fused backward op ``grad_op(g, x, w)``) for the cotangent
    ``v``: returns (d/dg, d/dx, d/dw). ``grad_op(h, x, None) = r P(h)``."""
    rpv = grad_op(v, x, None)
    dg = rpv if w is None else rpv * w
    dw = g * rpv
    n = float(_count(x, dims))
    dims = Exactly(dims)
    xh, r = _xhat(x, dims, eps)
    a = g if w is None else g * w
    s2 = (a * xh).sum(dims, keepdim=True) / n
    vx = (v * xh).sum(dims, keepdim=True)
    gx = grad_op(g, x, w)
    q = (v * gx).sum(dims, keepdim=True)  # sum(v gx) = r * dL/dr
    h = -r * (a * vx / n + s2 * v)
    dx = grad_op(h, x, None) - q * r * xh / n
    return dg, dx, dw


# ------------------------------------------------------------------------ layer norm
def _ln_dims(x, normalized_shape):
    k = len(normalized_shape)
    return tuple(range(x.ndim - k, x.ndim))


def _ln_ref(x, w, b, normalized_shape, eps):
    return _np_norm(x, w, b, _ln_dims(x, normalized_shape), eps)


def _ln_grad_ref(g, x, w, normalized_shape, eps):
    return _np_norm_grad(g, x, w, _ln_dims(x, normalized_shape), eps)


def _rows(x, normalized_shape):
    n = math.prod(normalized_shape)
    return array_namespace(x).ascontiguousarray(x).reshape(-1, n)


def _flat(a):
    return None if a is None else array_namespace(a).ascontiguousarray(a).reshape(-1)


def _kernel_ok(*arrays) -> bool:
    """Float32/64 arrays of one dtype and device, non-empty: host arrays run
    ``kernels/nn.py``, CUDA arrays ``cuda/rowwise.py``."""
    x = arrays[0]
    return (x.dtype in (np.float32, np.float64) and x.size > 0 and use_kernels()
            and (type(x) is np.ndarray or not is_cpu_array(x))
            and all(a is None or (a.dtype == x.dtype and type(a) is type(x)) for a in arrays))


def _ln_eager(x, w, b, normalized_shape, eps):
    if not _kernel_ok(x, w, b):
        return _ln_ref(x, w, b, normalized_shape, eps)
    rows = _rows(x, normalized_shape)
    if type(x) is not np.ndarray:  # CUDA memory: the CUDA row kernel
        from ...cuda.rowwise import layer_norm_cuda

        return layer_norm_cuda("layer_norm", rows, _flat(w), _flat(b), eps).reshape(x.shape)
    from ...kernels import nn as K

    out = np.empty_like(rows)
    run_sized(K.layer_norm, rows.shape[0], x.size, (rows, _flat(w), _flat(b), float(eps), out))
    return out.reshape(x.shape)


def _ln_grad_eager(g, x, w, normalized_shape, eps):
    if not _kernel_ok(x, w, g):
        return _ln_grad_ref(g, x, w, normalized_shape, eps)
    rows = _rows(x, normalized_shape)
    if type(x) is not np.ndarray:  # CUDA memory: the CUDA row kernel
        from ...cuda.rowwise import layer_norm_cuda

        return layer_norm_cuda("layer_norm_backward", rows, _flat(w), None, eps,
                               _rows(g, normalized_shape)).reshape(x.shape)
    from ...kernels import nn as K

    out = np.empty_like(rows)
    run_sized(K.layer_norm_backward, rows.shape[0], x.size,
              (_rows(g, normalized_shape), rows, _flat(w), float(eps), out))
    return out.reshape(x.shape)


def layer_norm_backward(grad: Tensor, input: Tensor, weight: Tensor | None,
                        normalized_shape: tuple, eps: float) -> Tensor:
    """Input gradient of :func:`layer_norm` for the output gradient ``grad``."""
    return _call_optional(LAYER_NORM_BACKWARD, [grad, input, weight],
                          {"normalized_shape": tuple(normalized_shape), "eps": eps})


def _ln_grad_vjp(v, ins, out, p, n):
    g, x, w = ins
    ns, eps = p["normalized_shape"], p["eps"]
    dims = _ln_dims(x, ns)

    def op(a, xx, ww):
        return layer_norm_backward(a, xx, ww, ns, eps)

    dg, dx, dw = _norm_grad_vjp(v, g, x, w, dims, eps, op)
    batch = tuple(range(x.ndim - len(ns)))
    return (dg if n[0] else None, dx if n[1] else None,
            _sum_except(dw, batch, ns) if n[2] else None)


LAYER_NORM_BACKWARD = defop(
    name="layer_norm_backward", kind=REDUCE, node="NativeLayerNormBackwardBackward0",
    inputs=("grad", "input", "weight"), params=("normalized_shape", "eps"), ref=_ln_grad_ref,
    fwd=_ln_grad_eager, vjp=_ln_grad_vjp, save=(0, 1, 2), cast_grads=True,
    samples=S.layer_norm_backward)

# layer_norm_backward comes before its op (the op's VJP rule calls it): declared here
api(LAYER_NORM_BACKWARD)(layer_norm_backward)


def _ln_vjp(g, ins, out, p, n):
    x, w, b = ins
    ns, eps = p["normalized_shape"], p["eps"]
    batch = tuple(range(x.ndim - len(ns)))
    gx = layer_norm_backward(g, x, w, ns, eps) if n[0] else None
    gw = gb = None
    if n[1]:
        # x normalised by the forward's row kernel (layer norm without weight and bias: one
        # call, its VJP layer_norm_backward(., x, None)), not rebuilt from mean and var ops
        xh = layer_norm(x, ns, None, None, eps)
        gw = _sum_except(g * xh, batch, ns)
    if n[2]:
        gb = _sum_except(g, batch, ns)
    return gx, gw, gb


LAYER_NORM = defop(
    name="layer_norm", kind=REDUCE, node="NativeLayerNormBackward0",
    inputs=("input", "weight", "bias"), params=("normalized_shape", "eps"), ref=_ln_ref,
    fwd=_ln_eager, vjp=_ln_vjp, save=(0, 1), cast_grads=True, samples=S.layer_norm)


@api(LAYER_NORM)
@autocast_op
def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims, then scale and shift.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.layer_norm(jitgrad.tensor([[1.0, 3.0]]), (2,))
    tensor([[-1.0000,  1.0000]])
    """
    input = as_tensor_arg(input)
    ns = as_shape((normalized_shape,))
    shape = input._data.shape
    if len(ns) > len(shape) or shape[len(shape) - len(ns):] != ns:
        raise RuntimeError(
            f"Given normalized_shape={list(ns)}, expected input with shape "
            f"[*, {', '.join(map(str, ns))}], but got input of size{list(shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t._data.shape != ns:
            raise RuntimeError(f"layer_norm: expected {name} of shape {fmt_shape(ns)}, got "
                               f"{fmt_shape(t._data.shape)}")
    return _call_optional(LAYER_NORM, [input, weight, bias],
                          {"normalized_shape": ns, "eps": float(eps)})


# ------------------------------------------------------------------------ batch norm
def _bn_dims(x):
    return (0,) + tuple(range(2, x.ndim))


def _per_channel(a, x):
    """A (C,) array or tensor shaped to broadcast against ``x`` (N, C, *)."""
    if a is None:
        return None
    return a.reshape((a.shape[0],) + (1,) * (x.ndim - 2))


def _bn_ref(x, w, b, rm, rv, training, eps):
    w, b = _per_channel(w, x), _per_channel(b, x)
    if training:
        return _bn_layout(_np_norm(x, w, b, _bn_dims(x), eps), x)
    y = (x.astype(np.float64) - _per_channel(rm, x)) / np.sqrt(_per_channel(rv, x) + eps)
    y = y if w is None else y * w
    return _bn_layout((y if b is None else y + b).astype(x.dtype), x)


def _bn_layout(y, x):
    """``y`` in the layout of PyTorch's batch-norm result (``suggest_memory_format``):
    channels-last where the input is, else row-major (NumPy computes in the input's order:
    a transposed input gave a transposed result, which ``.view()`` refused)."""
    fmt = {4: channels_last, 5: channels_last_3d}.get(x.ndim)
    if fmt is not None and not x.flags.c_contiguous and has_layout(x, fmt):
        return y
    return row_major(y)


def _bn_grad_ref(g, x, w, rm, rv, training, eps):
    wc = _per_channel(w, x)
    if training:
        return _np_norm_grad(g, x, wc, _bn_dims(x), eps)
    gx = g / np.sqrt(_per_channel(rv, x).astype(np.float64) + eps)
    return (gx if wc is None else gx * wc).astype(x.dtype)


def batch_norm_backward(grad: Tensor, input: Tensor, weight, running_mean, running_var,
                        training: bool, eps: float) -> Tensor:
    """Input gradient of :func:`batch_norm` for the output gradient ``grad``."""
    return _call_optional(BATCH_NORM_BACKWARD, [grad, input, weight, running_mean, running_var],
                          {"training": bool(training), "eps": eps})


def _bn_grad_vjp(v, ins, out, p, n):
    g, x, w, rm, rv = ins
    eps = p["eps"]
    dims = _bn_dims(x)
    wc = _per_channel(w, x)
    if not p["training"]:  # gx = g w r: linear in g, independent of x and the mean
        r = _per_channel(rsqrt(rv + eps), x)
        dg = v * r if w is None else v * r * wc
        dw = _sum_except(g * v * r, dims, w._data.shape) if n[2] else None
        drv = None
        if n[4]:
            gv = g * v if w is None else g * v * wc
            drv = _sum_except(gv * r * r * r * -0.5, dims, rv._data.shape)
        return (dg if n[0] else None, None, dw, None, drv)

    def op(a, xx, ww):  # the per-channel weight is already shaped to broadcast
        gx = batch_norm_backward(a, xx, None, None, None, True, eps)
        return gx if ww is None else gx * ww

    dg, dx, dw = _norm_grad_vjp(v, g, x, wc, dims, eps, op)
    return (dg if n[0] else None, dx if n[1] else None,
            _sum_except(dw, dims, w._data.shape) if n[2] else None, None, None)


BATCH_NORM_BACKWARD = defop(
    name="batch_norm_backward", kind=REDUCE, node="NativeBatchNormBackwardBackward0",
    inputs=("grad", "input", "weight", "running_mean", "running_var"),
    params=("training", "eps"), ref=_bn_grad_ref, vjp=_bn_grad_vjp, save=(0, 1, 2, 3, 4),
    cast_grads=True, samples=S.batch_norm_backward)

# batch_norm_backward comes before its op (the op's VJP rule calls it): declared here
api(BATCH_NORM_BACKWARD)(batch_norm_backward)


def _bn_vjp(g, ins, out, p, n):
    x, w, b, rm, rv = ins
    training, eps = p["training"], p["eps"]
    dims = _bn_dims(x)
    gx = batch_norm_backward(g, x, w, rm, rv, training, eps) if n[0] else None
    gw = gb = grm = grv = None
    if n[1]:
        if training:
            xh, _ = _xhat(x, dims, eps)
        else:
            xh = (x - _per_channel(rm, x)) * _per_channel(rsqrt(rv + eps), x)
        gw = _sum_except(g * xh, dims, w._data.shape)
    if n[2]:
        gb = _sum_except(g, dims, b._data.shape)
    if not training and (n[3] or n[4]):  # running statistics as inputs (PyTorch: buffers)
        r = _per_channel(rsqrt(rv + eps), x)
        gwr = g * r if w is None else g * r * _per_channel(w, x)
        if n[3]:
            grm = -_sum_except(gwr, dims, rm._data.shape)
        if n[4]:
            grv = _sum_except(gwr * (x - _per_channel(rm, x)) * r * r * -0.5, dims,
                              rv._data.shape)
    return gx, gw, gb, grm, grv


BATCH_NORM = defop(
    name="batch_norm", kind=REDUCE, node="NativeBatchNormBackward0",
    inputs=("input", "weight", "bias", "running_mean", "running_var"),
    params=("training", "eps"), ref=_bn_ref, vjp=_bn_vjp, save=(0, 1, 2, 3, 4),
    cast_grads=True, samples=S.batch_norm)


def _update_running(running_mean, running_var, input, momentum):
    """PyTorch's running-stat update: unbiased batch variance, in place, no graph.
    ``momentum``: a number, or a 0-d float64 tensor (BatchNorm's cumulative average, read
    without ``.item()``): both cast to the buffers' dtype, the same bits
    (``r * (1 - m) + m * stat``, as ``add_(stat, alpha=m)`` computes it)."""
    from ...autograd.grad_mode import no_grad

    dims = _bn_dims(input)
    with no_grad():
        x = input.detach()
        mean = x.mean(dims)
        var = x.var(dims, correction=1)
        if running_mean is not None:
            running_mean.mul_(1.0 - momentum).add_(mean.to(running_mean.dtype) * momentum)
        if running_var is not None:
            running_var.mul_(1.0 - momentum).add_(var.to(running_var.dtype) * momentum)


@api(BATCH_NORM)
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) with batch statistics (``training``, updating the
    running statistics in place) or the running ones.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.batch_norm(jitgrad.tensor([[1.0], [3.0]]), None, None, training=True)
    tensor([[-1.0000],
            [ 1.0000]])
    """
    input = as_tensor_arg(input)
    shape = input._data.shape
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input with a channel dim 1, got shape "
                         f"{fmt_shape(shape)}")
    c = shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    if training:
        if math.prod(s for i, s in enumerate(shape) if i != 1) <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size jitgrad.Size({list(shape)})")
        _update_running(running_mean, running_var, input, momentum)
    elif running_mean is None or running_var is None:
        raise RuntimeError("batch_norm: running_mean and running_var must be defined in "
                           "evaluation mode")
    rm = None if training else running_mean
    rv = None if training else running_var
    return _call_optional(BATCH_NORM, [input, weight, bias, rm, rv],
                          {"training": bool(training), "eps": float(eps)})
