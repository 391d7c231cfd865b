"""``scatter_reduce``: ``src`` reduced into ``input`` at index positions, by ``sum``,
``prod``, ``mean``, ``amax`` or ``amin`` (``include_self``: ``input``'s value takes part;
else a position written to starts from the reduction's identity).

An op on the host's ``ufunc.at`` (each position reduced in the elements' order, as PyTorch's
CPU kernel; a GPU array goes through the host). Its VJP is PyTorch's
``scatter_reduce_backward``, written with jitgrad ops: ``sum``/``mean`` pass (divided by the
count), ``amax``/``amin`` share the gradient equally among the elements equal to the result,
``prod`` divides the product by each factor (zeros handled as PyTorch: a single zero gets
the product of the others).
"""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace, first_outside, to_host
from ..shapes import wrap_dim
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .registry import OPAQUE, defop
from .scattering import _checked, _kind, _src_for

__all__ = ["scatter_reduce", "index_reduce"]

_REDUCES = ("sum", "prod", "mean", "amax", "amin")
_UFUNC = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
          "amin": np.minimum}


def _identity(reduce: str, dt: np.dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dt.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dt)
    return info.min if reduce == "amax" else info.max


def _positions(index: np.ndarray, dim: int) -> tuple:
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(grid)


def _scatter_reduce_ref(a, index, src, dim, reduce, include_self):
    xp = array_namespace(a)
    host, idx, s = np.array(to_host(a)), np.asarray(to_host(index)), np.asarray(to_host(src))
    pos = _positions(idx, dim)
    touched = np.zeros(host.shape, dtype=bool)
    touched[pos] = True
    if not include_self:
        host[touched] = _identity(reduce, host.dtype)
    _UFUNC[reduce].at(host, pos, s.astype(host.dtype, copy=False))
    if reduce == "mean":
        count = np.full(host.shape, 1 if include_self else 0, dtype=np.int64)
        np.add.at(count, pos, 1)
        count = np.maximum(count, 1)
        host = host / count if host.dtype.kind == "f" else host // count
    return xp.asarray(host.astype(a.dtype, copy=False))


def _scatter_reduce_vjp(g, ins, out, p, n):
    from ..creation import ones_like, zeros_like
    from .selection import where

    self_, index, src = ins
    d, reduce, include_self = p["dim"], p["reduce"], p["include_self"]
    gsrc = None
    if reduce == "sum":
        gself, gsrc = g, g.gather(d, index)
    elif reduce == "mean":
        count = (ones_like(g) if include_self else zeros_like(g)).scatter_add(
            d, index, ones_like(src))
        count = where(count == 0, 1.0, count)
        gself = g / count
        gsrc = g.gather(d, index) / count.gather(d, index)
    elif reduce in ("amax", "amin"):
        value = out.gather(d, index)
        self_is = (self_ == out).to(g.dtype)
        src_is = (src == value).to(g.dtype)
        share = g / self_is.scatter_add(d, index, src_is)
        gself = self_is * share
        gsrc = src_is * share.gather(d, index)
    else:  # prod
        masked_self = where(self_ == 0, 1.0, self_)
        masked_self_result = call(SCATTER_REDUCE, (masked_self, index, src), p)
        gself = g * masked_self_result / masked_self
        src_zero = src == 0
        zeros = zeros_like(self_).scatter_add(d, index, src_zero.to(g.dtype)).gather(d, index)
        single = src_zero & (zeros == 1)
        masked_src = where(single, 1.0, src)
        masked_src_result = call(SCATTER_REDUCE, (self_, index, masked_src), p)
        gsrc = where(single, (g * masked_src_result).gather(d, index),
                     (g * out).gather(d, index) / where(src_zero, 1.0, src))
    if not include_self:
        touched = zeros_like(g).scatter_add(d, index, ones_like(src)) > 0
        gself = where(touched, 0.0, gself)
    return (gself if n[0] else None, None, gsrc if n[2] else None)


