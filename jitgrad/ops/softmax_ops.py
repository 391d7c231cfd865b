"""logsumexp and the softmax family: softmax, log_softmax and their fused backward ops, on
the row-wise kernels (``rowwise.py``) where the layout allows."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..amp.autocast_mode import autocast_op
from ..devices import array_namespace
from ..shapes import wrap_dim
from ..tensor import Tensor, wrap
from . import samples as S
from .api import api
from .dispatch import call, record
from .math_functions import exp
from .reduce_base import call_reduce, expand_back, kept_shape, reduce_params
from .registry import REDUCE, defop
from .rowwise import kernel_ok, rowwise

__all__ = ["logsumexp", "softmax", "log_softmax", "softmax_backward", "log_softmax_backward"]


# ----------------------------------------------------------------------------- logsumexp
def _lse_ref(a, dims, keepdim, shape, full=False):
    if a.size == 0:  # log(sum of nothing) = -inf, as PyTorch
        return array_namespace(a).full(kept_shape(shape, dims) if keepdim else tuple(
            s for i, s in enumerate(shape) if i not in dims), -np.inf, dtype=a.dtype)
    m = np.max(a, axis=dims, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(a - m), axis=dims, keepdims=True)) + m
    if not keepdim:
        r = np.squeeze(r, axis=dims)
    return array_namespace(a).asarray(r.astype(a.dtype))


def _lse_vjp(g, ins, out, p, n):
    a = ins[0]
    shape, dims = p["shape"], p["dims"]
    o = out if p["keepdim"] else out.reshape(kept_shape(shape, dims))
    return (expand_back(g, p) * exp(a - o),)


def _lse_eager(a, dims, keepdim, shape, full=False):
    if len(dims) == 1 and kernel_ok(a, dims[0]):
        r = rowwise("logsumexp", (a,), dims[0], reduce_out=True)
        return np.expand_dims(r, dims[0]) if keepdim else r
    return _lse_ref(a, dims, keepdim, shape)


LOGSUMEXP = defop(name="logsumexp", kind=REDUCE, inputs=("a",),
                  params=("dims", "keepdim", "shape"), node="LogsumexpBackward0",
                  ref=_lse_ref, fwd=_lse_eager, vjp=_lse_vjp, save=(0,), save_out=True,
                  samples=S.reduce)


@api(LOGSUMEXP, method="logsumexp", export="logsumexp")
@autocast_op
def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(input), dim))``, computed stably."""
    if input._data.dtype.kind not in "fc":  # (complex: LOGSUMEXP's error)
        input = input.to(dtypes.get_default_dtype())
    return call_reduce(LOGSUMEXP, input, reduce_params(input, dim, keepdim, "logsumexp"))


