"""Reductions and normalisations: sum, mean, max/min (whole tensor and ``dim``), amax/amin,
logsumexp, softmax, log_softmax."""

from __future__ import annotations

import builtins as _b
from collections import namedtuple

import numpy as np

from .. import dtypes
from ..shapes import fmt_shape, wrap_dim, wrap_dims
from ..tensor import Tensor, wrap
from . import samples as S
from .dispatch import call, record
from .eager_reduce import sum_float
from .registry import REDUCE, defop
from .rowwise import kernel_ok, rowwise

__all__ = ["sum", "mean", "max", "min", "amax", "amin", "logsumexp", "softmax", "log_softmax",
           "softmax_backward", "log_softmax_backward",
           "argmax", "argmin", "var", "std", "prod"]

def _return_type(name):
    cls = namedtuple(name, ["values", "indices"])
    cls.__repr__ = lambda self: (f"jitgrad.return_types.{name}(values={self.values!r}, "
                                 f"indices={self.indices!r})")
    return cls


return_max = _return_type("max")  # PyTorch's torch.return_types.max
return_min = _return_type("min")


def _kept_shape(shape, dims):
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _expand_back(g: Tensor, p: dict) -> Tensor:
    """Broadcast a reduced gradient back to the input shape."""
    shape, dims = p["shape"], p["dims"]
    if not p["keepdim"]:
        g = g.reshape(_kept_shape(shape, dims))
    return g.expand(shape)


def _count(shape, dims) -> int:
    n = 1
    for d in dims:
        n *= shape[d]
    return n


# ----------------------------------------------------------------------------- sum/mean
def _sum_ref(a, dims, keepdim, shape, dtype=None, full=False):
    if a.dtype.kind in "biu":
        r = np.sum(a, axis=dims, keepdims=keepdim, dtype=np.int64)
    else:
        r = np.add.reduce(a, axis=dims, keepdims=keepdim)
    return np.asarray(r if dtype is None else r.astype(dtype))


def _sum_eager(a, dims, keepdim, shape, full=False):
    if a.dtype.kind == "f":
        return sum_float(a, dims, keepdim)
    return _sum_ref(a, dims, keepdim, shape)


def _mean_eager(a, dims, keepdim, shape, full=False):
    n = _count(shape, dims)
    return sum_float(a, dims, keepdim, 1.0 / n if n else float("nan"))


SUM = defop(name="sum", kind=REDUCE, inputs=("a",), params=("dims", "keepdim", "shape"),
            node=lambda p: "SumBackward0" if p.get("full") else "SumBackward1",
            ref=_sum_ref, fwd=_sum_eager, vjp=lambda g, ins, out, p, n: (_expand_back(g, p),),
            fusable_reduction=True, samples=S.reduce)


def _mean_ref(a, dims, keepdim, shape, full=False):
    return np.asarray(np.mean(a, axis=dims, keepdims=keepdim))


MEAN = defop(name="mean", kind=REDUCE, inputs=("a",), params=("dims", "keepdim", "shape"),
             node=lambda p: "MeanBackward0" if p.get("full") else "MeanBackward1",
             ref=_mean_ref, fwd=_mean_eager, fusable_reduction=True,
             vjp=lambda g, ins, out, p, n: (_expand_back(g, p) / float(
                 _b.max(_count(p["shape"], p["dims"]), 1)),),
             samples=S.reduce)


_ALL = object()  # "no dim given": PyTorch picks the whole-tensor overload (SumBackward0...)


def _reduce_params(a: Tensor, dim, keepdim, name):
    nd = a._data.ndim
    full = dim is _ALL
    if full:
        dim, keepdim = None, False
    dims = wrap_dims(dim, nd, name) if dim is not None else tuple(range(nd))
    return {"dims": dims, "keepdim": bool(keepdim), "shape": a._data.shape, "full": full}


def _call_reduce(op, a, p):
    res = (op.fwd or op.ref)(a._data, p["dims"], p["keepdim"], p["shape"])
    return record(op, wrap(res), (a,), p)


