"""Sorting and selecting by value: ``sort``, ``argsort``, ``msort``, ``topk``, ``kthvalue``,
and ``gather`` (what their values are made with).

Each is two ops, as ``max(dim)`` is: the order (``sort_indices``: int64 positions along a dim,
no gradient) and the values picked at those positions (``gather``, whose node is named after
the public function: ``TopkBackward0``, ``SortBackward0``, ``KthvalueBackward0``,
``GatherBackward0``). The gradient scatters into the picked positions
(``gather_backward``), so a compiled plan recomputes the positions from its inputs.

Orders are PyTorch's: NaN is larger than every number, and equal values keep their
positions' order (a stable sort), ascending or descending.
"""

from __future__ import annotations

import numpy as np

from ..devices import add_at, array_namespace, first_outside
from ..shapes import fmt_shape, wrap_dim
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .extrema import _return_type
from .registry import OPAQUE, defop

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "gather", "gather_backward",
           "return_sort", "return_topk", "return_kthvalue"]


return_sort = _return_type("sort")  # PyTorch's torch.return_types.sort
return_topk = _return_type("topk")
return_kthvalue = _return_type("kthvalue")


# ------------------------------------------------------------------------------ orders
def _stable_order(a: np.ndarray, dim: int, descending: bool) -> np.ndarray:
    """Positions sorting ``a`` along ``dim``: stable, NaN largest (last ascending, first
    descending)."""
    if not descending:
        return np.argsort(a, axis=dim, kind="stable")  # NumPy puts NaN last
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        idx = np.argsort(np.where(nan, -np.inf, -a), axis=dim, kind="stable")
        # a second stable pass puts the NaNs (tied with +inf above) first
        first = np.argsort(~np.take_along_axis(nan, idx, axis=dim), axis=dim, kind="stable")
        return np.take_along_axis(idx, first, axis=dim)
    return np.argsort(~a, axis=dim, kind="stable")  # ~ reverses the order of ints and bools


def _sort_indices_ref(a, dim, descending, k=None, kth=None):
    xp = array_namespace(a)
    if a.ndim == 0:
        return xp.zeros((), np.int64)
    order = _stable_order(a, dim, descending).astype(np.int64, copy=False)
    if kth is not None:  # kthvalue: the k-th smallest, the dim kept
        order = np.take(order, [kth - 1], axis=dim)
    elif k is not None:
        order = np.take(order, xp.arange(k), axis=dim)
    return xp.ascontiguousarray(order)


SORT_INDICES = defop(name="sort_indices", kind=OPAQUE, node=None, inputs=("a",),
                     params=("dim", "descending", "k", "kth"), ref=_sort_indices_ref,
                     samples=S.sort_indices,
                     doc="int64 positions ordering ``a`` along ``dim`` (the first ``k``, or "
                         "the ``kth`` alone); no gradient")


# ------------------------------------------------------------------------------ gather
def _box(index: np.ndarray, dim: int, shape) -> tuple:
    """``a[box]``: the part of an input of ``shape`` that ``index`` covers outside ``dim``."""
    return tuple(slice(None) if d == dim else slice(0, index.shape[d]) for d in range(len(shape)))


def _gather_ref(a, index, dim, shape=None, node="GatherBackward0", keepdim=True):
    if node == "GatherBackward0":  # a user's positions (sort/topk/kthvalue make their own)
        _check_positions(index, a.shape[dim] if a.ndim else 1, dim)
    if a.ndim == 0:
        return a.copy()
    r = np.take_along_axis(a[_box(index, dim, a.shape)], index, axis=dim)
    return r if keepdim else np.squeeze(r, axis=dim)  # kthvalue: one position, dim dropped


def _check_positions(index, n: int, dim: int) -> None:
    """PyTorch's error for a position outside ``[0, n)`` along ``dim``, checked where the op
    runs (eager calls and compiled plans alike: :func:`jitgrad.devices.first_outside`)."""
    v = first_outside(index, 0, n)
    if v is not None:
        raise RuntimeError(f"index {v} is out of bounds for dimension {dim} with size {n}")


