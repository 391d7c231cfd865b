"""Extrema: max and min (whole tensor, or values and indices along a dim), amax, amin,
argmax, argmin."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..devices import array_namespace
from ..shapes import wrap_dim
from ..tensor import Tensor, wrap
from . import samples as S
from .api import api
from .dispatch import call, record
from .reduce_base import ALL, Exactly, call_reduce, expand_back, kept_shape, reduce_params
from .registry import REDUCE, defop
from .selection import MAXIMUM, MINIMUM, eq, maximum, minimum, where

__all__ = ["max", "min", "amax", "amin", "argmax", "argmin", "return_max", "return_min"]


def _return_type(name):
    cls = namedtuple(name, ["values", "indices"])
    cls.__repr__ = lambda self: (f"jitgrad.return_types.{name}(values={self.values!r}, "
                                 f"indices={self.indices!r})")
    return cls


return_max = _return_type("max")  # PyTorch's torch.return_types.max
return_min = _return_type("min")


# --------------------------------------------------------------------------- amax / amin
def _evenly(g: Tensor, a: Tensor, out: Tensor, p) -> Tensor:
    """Gradient of amax/amin, PyTorch's two rules.

    ``max()``/``min()`` of the whole tensor (``MaxBackward1``, PyTorch's
    ``evenly_distribute_backward``): the gradient split evenly between the elements equal to
    the result, NaN counting as equal to a NaN result. ``amax``/``amin`` (``AmaxBackward0``,
    ``scale_grad_by_count``): ``g / count * mask`` with ``mask = (a == result)``, so a
    reduced row whose result is NaN has no equal element and gets NaN everywhere."""
    shape, dims = p["shape"], p["dims"]
    o = out if p["keepdim"] else out.reshape(kept_shape(shape, dims))
    mask = a == o
    if p.get("full"):
        mask = mask | ((a != a) & (o != o))
        cnt = mask.sum(dim=Exactly(dims), keepdim=True).to(g.dtype)
        return where(mask, expand_back(g, p) / cnt, 0.0)
    cnt = mask.sum(dim=Exactly(dims), keepdim=True).to(g.dtype)
    return (expand_back(g, p) / cnt) * mask.to(g.dtype)


def _extreme_ref(fn):
    def ref(a, dims, keepdim, shape, full=False):
        if a.size == 0 and (not a.ndim or any(shape[d] == 0 for d in dims)):
            raise RuntimeError(
                "max(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                "the reduction dim with the 'dim' argument."
            )
        return array_namespace(a).asarray(fn(a, axis=dims, keepdims=keepdim))
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


# ----------------------------------------------------------------------- argmax / argmin
def _arg_ref(fn):
    def ref(a, dim, keepdim):
        xp = array_namespace(a)
        if a.ndim == 0:
            return xp.zeros((), np.int64)
        if dim is None:
            r = fn(a)
            return xp.asarray(r, np.int64).reshape((1,) * a.ndim if keepdim else ())
        return xp.asarray(fn(a, axis=dim, keepdims=keepdim), dtype=np.int64)
    return ref


ARGMAX = defop(name="argmax", kind=REDUCE, inputs=("a",), params=("dim", "keepdim"),
               node=None, ref=_arg_ref(np.argmax), samples=S.arg_reduce)
ARGMIN = defop(name="argmin", kind=REDUCE, inputs=("a",), params=("dim", "keepdim"),
               node=None, ref=_arg_ref(np.argmin), samples=S.arg_reduce)


def _check_not_empty(input: Tensor, d, fn: str) -> None:
    """PyTorch's errors for an index reduction over no elements."""
    shape = input._data.shape
    if d is None and input._data.size == 0:
        raise IndexError(f"{fn}(): Expected reduction dim to be specified for "
                         f"input.numel() == 0.")
    if d is not None and shape and shape[d] == 0:
        raise IndexError(f"{fn}(): Expected reduction dim {d} to have non-zero size.")


@api(ARGMAX, method="argmax", export="argmax")
def argmax(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the largest element (flattened when ``dim`` is None); first on ties."""
    d = None if dim is None else wrap_dim(dim, input._data.ndim)
    _check_not_empty(input, d, "argmax")
    return call(ARGMAX, (input,), {"dim": d, "keepdim": bool(keepdim)})


@api(ARGMIN, method="argmin", export="argmin")
def argmin(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the smallest element (flattened when ``dim`` is None); first on ties."""
    d = None if dim is None else wrap_dim(dim, input._data.ndim)
    _check_not_empty(input, d, "argmin")
    return call(ARGMIN, (input,), {"dim": d, "keepdim": bool(keepdim)})


# ----------------------------------------------------------------- max / min along a dim
def _select_grad(g: Tensor, p) -> Tensor:
    """Gradient of max/min along ``dim``: to the returned index only (a one-hot mask built
    with ops from the indices tensor, so a compiled backward recomputes it every call)."""
    from ..creation import const_tensor

    dim, shape = p["dim"], p["shape"]
    if not shape:  # 0-d input: the value is the input
        return g
    idx = p["indices"]  # int64, keepdim=True layout
    ar = const_tensor(array_namespace(g._data).arange(shape[dim]).reshape(
        tuple(shape[dim] if i == dim else 1 for i in range(len(shape)))))  # (on g's device:
    # no host array copied over)
    gk = g if p["keepdim"] else g.unsqueeze(dim)
    return where(eq(ar, idx), gk.expand(shape), 0.0)


def _dim_ref(fn):
    def ref(a, dim, keepdim, shape, indices=None):
        return array_namespace(a).asarray(fn(a, axis=dim, keepdims=keepdim))
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
        p = reduce_params(input, ALL, False, name)
        return call_reduce(op_full, input, p)
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
    out = record(op_dim, wrap(array_namespace(a).array(values, order="C")), (input,), p)
    if not keepdim and a.ndim:
        idx = idx.squeeze(d)
    return rtype(out, idx)


@api(AMAX, MAX_DIM, ARGMAX, MAXIMUM, method="max", export="max")
def max(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A001 - PyTorch's name
    """Largest element; with ``dim``: ``(values, indices)`` along ``dim``. With a tensor as
    second argument: element-wise maximum."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    return _extreme(AMAX, MAX_DIM, np.argmax, input, dim, keepdim, "max")


@api(AMIN, MIN_DIM, ARGMIN, MINIMUM, method="min", export="min")
def min(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A001 - PyTorch's name
    """Smallest element; with ``dim``: ``(values, indices)`` along ``dim``."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    return _extreme(AMIN, MIN_DIM, np.argmin, input, dim, keepdim, "min")


@api(AMAX, method="amax", export="amax")
def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Maximum over ``dim`` (all dims when empty); ties share the gradient."""
    return call_reduce(AMAX, input, _amax_params(input, dim, keepdim, "amax"))


def _amax_params(input: Tensor, dim, keepdim: bool, name: str) -> dict:
    """amax/amin params; an empty reduced dim is PyTorch's IndexError (an empty tensor
    reduced over non-empty dims gives an empty result)."""
    p = reduce_params(input, dim if dim != () else None, keepdim, name)
    p["full"] = False
    shape = input._data.shape
    if dim == () and input._data.size == 0:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                           f"input.numel() == 0. Specify the reduction dim with the 'dim' "
                           f"argument.")
    for d in p["dims"]:
        if shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    return p


@api(AMIN, method="amin", export="amin")
def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Minimum over ``dim`` (all dims when empty); ties share the gradient."""
    return call_reduce(AMIN, input, _amax_params(input, dim, keepdim, "amin"))
