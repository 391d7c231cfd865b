"""Sums and moments: sum, mean (the reductions fused loops compute), var, std (products:
:mod:`.products`)."""

from __future__ import annotations

import builtins as _b
import math

import numpy as np

from .._thread_modes import GRAD_OFF, TRACING
from ..amp.autocast_mode import autocast_op
from ..autograd import grad_mode
from ..autograd.node import make_node
from ..devices import array_namespace, row_major
from ..shapes import sum_axes_to
from ..tensor import Tensor, wrap
from . import samples as S
from .api import api
from .dispatch import record
from .eager_reduce import sum_all_small, sum_float
from .reduce_base import ALL, Exactly, call_reduce, count, expand_back, kept_shape, reduce_params
from .registry import REDUCE, defop
from .views import _reshape

__all__ = ["sum", "mean", "var", "std", "var_mean", "std_mean"]


# ---------------------------------------------------------------------------- sum / mean
def _sum_ref(a, dims, keepdim, shape, dtype=None, full=False):
    if a.dtype.kind in "biu":
        r = np.sum(a, axis=dims, keepdims=keepdim, dtype=np.int64)
    else:
        r = np.add.reduce(a, axis=dims, keepdims=keepdim)
    return array_namespace(a).asarray(r if dtype is None else r.astype(dtype))


def _sum_eager(a, dims, keepdim, shape, full=False):
    if a.dtype.kind == "f":
        return sum_float(a, dims, keepdim)
    return _sum_ref(a, dims, keepdim, shape)


def _mean_eager(a, dims, keepdim, shape, full=False):
    n = count(shape, dims)
    return sum_float(a, dims, keepdim, 1.0 / n if n else float("nan"))


SUM = defop(name="sum", kind=REDUCE, inputs=("a",), params=("dims", "keepdim", "shape"),
            node=lambda p: "SumBackward0" if p.get("full") else "SumBackward1",
            ref=_sum_ref, fwd=_sum_eager, vjp=lambda g, ins, out, p, n: (expand_back(g, p),),
            fusable_reduction=True, samples=S.reduce, complex="holomorphic")


def _mean_ref(a, dims, keepdim, shape, full=False):
    return array_namespace(a).asarray(np.mean(a, axis=dims, keepdims=keepdim))


MEAN = defop(name="mean", kind=REDUCE, inputs=("a",), params=("dims", "keepdim", "shape"),
             node=lambda p: "MeanBackward0" if p.get("full") else "MeanBackward1",
             ref=_mean_ref, fwd=_mean_eager, fusable_reduction=True, averages=True,
             vjp=lambda g, ins, out, p, n: (expand_back(g, p) / float(
                 _b.max(count(p["shape"], p["dims"]), 1)),),
             samples=S.reduce, complex="holomorphic")


def _full_sum_result(a: Tensor, res: np.ndarray) -> Tensor:
    """The tensor (and node) ``record(SUM, wrap(res), (a,), params)`` makes for a full sum
    computed by :func:`sum_all_small` (which is never used while tracing), built inline."""
    out = wrap(res)
    if a._requires_grad and (not GRAD_OFF or _STATE.enabled):
        d = a._data
        shape = d.shape
        fn = a._grad_fn
        node = make_node(_SUM_FULL_NODE, (a if fn is None else (fn, a._output_nr),), None,
                         ((shape, d.dtype),))
        node.op = SUM
        node.params = {"dims": tuple(range(len(shape))), "keepdim": False, "shape": shape,
                       "full": True}
        out._requires_grad = True
        out._grad_fn = node
    elif TRACING and grad_mode.DUAL_LEVEL[0] is not None and not _STATE.enabled:
        grad_mode.note_untracked((a,))  # (forward AD: a tangent this sum would lose)
    return out


_SUM_FULL_NODE = SUM.node_class_for({"full": True})
_STATE = grad_mode.STATE