def _gather_vjp(g, ins, out, p, n):
    if not p["keepdim"]:
        g = g.unsqueeze(p["dim"])
    unique = p["node"] != "GatherBackward0"
    return gather_backward(g, ins[1], p["dim"], p["shape"], unique), None


def _gather_backward_ref(g, index, dim, shape, unique=False):
    xp = array_namespace(g)
    out = xp.zeros(shape, dtype=g.dtype)
    if not shape:
        out[...] = g
        return out
    nd = index.ndim  # np.indices(index.shape, sparse=True), on g's device
    idx = [xp.arange(s).reshape((1,) * d + (s,) + (1,) * (nd - d - 1))
           for d, s in enumerate(index.shape)]
    idx[dim] = index
    if unique:  # positions picked once (sort, topk, kthvalue): a plain scatter
        out[tuple(idx)] = g
    else:
        add_at(out, tuple(idx), g)
    return out


GATHER = defop(name="gather", kind=OPAQUE, node=lambda p: p["node"],
               inputs=("a", "index"), params=("dim", "shape", "node", "keepdim"),
               ref=_gather_ref, vjp=_gather_vjp, save=(1,), cast_grads=True, samples=S.gather,
               complex="holomorphic")
GATHER_BACKWARD = defop(
    name="gather_backward", kind=OPAQUE,
    node=lambda p: "ScatterBackward0" if p["unique"] else "ScatterAddBackward0",
    inputs=("g", "index"), params=("dim", "shape", "unique"), ref=_gather_backward_ref,
    vjp=lambda gg, ins, out, p, n: (gather(gg, p["dim"], ins[1]) if n[0] else None, None),
    save=(1,), cast_grads=True, samples=S.gather_backward,
    complex="holomorphic")


def _check_index(input: Tensor, dim: int, index: Tensor, name: str) -> None:
    a, ix = input._data, index._data
    if ix.dtype.kind not in "iu":
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")
    if ix.ndim != a.ndim and not (ix.ndim <= 1 and a.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input "
                           "tensor")
    for d in range(ix.ndim):
        if d != dim and ix.shape[d] > a.shape[d]:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index {fmt_shape(ix.shape)} to "
                f"be no larger than self {fmt_shape(a.shape)} apart from dimension {dim}")


@api(GATHER, method="gather", export="gather")
def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """``out[i][j] = input[index[i][j]][j]`` (for ``dim=0``; likewise for any dim): the
    values of ``input`` at positions ``index`` along ``dim``. ``index`` has ``input``'s
    number of dims and is no larger outside ``dim``; the gradient is added back at the
    positions (``scatter_add``).

    >>> import jitgrad
    >>> jitgrad.gather(jitgrad.tensor([[1., 2.], [3., 4.]]), 1, jitgrad.tensor([[0, 0], [1, 0]]))
    tensor([[1., 1.],
            [4., 3.]])
    """
    input = as_tensor_arg(input, "input")
    index = as_tensor_arg(index, "index")
    d = wrap_dim(dim, max(input._data.ndim, 1))
    _check_index(input, d, index, "gather")
    if input._data.ndim == 0 or index._data.ndim == 0:
        if index._data.ndim < input._data.ndim:
            index = index.reshape(input._data.shape)
        elif input._data.ndim < index._data.ndim:
            input = input.reshape(index._data.shape)
    return _pick(input, index, d, "GatherBackward0")


@api(GATHER_BACKWARD)
def gather_backward(grad: Tensor, index: Tensor, dim: int, shape, unique: bool = False
                    ) -> Tensor:
    """The gradient of ``gather``: ``grad`` added (``unique``: written) into zeros of
    ``shape`` at positions ``index`` along ``dim``."""
    return call(GATHER_BACKWARD, (grad, index),
                {"dim": dim, "shape": tuple(shape), "unique": bool(unique)})


# -------------------------------------------------------------- sort, topk, kthvalue
def _pick(input: Tensor, indices: Tensor, dim: int, node: str, keepdim: bool = True
          ) -> Tensor:
    return call(GATHER, (input, indices), {"dim": dim, "shape": input._data.shape,
                                           "node": node, "keepdim": bool(keepdim)})


