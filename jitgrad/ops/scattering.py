"""Writing values at index positions: ``scatter_add`` / ``index_add`` (added, repeated
positions accumulate; the gather's gradient op, so a deterministic scatter-add on every
device) and ``scatter`` (written: ``x[positions] = src``, the index_put op), each with its
in-place form. Gradients: the input's passes (``scatter``: except where written), ``src``'s
is the gathered output gradient."""

from __future__ import annotations

import numpy as np

from ..amp.autocast_mode import autocast_op
from ..shapes import wrap_dim
from ..tensor import Tensor
from .api import api
from .dispatch import as_tensor_arg
from .indexing import GETITEM
from .inplace import INDEX_PUT, apply_inplace
from .sorting import GATHER_BACKWARD, _check_index, _check_positions, gather_backward

__all__ = ["scatter_add", "index_add", "scatter"]


def _src_for(src: Tensor, index: Tensor) -> Tensor:
    """``src`` cut to ``index``'s shape (PyTorch reads only that corner of it)."""
    if tuple(src.shape) == tuple(index.shape):
        return src
    if src.dim() != index.dim():
        raise RuntimeError("Index tensor must have the same number of dimensions as src "
                           "tensor")
    for d, (s, i) in enumerate(zip(src.shape, index.shape)):
        if i > s:
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(index.shape)} to be no larger than src "
                               f"{list(src.shape)}")
    return src[tuple(slice(0, i) for i in index.shape)]


def _checked(input: Tensor, dim: int, index: Tensor, name: str) -> tuple[Tensor, int]:
    input, index = as_tensor_arg(input, "input"), as_tensor_arg(index, "index")
    d = wrap_dim(dim, max(input.dim(), 1))
    _check_index(input, d, index, name)
    n = input.shape[d] if input.dim() else 1
    _check_positions(index._data, n, d)
    return index, d


@api(GATHER_BACKWARD, method="scatter_add", export="scatter_add")
@autocast_op
def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``input`` with ``src[i][j]`` added at ``[index[i][j]][j]`` (for ``dim=0``; likewise for
    any dim); repeated positions accumulate, in a fixed order."""
    index, d = _checked(input, dim, index, "scatter_add")
    src = as_tensor_arg(src, "src")
    _same_dtype(input, src)
    src = _src_for(src, index)
    return input + gather_backward(src, index, d, tuple(input.shape))


@api(GATHER_BACKWARD, method="scatter_add_")
def scatter_add_(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """In-place :func:`scatter_add`."""
    return apply_inplace(input, scatter_add(input, dim, index, src))


@api(GATHER_BACKWARD, method="index_add", export="index_add")
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *,
              alpha: float = 1) -> Tensor:
    """``input`` with ``alpha * source`` added at positions ``index`` (a vector) along
    ``dim``: ``out[index[i]] += alpha * source[i]`` (for ``dim=0``)."""
    input, index = as_tensor_arg(input, "input"), as_tensor_arg(index, "index")
    source = as_tensor_arg(source, "source")
    d = wrap_dim(dim, max(input.dim(), 1))
    if index.dim() > 1:
        raise IndexError("index_add_(): Index is supposed to be a vector")
    if source.dtype != input.dtype:
        raise RuntimeError(f"index_add_(): self ({_kind(input)}) and source ({_kind(source)}) "
                           f"must have the same scalar type")
    if index._data.dtype not in (np.int32, np.int64):
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{_kind(index)}")
    if source.dim() and index.numel() != source.shape[d]:
        raise RuntimeError(f"index_add_(): Number of indices ({index.numel()}) should be equal "
                           f"to source.size(dim): ({source.shape[d]}), for dim: {d}")
    want = list(input.shape)
    if input.dim():
        want[d] = index.numel()
    if list(source.shape) != want and not (input.dim() <= 1 and source.numel() == index.numel()):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(input.shape)} "
                           f"source.shape = {list(source.shape)}")
    shape = [1] * max(source.dim(), 1)
    shape[d] = index.numel()
    full = index.reshape(*shape).expand(*source.shape) if source.dim() else index.reshape(())
    return scatter_add(input, d, full, source * alpha if alpha != 1 else source)


@api(GATHER_BACKWARD, method="index_add_")
def index_add_(input: Tensor, dim: int, index: Tensor, source: Tensor, *,
               alpha: float = 1) -> Tensor:
    """In-place :func:`index_add`."""
    return apply_inplace(input, index_add(input, dim, index, source, alpha=alpha))


def _kind(t: Tensor) -> str:
    return t.dtype.tensor_type[:-len("Tensor")]


def _same_dtype(input: Tensor, src: Tensor) -> None:
    if src.dtype != input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")


def _positions(index: Tensor, dim: int) -> tuple:
    """The advanced index ``(i0, ..., index, ..., ik)`` of ``scatter``'s destinations."""
    from ..creation import const_tensor
    from ..devices import array_module

    xp = array_module(index.device)
    nd = index.dim()
    out = []
    for d, s in enumerate(index.shape):
        if d == dim:
            out.append(index)
        else:
            out.append(const_tensor(xp.arange(s).reshape((1,) * d + (s,) + (1,) * (nd - d - 1))))
    return tuple(out)


@api(GETITEM, INDEX_PUT, method="scatter", export="scatter")
def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None,
            reduce: str | None = None) -> Tensor:
    """``input`` with ``src[i][j]`` (or the number ``value``) written at
    ``[index[i][j]][j]`` (for ``dim=0``; likewise for any dim); ``reduce="add"`` adds
    instead (:func:`scatter_add`), ``reduce="multiply"`` multiplies (``scatter_reduce``'s
    ``"prod"`` with the input's values). Which of two writes to one position wins is unspecified,
    as in PyTorch."""
    if src is None and value is None:
        raise TypeError("scatter() missing 1 required positional argument: 'src' or 'value'")
    input = as_tensor_arg(input, "input")
    if isinstance(src, Tensor):
        _same_dtype(input, src)
    if reduce in ("add", "multiply"):
        v = value if src is None else src
        if not isinstance(v, Tensor):
            v = input.new_full(tuple(as_tensor_arg(index).shape), v)
        if reduce == "add":
            return scatter_add(input, dim, index, v)
        return input.scatter_reduce(dim, index, v, "prod", include_self=True)
    if reduce is not None:
        raise RuntimeError("reduce argument must be either add or multiply.")
    index, d = _checked(input, dim, index, "scatter")
    out = input.clone()
    if not index.numel():
        return out
    v = value if src is None else src
    if isinstance(v, Tensor):
        v = _src_for(v, index)
    if input.dim() == 0:
        out[()] = v if not isinstance(v, Tensor) else v.reshape(())
        return out
    out[_positions(index, d)] = v
    return out


@api(GETITEM, INDEX_PUT, method="scatter_")
def scatter_(input: Tensor, dim: int, index: Tensor, src=None, *, value=None,
             reduce: str | None = None) -> Tensor:
    """In-place :func:`scatter`."""
    return apply_inplace(input, scatter(input, dim, index, src, value=value, reduce=reduce))
