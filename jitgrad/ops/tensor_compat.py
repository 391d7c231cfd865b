"""``Tensor`` members PyTorch scripts use that are no op of their own: the storages
(``untyped_storage``, the legacy ``storage``), the deprecated non-in-place ``resize`` /
``resize_as`` (a reshape that keeps the element count), ``as_subclass``, ``dim_order``,
``is_shared`` and ``const_data_ptr``.

>>> import jitgrad
>>> jitgrad.empty(2, 3, 5, 7).transpose(1, 2).dim_order()
(0, 2, 1, 3)
"""

from __future__ import annotations

import math
import warnings

from .. import memory_format as MF
from ..shapes import as_shape
from ..storage import typed_storage_of, untyped_storage_of
from ..tensor import Tensor

__all__ = ["COMPAT_METHODS"]


def _resized(self: Tensor, sizes: tuple) -> Tensor:
    numel = math.prod(sizes)
    if numel != self.numel():
        def fmt(s):
            return "x".join(str(n) for n in s)
        raise RuntimeError(f"requested resize to {fmt(sizes)} ({numel} elements in total), "
                           f"but the given tensor has a size of {fmt(self.shape)} "
                           f"({self.numel()} elements). autograd's resize can only change the "
                           f"shape of a given tensor, while preserving the number of elements. ")
    return self.contiguous().view(sizes)


def _resize(self: Tensor, *sizes) -> Tensor:
    """Deprecated (warns): ``self`` reshaped to ``sizes`` -- which must hold as many
    elements (PyTorch's autograd ``Resize``) -- differentiably. Use ``reshape``."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return _resized(self, tuple(as_shape(sizes)))


def _resize_as(self: Tensor, tensor: Tensor) -> Tensor:
    """Deprecated (warns): ``self`` reshaped to ``tensor``'s shape (same element count)."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return _resized(self, tuple(tensor.shape))


def _as_subclass(self: Tensor, cls: type) -> Tensor:
    """A ``cls`` instance sharing ``self``'s memory and attached to its autograd graph (an
    alias of ``self``: changes to either show in the other, and gradients flow back to
    ``self``). ``cls`` must be a subclass of ``Tensor``."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from "
                        "Tensor is not possible. Make sure your class inherits from Tensor.")
    out = self.view_as(self)
    if cls is not Tensor:
        out.__class__ = cls
    return out


_AMBIGUOUS = ("The tensor does not have unique dim order, or cannot map to exact one of the "
              "given memory formats.")


def _dim_order(self: Tensor, *, ambiguity_check: bool | list = False) -> tuple[int, ...]:
    """The dims from the outermost to the innermost in memory (by decreasing stride):
    ``(0, 1, 2, 3)`` for a contiguous 4-D tensor, ``(0, 2, 3, 1)`` for channels-last.
    ``ambiguity_check=True`` raises RuntimeError when the order is not unique (a size-1 dim
    or two equal strides); a list of memory formats raises unless the tensor is in exactly
    one of them."""
    bad_arg = "The ambiguity_check argument must be a bool or a list of memory formats."
    if not isinstance(ambiguity_check, bool):
        if not isinstance(ambiguity_check, list) or not all(
                isinstance(f, MF.memory_format) for f in ambiguity_check):
            raise TypeError(bad_arg)
    formats = ambiguity_check if isinstance(ambiguity_check, list) else []
    check = ambiguity_check if isinstance(ambiguity_check, bool) else True
    sizes, strides = tuple(self.shape), self.stride()
    if check:
        multiple = any(a == b for a, b in zip(strides, strides[1:])) or 1 in sizes
        if multiple and sum(self.is_contiguous(memory_format=f) for f in formats) != 1:
            raise RuntimeError(_AMBIGUOUS)
    if self.ndim <= 1:
        return tuple(range(self.ndim))
    contiguous = self.is_contiguous()
    channels_last = self.ndim == 4 and self.is_contiguous(memory_format=MF.channels_last)
    if contiguous and not channels_last:
        return tuple(range(self.ndim))
    if channels_last and not contiguous:
        return (0, *range(2, self.ndim), 1)
    perm = _physical_order(sizes, strides)
    if ambiguity_check and any(_should_swap(sizes, strides, a, b) != -1
                               for a, b in zip(perm, perm[1:])):
        raise RuntimeError("The tensor does not have unique dim order.")
    return tuple(reversed(perm))


def _ge(a: int, b: int) -> bool:
    return b == 0 or (a != 0 and (a >= b or a % b == 0))


def _should_swap(sizes: tuple, strides: tuple, a: int, b: int) -> int:
    """PyTorch's comparison of two dims' strides (ties: the larger size goes outside; a
    zero stride does not order)."""
    if strides[a] == 0 or strides[b] == 0:
        return 0
    if strides[a] == strides[b]:
        return 0 if _ge(sizes[b], sizes[a]) else 1
    if _ge(strides[b], strides[a]):
        return -1
    return 1 if _ge(strides[a], strides[b]) else 0


def _physical_order(sizes: tuple, strides: tuple) -> list[int]:
    """PyTorch's logical-to-physical permutation, innermost dim first: an insertion sort
    from the last dim that moves a dim past those of smaller stride."""
    perm = list(range(len(sizes) - 1, -1, -1))
    for i in range(1, len(perm)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = _should_swap(sizes, strides, perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def _is_shared(self: Tensor) -> bool:
    """Whether the tensor's memory is shared between processes: True for CUDA tensors (as
    PyTorch reports), False on the CPU (jitgrad's ``share_memory_`` does not move memory)."""
    return self.is_cuda


def _const_data_ptr(self: Tensor) -> int:
    """The address of the first element (as ``data_ptr()``; for reading only)."""
    return self.data_ptr()


COMPAT_METHODS = {
    "untyped_storage": untyped_storage_of, "storage": typed_storage_of,
    "resize": _resize, "resize_as": _resize_as, "as_subclass": _as_subclass,
    "dim_order": _dim_order, "is_shared": _is_shared, "const_data_ptr": _const_data_ptr,
}