# ----------------------------------------------------------------- softmax / log_softmax
# (an infinite maximum is not masked, unlike logsumexp's: a row holding +inf, or only -inf,
# gives NaNs, as PyTorch's softmax and log_softmax)
def _softmax_ref(a, dim):
    if a.size == 0:  # an empty result, as PyTorch (np.max has no identity)
        return np.empty_like(a)
    m = np.max(a, axis=dim, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.exp(a - m)
        e /= np.sum(e, axis=dim, keepdims=True)
    return e


def _log_softmax_ref(a, dim):
    if a.size == 0:
        return np.empty_like(a)
    m = np.max(a, axis=dim, keepdims=True)
    s = a - m
    with np.errstate(divide="ignore", invalid="ignore"):
        return s - np.log(np.sum(np.exp(s), axis=dim, keepdims=True))


def _softmax_eager(a, dim):
    if kernel_ok(a, dim):
        return rowwise("softmax", (a,), dim)
    return _softmax_ref(a, dim)


def _log_softmax_eager(a, dim):
    if kernel_ok(a, dim):
        return rowwise("log_softmax", (a,), dim)
    return _log_softmax_ref(a, dim)


def _softmax_bwd_ref(g, y, dim):
    return y * (g - np.sum(g * y, axis=dim, keepdims=True))


def _log_softmax_bwd_ref(g, y, dim):
    return g - np.exp(y) * np.sum(g, axis=dim, keepdims=True)


def _softmax_bwd_eager(g, y, dim):
    if kernel_ok(g, dim) and g.dtype == y.dtype:
        return rowwise("softmax_backward", (g, y), dim)
    return _softmax_bwd_ref(g, y, dim)


def _log_softmax_bwd_eager(g, y, dim):
    if kernel_ok(g, dim) and g.dtype == y.dtype:
        return rowwise("log_softmax_backward", (g, y), dim)
    return _log_softmax_bwd_ref(g, y, dim)


def _softmax_bwd_vjp(gg, ins, out, p, n):
    g, y = ins
    d = p["dim"]
    ggy = (gg * y).sum(dim=d, keepdim=True)
    return (softmax_backward(gg, y, d) if n[0] else None,
            gg * (g - (g * y).sum(dim=d, keepdim=True)) - g * ggy if n[1] else None)


def _log_softmax_bwd_vjp(gg, ins, out, p, n):
    g, y = ins
    d = p["dim"]
    ey = exp(y)
    return (gg - (gg * ey).sum(dim=d, keepdim=True) if n[0] else None,
            -gg * ey * g.sum(dim=d, keepdim=True) if n[1] else None)


SOFTMAX_BACKWARD = defop(name="softmax_backward", kind=REDUCE, inputs=("g", "y"),
                         params=("dim",), node="SoftmaxBackwardDataBackward0",
                         ref=_softmax_bwd_ref, fwd=_softmax_bwd_eager, vjp=_softmax_bwd_vjp,
                         save=(0, 1), samples=S.single_dim_pair)
LOG_SOFTMAX_BACKWARD = defop(name="log_softmax_backward", kind=REDUCE, inputs=("g", "y"),
                             params=("dim",), node="LogSoftmaxBackwardDataBackward0",
                             ref=_log_softmax_bwd_ref, fwd=_log_softmax_bwd_eager,
                             vjp=_log_softmax_bwd_vjp, save=(0, 1),
                             samples=S.single_dim_pair)


@api(SOFTMAX_BACKWARD)
def softmax_backward(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """Gradient of softmax from its output: ``y * (g - sum(g * y, dim))``."""
    return call(SOFTMAX_BACKWARD, (grad, output), {"dim": dim})


@api(LOG_SOFTMAX_BACKWARD)
def log_softmax_backward(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """Gradient of log_softmax from its output: ``g - exp(y) * sum(g, dim)``."""
    return call(LOG_SOFTMAX_BACKWARD, (grad, output), {"dim": dim})


SOFTMAX = defop(name="softmax", kind=REDUCE, inputs=("a",), params=("dim",),
                node="SoftmaxBackward0", ref=_softmax_ref, fwd=_softmax_eager,
                vjp=lambda g, ins, out, p, n: (softmax_backward(g, out, p["dim"]),),
                save_out=True, samples=S.single_dim)
LOG_SOFTMAX = defop(name="log_softmax", kind=REDUCE, inputs=("a",), params=("dim",),
                    node="LogSoftmaxBackward0", ref=_log_softmax_ref, fwd=_log_softmax_eager,
                    vjp=lambda g, ins, out, p, n: (log_softmax_backward(g, out, p["dim"]),),
                    save_out=True, samples=S.single_dim)


def _dim_op(op, input, dim, dtype, name):
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        raise TypeError(f"{name}() missing required argument 'dim'")
    a = input._data
    d = wrap_dim(dim, a.ndim) if a.ndim else 0
    if a.dtype.kind not in "fc":  # (no integer kernels, as PyTorch's; complex: the op's error)
        kernel = f"{name}_lastdim" if d == max(a.ndim - 1, 0) else name
        raise NotImplementedError(f'"{kernel}_kernel_impl" not implemented for '
                                  f"'{input.dtype.tensor_type[:-len('Tensor')]}'")
    if a.ndim == 0:
        res = op.ref(a.reshape(1), 0).reshape(())
        return record(op, wrap(res), (input,), {"dim": None})
    return call(op, (input,), {"dim": d})


@api(SOFTMAX, export="softmax")
@autocast_op
def softmax(input: Tensor, dim=None, dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x), dim)``, computed stably."""
    return _dim_op(SOFTMAX, input, dim, dtype, "softmax")


@api(LOG_SOFTMAX, export="log_softmax")
@autocast_op
def log_softmax(input: Tensor, dim=None, dtype=None) -> Tensor:
    """``x - logsumexp(x, dim)``, computed stably."""
    return _dim_op(LOG_SOFTMAX, input, dim, dtype, "log_softmax")


@api(SOFTMAX, method="softmax")
def _softmax_method(self, dim, dtype=None):
    """``tensor.softmax(dim)``: ``dim`` is required."""
    return softmax(self, dim, dtype)


@api(LOG_SOFTMAX, method="log_softmax")
def _log_softmax_method(self, dim, dtype=None):
    """``tensor.log_softmax(dim)``: ``dim`` is required."""
    return log_softmax(self, dim, dtype)