SCATTER_REDUCE = defop(name="scatter_reduce", kind=OPAQUE, inputs=("a", "index", "src"),
                       params=("dim", "reduce", "include_self"),
                       node="ScatterReduceBackward0", ref=_scatter_reduce_ref,
                       vjp=_scatter_reduce_vjp, save=(0, 1, 2), save_out=True,
                       cast_grads=True, samples=S.scatter_reduce)


@api(SCATTER_REDUCE, method="scatter_reduce", export="scatter_reduce")
def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """``input`` with ``src`` reduced in at ``index`` along ``dim`` (see the module doc)."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    input = as_tensor_arg(input)
    if input.dim() == 0:  # as a 1-element vector (the kernels index a dim)
        index, src = as_tensor_arg(index, "index"), as_tensor_arg(src, "src")
        return scatter_reduce(input.reshape(1), 0, index.reshape(-1), src.reshape(-1), reduce,
                              include_self=include_self).reshape(())
    index, d = _checked(input, dim, index, "scatter_reduce")
    src = _src_for(as_tensor_arg(src, "src"), index)
    if src.dtype != input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    return call(SCATTER_REDUCE, (input, index, src), {"dim": d, "reduce": reduce,
                                                      "include_self": bool(include_self)})


@api(SCATTER_REDUCE, method="scatter_reduce_")
def scatter_reduce_(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    """In-place :func:`scatter_reduce`."""
    from .inplace import apply_inplace

    return apply_inplace(input, scatter_reduce(input, dim, index, src, reduce,
                                               include_self=include_self))


_INDEX_REDUCES = ("prod", "mean", "amax", "amin")


@api(SCATTER_REDUCE, method="index_reduce", export="index_reduce")
def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """``input`` with ``source``'s slices ``i`` along ``dim`` reduced into its slices
    ``index[i]`` by ``prod``, ``mean``, ``amax`` or ``amin`` (:func:`scatter_reduce` with
    ``index`` spread over ``source``'s shape; differentiable the same way)."""
    if reduce not in _INDEX_REDUCES:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    input, index = as_tensor_arg(input), as_tensor_arg(index, "index")
    source = as_tensor_arg(source, "source")
    if index.dim() > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, but got dim: "
                         f"{index.dim()} with type: {_kind(index)} and size: "
                         f"{list(index.shape)}")
    if index.dtype.name not in ("int64", "int32"):
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                           f"{_kind(index)}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"index_reduce_(): self ({_kind(input)}) and source ({_kind(source)}) "
                           f"must have the same scalar type")
    d = wrap_dim(dim, max(input.dim(), 1))
    if source.dim() != input.dim() or any(a != b for k, (a, b) in enumerate(
            zip(source.shape, input.shape)) if k != d):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(input.shape)} "
                           f"source.shape = {list(source.shape)}")
    count = source.shape[d] if source.dim() else 1
    if index.numel() != count:
        raise RuntimeError(f"index_reduce_(): Number of indices ({index.numel()}) should be "
                           f"equal to source.size(dim): ({count}), for dim: {d}")
    size = input.shape[d] if input.dim() else 1
    if first_outside(index._data, 0, size) is not None:
        raise IndexError("index out of range in self")
    src = source if source.dim() else source.reshape(1)
    lead = [1] * src.dim()
    lead[d] = index.numel()
    spread = index.reshape(lead).expand(*src.shape).to(dtype=_int64())
    base = input if input.dim() else input.reshape(1)
    out = scatter_reduce(base, d, spread, src, reduce, include_self=include_self)
    return out if input.dim() else out.reshape(())


@api(SCATTER_REDUCE, method="index_reduce_")
def index_reduce_(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                  include_self: bool = True) -> Tensor:
    """In-place :func:`index_reduce`."""
    from .inplace import apply_inplace

    return apply_inplace(input, index_reduce(input, dim, index, source, reduce,
                                             include_self=include_self))


def _int64():
    from .. import dtypes

    return dtypes.int64