def sum(input: Tensor, dim=_ALL, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001
    """Sum over all elements, or over ``dim`` (int or tuple)."""
    if dtype is not None:
        input = input.to(dtype)
    return _call_reduce(SUM, input, _reduce_params(input, dim, keepdim, "sum"))


def mean(input: Tensor, dim=_ALL, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Arithmetic mean over all elements, or over ``dim``."""
    if dtype is not None:
        input = input.to(dtype)
    if input._data.dtype.kind != "f":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {input.dtype.tensor_type.replace('Tensor', '')}"
        )
    return _call_reduce(MEAN, input, _reduce_params(input, dim, keepdim, "mean"))


# ----------------------------------------------------------------------- max / min
def _evenly(g: Tensor, a: Tensor, out: Tensor, p) -> Tensor:
    """Gradient of a full or dim-wise amax/amin: split evenly between tied extrema."""
    shape, dims = p["shape"], p["dims"]
    o = out if p["keepdim"] else out.reshape(_kept_shape(shape, dims))
    mask = a == o
    cnt = mask.sum(dim=dims, keepdim=True).to(g.dtype)
    return where_(mask, _expand_back(g, p) / cnt, 0.0)


def where_(c, x, y):
    from .elementwise import where

    return where(c, x, y)


def _extreme_ref(fn):
    def ref(a, dims, keepdim, shape, full=False):
        if a.size == 0:
            raise RuntimeError(
                "max(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                "the reduction dim with the 'dim' argument."
            )
        return np.asarray(fn(a, axis=dims, keepdims=keepdim))
    return ref


AMAX = defop(name="amax", kind=REDUCE, inputs=("a",), params=("dims", "keepdim", "shape"),
             node=lambda p: "MaxBackward1" if p.get("full") else "AmaxBackward0",
             ref=_extreme_ref(np.max), save=(0,), save_out=True,
             vjp=lambda g, ins, out, p, n: (_evenly(g, ins[0], out, p),),
             samples=S.reduce_distinct)
AMIN = defop(name="amin", kind=REDUCE, inputs=("a",), params=("dims", "keepdim", "shape"),
             node=lambda p: "MinBackward1" if p.get("full") else "AminBackward0",
             ref=_extreme_ref(np.min), save=(0,), save_out=True,
             vjp=lambda g, ins, out, p, n: (_evenly(g, ins[0], out, p),),
             samples=S.reduce_distinct)


def _select_grad(g: Tensor, p) -> Tensor:
    """Gradient of max/min along ``dim``: to the returned index only (a one-hot mask built
    with ops from the indices tensor, so a compiled backward recomputes it every call)."""
    from ..creation import const_tensor
    from .elementwise import eq

    dim, shape = p["dim"], p["shape"]
    if not shape:  # 0-d input: the value is the input
        return g
    idx = p["indices"]  # int64, keepdim=True layout
    ar = const_tensor(np.arange(shape[dim]).reshape(
        tuple(shape[dim] if i == dim else 1 for i in range(len(shape)))))
    gk = g if p["keepdim"] else g.unsqueeze(dim)
    return where_(eq(ar, idx), gk.expand(shape), 0.0)


def _dim_ref(fn):
    def ref(a, dim, keepdim, shape, indices=None):
        return np.asarray(fn(a, axis=dim, keepdims=keepdim))
    return ref


MAX_DIM = defop(name="max_dim", kind=REDUCE, inputs=("a",),
                params=("dim", "keepdim", "shape", "indices"), node="MaxBackward0",
                ref=_dim_ref(np.max), vjp=lambda g, ins, out, p, n: (_select_grad(g, p),))
MIN_DIM = defop(name="min_dim", kind=REDUCE, inputs=("a",),
                params=("dim", "keepdim", "shape", "indices"), node="MinBackward0",
                ref=_dim_ref(np.min), vjp=lambda g, ins, out, p, n: (_select_grad(g, p),))


def _extreme(op_full, op_dim, argfn, input, dim, keepdim, name):
    rtype = return_max if name == "max" else return_min
    if dim is None:
        p = _reduce_params(input, _ALL, False, name)
        return _call_reduce(op_full, input, p)
    a = input._data
    d = wrap_dim(dim, a.ndim)
    if a.ndim and a.shape[d] == 0:
        raise IndexError(
            f"{name}(): Expected reduction dim {d} to have non-zero size."
        )
    idx = call(ARGMAX if name == "max" else ARGMIN, (input,), {"dim": d, "keepdim": True})
    values = np.take_along_axis(a, idx._data, axis=d) if a.ndim else a.copy()
    if not keepdim and a.ndim:
        values = np.squeeze(values, axis=d)
    p = {"dim": d, "keepdim": bool(keepdim), "shape": a.shape, "indices": idx}
    out = record(op_dim, wrap(np.array(values, order="C")), (input,), p)
    if not keepdim and a.ndim:
        idx = idx.squeeze(d)
    return rtype(out, idx)


def max(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A001 - PyTorch's name
    """Largest element; with ``dim``: ``(values, indices)`` along ``dim``. With a tensor as
    second argument: element-wise maximum."""
    if isinstance(dim, Tensor):
        from .elementwise import maximum

        return maximum(input, dim)
    return _extreme(AMAX, MAX_DIM, np.argmax, input, dim, keepdim, "max")


def min(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A001 - PyTorch's name
    """Smallest element; with ``dim``: ``(values, indices)`` along ``dim``."""
    if isinstance(dim, Tensor):
        from .elementwise import minimum

        return minimum(input, dim)
    return _extreme(AMIN, MIN_DIM, np.argmin, input, dim, keepdim, "min")


def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Maximum over ``dim`` (all dims when empty); ties share the gradient."""
    p = _reduce_params(input, dim if dim != () else None, keepdim, "amax")
    p["full"] = False
    return _call_reduce(AMAX, input, p)


def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Minimum over ``dim`` (all dims when empty); ties share the gradient."""
    p = _reduce_params(input, dim if dim != () else None, keepdim, "amin")
    p["full"] = False
    return _call_reduce(AMIN, input, p)


def _arg_ref(fn):
    def ref(a, dim, keepdim):
        if a.ndim == 0:
            return np.zeros((), np.int64)
        if dim is None:
            r = fn(a)
            return np.asarray(r, np.int64).reshape((1,) * a.ndim if keepdim else ())
        return np.asarray(fn(a, axis=dim, keepdims=keepdim), dtype=np.int64)
    return ref


ARGMAX = defop(name="argmax", kind=REDUCE, inputs=("a",), params=("dim", "keepdim"),
               node=None, ref=_arg_ref(np.argmax), samples=S.arg_reduce)
ARGMIN = defop(name="argmin", kind=REDUCE, inputs=("a",), params=("dim", "keepdim"),
               node=None, ref=_arg_ref(np.argmin), samples=S.arg_reduce)


def argmax(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the largest element (flattened when ``dim`` is None); first on ties."""
    d = None if dim is None else wrap_dim(dim, input._data.ndim)
    return call(ARGMAX, (input,), {"dim": d, "keepdim": bool(keepdim)})


def argmin(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the smallest element (flattened when ``dim`` is None); first on ties."""
    d = None if dim is None else wrap_dim(dim, input._data.ndim)
    return call(ARGMIN, (input,), {"dim": d, "keepdim": bool(keepdim)})


# ------------------------------------------------------------ logsumexp / softmax
def _lse_ref(a, dims, keepdim, shape, full=False):
    if a.size == 0:  # log(sum of nothing) = -inf, as PyTorch
        return np.full(_kept_shape(shape, dims) if keepdim else tuple(
            s for i, s in enumerate(shape) if i not in dims), -np.inf, dtype=a.dtype)
    m = np.max(a, axis=dims, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(a - m), axis=dims, keepdims=True)) + m
    if not keepdim:
        r = np.squeeze(r, axis=dims)
    return np.asarray(r.astype(a.dtype))


def _lse_vjp(g, ins, out, p, n):
    a = ins[0]
    shape, dims = p["shape"], p["dims"]
    o = out if p["keepdim"] else out.reshape(_kept_shape(shape, dims))
    from .elementwise import exp

    return (_expand_back(g, p) * exp(a - o),)


def _lse_eager(a, dims, keepdim, shape, full=False):
    if len(dims) == 1 and kernel_ok(a, dims[0]):
        r = rowwise("logsumexp", (a,), dims[0], reduce_out=True)
        return np.expand_dims(r, dims[0]) if keepdim else r
    return _lse_ref(a, dims, keepdim, shape)


LOGSUMEXP = defop(name="logsumexp", kind=REDUCE, inputs=("a",),
                  params=("dims", "keepdim", "shape"), node="LogsumexpBackward0",
                  ref=_lse_ref, fwd=_lse_eager, vjp=_lse_vjp, save=(0,), save_out=True,
                  samples=S.reduce)


def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(input), dim))``, computed stably."""
    if input._data.dtype.kind != "f":
        input = input.to(dtypes.get_default_dtype())
    return _call_reduce(LOGSUMEXP, input, _reduce_params(input, dim, keepdim, "logsumexp"))


def _softmax_ref(a, dim):
    m = np.max(a, axis=dim, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(a - m)
    e /= np.sum(e, axis=dim, keepdims=True)
    return e


def _log_softmax_ref(a, dim):
    m = np.max(a, axis=dim, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    s = a - m
    with np.errstate(divide="ignore"):
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
    from .elementwise import exp

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


def softmax_backward(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """Gradient of softmax from its output: ``y * (g - sum(g * y, dim))``."""
    return call(SOFTMAX_BACKWARD, (grad, output), {"dim": dim})


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
    elif input._data.dtype.kind != "f":
        input = input.to(dtypes.get_default_dtype())
    if dim is None:
        raise TypeError(f"{name}() missing required argument 'dim'")
    a = input._data
    d = wrap_dim(dim, a.ndim) if a.ndim else 0
    if a.ndim == 0:
        res = op.ref(a.reshape(1), 0).reshape(())
        return record(op, wrap(res), (input,), {"dim": None})
    return call(op, (input,), {"dim": d})


def softmax(input: Tensor, dim=None, dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x), dim)``, computed stably."""
    return _dim_op(SOFTMAX, input, dim, dtype, "softmax")


def log_softmax(input: Tensor, dim=None, dtype=None) -> Tensor:
    """``x - logsumexp(x, dim)``, computed stably."""
    return _dim_op(LOG_SOFTMAX, input, dim, dtype, "log_softmax")


# ------------------------------------------------------------------------ var / std
def _moments_ref(fn):
    def ref(a, dims, keepdim, shape, correction, full=False):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = fn(a.astype(np.float64), axis=dims, ddof=correction, keepdims=keepdim)
        return np.asarray(r, dtype=a.dtype)
    return ref


def _centered(x: Tensor, p) -> tuple:
    n = _count(p["shape"], p["dims"])
    return x - mean(x, p["dims"], keepdim=True), float(n - p["correction"])


def _var_vjp(g, ins, out, p, n):
    d, dof = _centered(ins[0], p)
    return (_expand_back(g, p) * d * (2.0 / dof),)


def _std_vjp(g, ins, out, p, n):
    d, dof = _centered(ins[0], p)
    o = out if p["keepdim"] else out.reshape(_kept_shape(p["shape"], p["dims"]))
    return (_expand_back(g, p) * d / (o * dof),)


VAR = defop(name="var", kind=REDUCE, inputs=("a",),
            params=("dims", "keepdim", "shape", "correction"), node="VarBackward0",
            ref=_moments_ref(np.var), vjp=_var_vjp, save=(0,), samples=S.reduce_var)
STD = defop(name="std", kind=REDUCE, inputs=("a",),
            params=("dims", "keepdim", "shape", "correction"), node="StdBackward0",
            ref=_moments_ref(np.std), vjp=_std_vjp, save=(0,), save_out=True,
            samples=S.reduce_var)


def _moment(op, input, dim, correction, keepdim, unbiased, name):
    if unbiased is not None:
        correction = 1 if unbiased else 0
    if input._data.dtype.kind != "f":
        raise RuntimeError(
            f"{name}(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {input.dtype.tensor_type.replace('Tensor', '')}"
        )
    p = _reduce_params(input, dim, keepdim, name)
    p["correction"] = correction
    res = op.ref(input._data, p["dims"], p["keepdim"], p["shape"], correction)
    return record(op, wrap(res), (input,), p)


def var(input: Tensor, dim=None, *, correction: int = 1, keepdim: bool = False,
        unbiased=None) -> Tensor:
    """Variance over ``dim`` (all dims when None) with Bessel's ``correction``."""
    return _moment(VAR, input, dim, correction, keepdim, unbiased, "var")


def std(input: Tensor, dim=None, *, correction: int = 1, keepdim: bool = False,
        unbiased=None) -> Tensor:
    """Standard deviation over ``dim`` with Bessel's ``correction``."""
    return _moment(STD, input, dim, correction, keepdim, unbiased, "std")


def prod(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Product of elements (no gradient: use ``exp(sum(log))`` for a differentiable form)."""
    if input._requires_grad:
        raise NotImplementedError(
            f"prod() is not differentiable in jitgrad yet (input shape "
            f"{fmt_shape(input._data.shape)})"
        )
    a = input._data
    return wrap(np.asarray(np.prod(a, axis=None if dim is None else wrap_dim(dim, a.ndim),
                                   keepdims=keepdim)))
