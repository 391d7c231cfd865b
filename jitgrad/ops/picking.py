"""Picking elements by index or mask, written with ``x[index]`` (the getitem op): the
gradient is that op's, a deterministic scatter-add for repeated indices, and the node carries
PyTorch's name (``IndexSelectBackward0``, ``MaskedSelectBackward0``)."""

from __future__ import annotations

import numpy as np

from .. import devices
from ..creation import const_tensor
from ..shapes import wrap_dim
from ..tensor import Tensor
from ..trace.tracer import needs_value
from .api import api
from .dispatch import as_tensor_arg
from .indexing import GETITEM, getitem
from .sorting import GATHER
from .views import EXPAND

__all__ = ["index_select", "masked_select", "repeat_interleave", "take_along_dim"]


def _index_vector(index, fn: str) -> Tensor:
    index = as_tensor_arg(index, "index")
    a = index._data
    if a.ndim > 1:
        raise IndexError(f"{fn}(): Index is supposed to be a vector")
    if a.dtype not in (np.int32, np.int64):
        raise RuntimeError(f"{fn}(): Expected dtype int32 or int64 for index")
    return index


@api(GETITEM, method="index_select", export="index_select")
def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries of ``input`` at positions ``index`` (a vector of int32/int64) along
    ``dim``; the result has ``len(index)`` entries there.

    >>> import jitgrad
    >>> jitgrad.arange(6).reshape(2, 3).index_select(1, jitgrad.tensor([2, 0]))
    tensor([[2, 0],
            [5, 3]])
    """
    input = as_tensor_arg(input, "input")
    index = _index_vector(index, "index_select")
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    n = input._data.shape[d] if nd else 1
    bad = devices.first_outside(index._data, 0, n)
    if bad is not None:
        raise RuntimeError(f"INDICES element is out of DATA bounds, id={bad} axis_dim={n}")
    if index._data.ndim == 0:
        index = index.reshape(1)
    if nd == 0:
        return getitem(input.reshape(1), (index,), "IndexSelectBackward0").reshape(())
    return getitem(input, (slice(None),) * d + (index,), "IndexSelectBackward0")


@api(GETITEM, EXPAND, method="masked_select", export="masked_select")
def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The entries of ``input`` where boolean ``mask`` is True (the two broadcast), as a
    1-D tensor in row-major order."""
    input, mask = as_tensor_arg(input, "input"), as_tensor_arg(mask, "mask")
    if mask._data.dtype != np.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = np.broadcast_shapes(tuple(input._data.shape), tuple(mask._data.shape))
    if tuple(input._data.shape) != shape:
        input = input.expand(*shape)
    if tuple(mask._data.shape) != shape:
        mask = mask.expand(*shape)
    if not shape:
        return getitem(input.reshape(1), mask.reshape(1), "MaskedSelectBackward0")
    return getitem(input, mask, "MaskedSelectBackward0")


@api(GETITEM, method="repeat_interleave", export="repeat_interleave")
def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Each entry of ``input`` along ``dim`` (of the flattened tensor when None) repeated
    ``repeats`` times (a number, or a count per entry). ``repeat_interleave(counts)``
    alone: each position ``i`` repeated ``counts[i]`` times.

    >>> import jitgrad
    >>> jitgrad.tensor([1, 2]).repeat_interleave(2)
    tensor([1, 1, 2, 2])
    """
    input = as_tensor_arg(input, "input")
    if repeats is None:  # repeat_interleave(counts): the positions
        counts = _counts(input)
        idx = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
        return const_tensor(devices.to_device(idx, input.device))
    if dim is None:
        input = input.reshape(-1)
        d = 0
    else:
        d = wrap_dim(dim, input._data.ndim)
    n = input._data.shape[d] if input._data.ndim else 1
    if isinstance(repeats, Tensor) and repeats._data.ndim == 1:
        counts = _counts(repeats)
        if counts.size != n:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {counts.size} and input.size({d}) = {n}")
    else:
        r = int(repeats.item() if isinstance(repeats, Tensor) else repeats)
        if r < 0:
            raise RuntimeError("Repeats must be non-negative")
        counts = np.full(n, r, dtype=np.int64)
    idx = np.repeat(np.arange(n, dtype=np.int64), counts)
    if output_size is not None and idx.size != output_size:
        raise RuntimeError(f"allocated size does not match required size: {output_size} "
                           f"and {idx.size}")
    index = const_tensor(devices.to_device(idx, input.device))
    return getitem(input, (slice(None),) * d + (index,), "IndexSelectBackward0")


def _counts(t: Tensor) -> np.ndarray:
    """A count tensor's values on the host (non-negative int64)."""
    a = t._data
    if a.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    needs_value(t, "repeat_interleave's counts (the output's size)")
    if a.dtype.kind not in "iu":
        raise RuntimeError("repeats has to be Long tensor")
    c = np.asarray(devices.to_host(a), dtype=np.int64).reshape(-1)
    if c.size and c.min() < 0:
        raise RuntimeError("Repeats must be non-negative")
    return c


@api(GATHER, EXPAND, method="take_along_dim", export="take_along_dim")
def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """``gather`` with broadcasting: the values of ``input`` at ``indices`` along ``dim``
    (the two broadcast in every other dim); without ``dim``, of the flattened tensors."""
    input, indices = as_tensor_arg(input, "input"), as_tensor_arg(indices, "indices")
    if indices._data.dtype.kind not in "iu":
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be int64 but got "
                           f"{indices.dtype.name}")
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {input.ndim} dimensions for input, "
                           f"and {indices.ndim} dimensions for indices")
    d = wrap_dim(dim, input.ndim)
    a_shape, i_shape = list(input.shape), list(indices.shape)
    a_shape[d] = i_shape[d] = 1
    common = list(np.broadcast_shapes(tuple(a_shape), tuple(i_shape)))
    want_a, want_i = list(common), list(common)
    want_a[d], want_i[d] = input.shape[d], indices.shape[d]
    if list(input.shape) != want_a:
        input = input.expand(*want_a)
    if list(indices.shape) != want_i:
        indices = indices.expand(*want_i)
    return input.gather(d, indices)