def _order(input: Tensor, dim: int, descending: bool, k=None, kth=None) -> Tensor:
    return call(SORT_INDICES, (input,), {"dim": dim, "descending": bool(descending), "k": k,
                                         "kth": kth})


def _int_arg(v, fn: str, name: str, pos: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be int, not "
                        f"{type(v).__name__}")
    return int(v)


def _selection_args(input, k, dim: int, fn: str) -> tuple:
    """``(input, k, dim, size of dim)`` for topk/kthvalue, checked as PyTorch checks them."""
    input = as_tensor_arg(input, "input")
    k = _int_arg(k, fn, "k", 1)
    a = input._data
    d = wrap_dim(dim, max(a.ndim, 1))
    if a.dtype == np.bool_:
        raise RuntimeError(f"{fn} does not support bool dtypes on CPU")
    return input, k, d, (a.shape[d] if a.ndim else 1)


@api(GATHER, SORT_INDICES, method="sort", export="sort")
def sort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False):
    """``(values, indices)`` of ``input`` sorted along ``dim``, ascending (or
    ``descending``); NaN counts as the largest value, equal values keep their order (the
    sort is always stable). The gradient goes back to the sorted positions.

    >>> import jitgrad
    >>> jitgrad.tensor([3., 1., 2.]).sort(descending=True)
    jitgrad.return_types.sort(values=tensor([3., 2., 1.]), indices=tensor([0, 2, 1]))
    """
    input = as_tensor_arg(input, "input")
    d = wrap_dim(dim, max(input._data.ndim, 1))
    idx = _order(input, d, descending)
    return return_sort(_pick(input, idx, d, "SortBackward0"), idx)


@api(SORT_INDICES, method="argsort", export="argsort")
def argsort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False
            ) -> Tensor:
    """The int64 positions that sort ``input`` along ``dim`` (``sort(...).indices``)."""
    input = as_tensor_arg(input, "input")
    return _order(input, wrap_dim(dim, max(input._data.ndim, 1)), descending)


@api(GATHER, SORT_INDICES, method="msort", export="msort")
def msort(input: Tensor) -> Tensor:
    """``input`` sorted along its first dim (``sort(input, dim=0).values``)."""
    return sort(input, dim=0).values


@api(GATHER, SORT_INDICES, method="topk", export="topk")
def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
         ):  # noqa: A002 - PyTorch's parameter name
    """``(values, indices)`` of the ``k`` largest (``largest=False``: smallest) elements of
    ``input`` along ``dim``, in order (``sorted=False`` gives the same order); NaN counts
    as the largest value, ties go to the earlier position. The gradient goes back to the
    chosen positions (``TopkBackward0``).

    >>> import jitgrad
    >>> jitgrad.topk(jitgrad.tensor([1., 5., 3., 4.]), 2)
    jitgrad.return_types.topk(values=tensor([5., 4.]), indices=tensor([1, 3]))
    """
    input, k, d, n = _selection_args(input, k, dim, "topk")
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    # a 0-d input gives the element itself, for k = 0 too (PyTorch)
    idx = _order(input, d, largest, k=k if input._data.ndim else None)
    return return_topk(_pick(input, idx, d, "TopkBackward0"), idx)


@api(GATHER, SORT_INDICES, method="kthvalue", export="kthvalue")
def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """``(values, indices)`` of the ``k``-th smallest element (``k`` from 1) of ``input``
    along ``dim``, which is removed unless ``keepdim``; NaN counts as the largest value.

    >>> import jitgrad
    >>> jitgrad.tensor([3., 1., 2.]).kthvalue(2)
    jitgrad.return_types.kthvalue(values=tensor(2.), indices=tensor(2))
    """
    input, k, d, n = _selection_args(input, k, dim, "kthvalue")
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if not input._data.ndim:
        idx = _order(input, d, False)
        return return_kthvalue(_pick(input, idx, d, "KthvalueBackward0"), idx)
    idx = _order(input, d, False, kth=k)
    drop = not keepdim
    values = _pick(input, idx, d, "KthvalueBackward0", keepdim=not drop)
    return return_kthvalue(values, idx.squeeze(d) if drop else idx)