@api(SUM, method="sum", export="sum")
@autocast_op
def sum(input: Tensor, dim=ALL, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001
    """Sum over all elements, or over ``dim`` (int or tuple)."""
    if dim is ALL and dtype is None and type(input) is Tensor:  # a loss: the hot case
        res = sum_all_small(input._data)
        if res is not None:
            return _full_sum_result(input, res)
    if dtype is not None:
        input = input.to(dtype)
    out = call_reduce(SUM, input, reduce_params(input, dim, keepdim, "sum"))
    if dtype is not None and out._data.dtype != input._data.dtype:
        out = out.to(dtype)  # an integer sum in ``dtype``: int64's, wrapped as PyTorch's
    return out


def sum_dims(input: Tensor, dims: tuple, keepdim: bool) -> Tensor:
    """``input.sum(dim=dims, keepdim=keepdim)`` for ``dims`` known to be valid (a sorted
    tuple of distinct non-negative axes, as :func:`reduce_params` makes them): the same op
    and params, without the public function's argument handling (gradient rules)."""
    return call_reduce(SUM, input, {"dims": dims, "keepdim": keepdim,
                                    "shape": input._data.shape, "full": False})


def sum_to(g: Tensor, shape) -> Tensor:
    """``g`` summed to ``shape``, a shape it broadcasts from (an input's, for its gradient):
    a sum over the broadcast dims with ``keepdim``, then a reshape dropping the leading
    ones. The ops ``g.sum(dim=..., keepdim=True).reshape(shape)`` records."""
    axes, reshape = sum_axes_to(g._data.shape, shape)
    r = sum_dims(g, axes, True) if axes else g
    return _reshape(r, tuple(shape), "ViewBackward0") if reshape else r


@api(MEAN, method="mean", export="mean")
def mean(input: Tensor, dim=ALL, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Arithmetic mean over all elements, or over ``dim``."""
    if dtype is not None:
        input = input.to(dtype)
    if input._data.dtype.kind not in "fc":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {input.dtype.tensor_type.replace('Tensor', '')}"
        )
    return call_reduce(MEAN, input, reduce_params(input, dim, keepdim, "mean"))


# ----------------------------------------------------------------------------- var, std
def _moments_ref(fn):
    def ref(a, dims, keepdim, shape, correction, full=False):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = fn(a.astype(np.float64), axis=dims, ddof=correction, keepdims=keepdim)
        return array_namespace(a).asarray(r, dtype=a.dtype)
    return ref


def _centered(x: Tensor, p) -> tuple:
    n = count(p["shape"], p["dims"])
    return x - mean(x, Exactly(p["dims"]), keepdim=True), float(n - p["correction"])


def _var_vjp(g, ins, out, p, n):
    d, dof = _centered(ins[0], p)
    # no degrees of freedom (a batch of one): PyTorch's IEEE 2 / 0 = inf, so the gradient
    # is NaN where d is 0 and infinite elsewhere, not an error
    return (expand_back(g, p) * d * (2.0 / dof if dof else math.inf),)


def _std_vjp(g, ins, out, p, n):
    d, dof = _centered(ins[0], p)
    o = out if p["keepdim"] else out.reshape(kept_shape(p["shape"], p["dims"]))
    from .selection import where

    o = where(o == 0, 1.0, o)  # a constant slice (std 0): gradient 0, as PyTorch's
    return (expand_back(g, p) * d / (o * dof),)


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
    if input._data.dtype.kind == "c":  # the parts' variances add (a real result)
        from .complex_functions import imag, real

        v = var(real(input), dim, correction=correction, keepdim=keepdim) + \
            var(imag(input), dim, correction=correction, keepdim=keepdim)
        return v if op is VAR else v.sqrt()
    _check_moment_dtype(input, "std and var")
    p = reduce_params(input, dim, keepdim, name)
    p["correction"] = correction
    res = row_major(op.ref(input._data, p["dims"], p["keepdim"], p["shape"], correction))
    return record(op, wrap(res), (input,), p)


@api(VAR, method="var", export="var")
def var(input: Tensor, dim=None, *, correction: int = 1, keepdim: bool = False,
        unbiased=None) -> Tensor:
    """Variance over ``dim`` (all dims when None) with Bessel's ``correction``."""
    return _moment(VAR, input, dim, correction, keepdim, unbiased, "var")


def _check_moment_dtype(input: Tensor, name: str) -> None:
    """PyTorch's error for the variance of an integer or bool tensor."""
    if input._data.dtype.kind not in "fc":
        raise RuntimeError(f"{name} only support floating point and complex dtypes")


@api(VAR, MEAN, export="var_mean")
def var_mean(input: Tensor, dim=None, *, correction: int = 1, keepdim: bool = False,
             unbiased=None) -> tuple[Tensor, Tensor]:
    """``(var(input, dim), mean(input, dim))``, the variance with Bessel's ``correction``."""
    _check_moment_dtype(input, "var_mean")
    return (var(input, dim, correction=correction, keepdim=keepdim, unbiased=unbiased),
            _mean_over(input, dim, keepdim))


@api(STD, MEAN, export="std_mean")
def std_mean(input: Tensor, dim=None, *, correction: int = 1, keepdim: bool = False,
             unbiased=None) -> tuple[Tensor, Tensor]:
    """``(std(input, dim), mean(input, dim))``, the deviation with Bessel's ``correction``."""
    _check_moment_dtype(input, "std_mean")
    return (std(input, dim, correction=correction, keepdim=keepdim, unbiased=unbiased),
            _mean_over(input, dim, keepdim))


def _mean_over(input: Tensor, dim, keepdim: bool) -> Tensor:
    """``mean`` over ``dim`` as ``var``/``std`` take it (None: every dim)."""
    if dim is None:
        return mean(input, tuple(range(input._data.ndim)), keepdim=True) if keepdim \
            else mean(input)
    return mean(input, dim, keepdim=keepdim)


@api(STD, method="std", export="std")
def std(input: Tensor, dim=None, *, correction: int = 1, keepdim: bool = False,
        unbiased=None) -> Tensor:
    """Standard deviation over ``dim`` with Bessel's ``correction``."""
    return _moment(STD, input, dim, correction, keepdim, unbiased, "std")
