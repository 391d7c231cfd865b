"""``as_strided``: a view of a tensor's storage (the memory of its root array, as a flat run
of elements) with any sizes, strides and storage offset, as PyTorch's. Its gradient is
PyTorch's ``AsStridedBackward0`` for the general case: the view's gradient added into
zeros of the storage's size at the elements it reads (twice where it reads one twice),
then the input's elements picked out of that (elements outside the input get none)."""

from __future__ import annotations

import numpy as np

from ..autograd import grad_mode
from ..autograd.node import Node, edge, make_node
from ..devices import array_namespace
from ..tensor import Tensor, mark_view, wrap
from ..trace.state import STATE as _TRACE

__all__ = ["as_strided", "storage_root"]


def storage_root(a) -> tuple:
    """The array owning ``a``'s memory (its storage: the last array down its ``base``
    chain), and ``a``'s offset in it, in elements."""
    root = a
    while getattr(root, "base", None) is not None and _has_address(root.base):
        root = root.base
    if root is a:
        return a, 0
    return root, (_address(a) - _address(root)) // a.dtype.itemsize


def _has_address(a) -> bool:
    return hasattr(a, "__array_interface__") or hasattr(a, "data") and hasattr(a.data, "ptr")


def _address(a) -> int:
    if hasattr(a, "__array_interface__"):
        return a.__array_interface__["data"][0]
    return int(a.data.ptr)


def _positions(shape: tuple, strides: tuple, offset: int) -> np.ndarray:
    """The storage position of every element of a view (element strides), flattened."""
    pos = np.full(shape, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(shape) - d - 1))
    return pos.reshape(-1)


class AsStridedBackward0(Node):
    """``as_strided``'s node: the storage-sized gradient of the view, read back at the
    input's elements."""

    __slots__ = ()

    def apply(self, grads: list) -> tuple:
        from ..creation import tensor, zeros

        g = grads[0]
        d = self.__dict__
        n, out_pos, in_pos = d["_storage"]
        full = zeros(n, dtype=g.dtype, device=g.device).index_add(
            0, tensor(out_pos, device=g.device), g.reshape(-1))
        shape = self.in_meta[0][0]
        return (full.index_select(0, tensor(in_pos, device=g.device)).reshape(shape),)


def as_strided(input: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """A view of ``input``'s storage with these ``size``, ``stride`` (in elements) and
    ``storage_offset`` (default: ``input``'s own): elements may repeat (stride 0) or lie
    outside ``input``."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, "
                           f"got strides: {list(stride)}" if any(s < 0 for s in stride) else
                           f"Trying to create tensor with negative dimension {min(size)}: "
                           f"{list(size)}")
    if _TRACE.tracer is not None:
        _TRACE.tracer.graph_break("as_strided() (a view of the storage)")
    a = input._data
    root, own_offset = storage_root(a)
    offset = own_offset if storage_offset is None else int(storage_offset)
    item = a.dtype.itemsize
    if not (root.flags.c_contiguous or root.flags.f_contiguous):
        raise NotImplementedError("as_strided: the tensor's memory is not one contiguous "
                                  "run of elements (a strided NumPy array it wraps)")
    numel = 1
    for n in size:
        numel *= n
    need = 0 if numel == 0 else offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if offset < 0 or need > root.size:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {offset}, and itemsize {item} requiring a storage size of "
                           f"{need * item} are out of bounds for storage of size "
                           f"{root.size * item}")
    flat = root.reshape(-1, order="A")  # (memory order)
    xp = array_namespace(a)
    arr = xp.lib.stride_tricks.as_strided(flat[offset:] if numel else flat[:0], shape=size,
                                          strides=tuple(s * item for s in stride))
    out = mark_view(wrap(arr), input)
    if input._requires_grad and grad_mode.STATE.enabled:
        node = make_node(AsStridedBackward0, (edge(input),), None, ((a.shape, a.dtype),))
        node.__dict__["_storage"] = (
            root.size, _positions(size, stride, offset),
            _positions(a.shape, tuple(s // item for s in a.strides), own_offset))
        out._requires_grad = True
        out._grad_fn = node
    return out
