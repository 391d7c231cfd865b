"""PyTorch's ``*_copy`` functions: the result of a view op (``permute``, ``transpose``,
``select``, ``split``...) as a new contiguous tensor instead of a view (``permute_copy(x,
dims)`` is ``x.permute(dims).clone()``), with the view's gradient. ``alias_copy`` and
``detach_copy`` copy the tensor itself (the latter without history).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..tensor import Tensor
from .copies import clone

__all__ = ["alias_copy", "detach_copy", "diagonal_copy", "expand_copy", "permute_copy",
           "select_copy", "slice_copy", "split_copy", "split_with_sizes_copy", "squeeze_copy",
           "t_copy", "transpose_copy", "unbind_copy", "unfold_copy", "unsqueeze_copy",
           "view_copy"]


def alias_copy(input: Tensor) -> Tensor:
    """A copy of ``input`` (the copy of its alias)."""
    return clone(input)


def detach_copy(input: Tensor) -> Tensor:
    """A copy of ``input`` with no history (``input.detach().clone()``)."""
    return clone(input.detach())


def diagonal_copy(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A copy of ``input.diagonal(offset, dim1, dim2)``."""
    return clone(input.diagonal(offset, dim1, dim2))


def expand_copy(input: Tensor, size: Sequence[int], *, implicit: bool = False) -> Tensor:
    """``input`` broadcast to ``size`` (-1 keeps a dim), as a new tensor."""
    return clone(input.expand(*size))


def permute_copy(input: Tensor, dims: Sequence[int]) -> Tensor:
    """A copy of ``input.permute(dims)``."""
    return clone(input.permute(*dims))


def select_copy(input: Tensor, dim: int, index: int) -> Tensor:
    """A copy of ``input.select(dim, index)``."""
    return clone(input.select(dim, index))


def slice_copy(input: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
               step: int = 1) -> Tensor:
    """A copy of ``input[start:end:step]`` along ``dim``."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    d = dim % max(input.dim(), 1)
    return clone(input[(slice(None),) * d + (slice(start, end, step),)])


def split_copy(input: Tensor, split_size: int, dim: int = 0) -> tuple:
    """Copies of the parts of ``input.split(split_size, dim)``."""
    return tuple(clone(t) for t in input.split(split_size, dim))


def split_with_sizes_copy(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple:
    """Copies of the parts of ``input.split_with_sizes(split_sizes, dim)``."""
    return tuple(clone(t) for t in input.split_with_sizes(split_sizes, dim))


def squeeze_copy(input: Tensor, dim=None) -> Tensor:
    """A copy of ``input.squeeze(dim)`` (every size-1 dim when None)."""
    return clone(input.squeeze() if dim is None else input.squeeze(dim))


def t_copy(input: Tensor) -> Tensor:
    """A copy of ``input.t()``."""
    return clone(input.t())


def transpose_copy(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """A copy of ``input.transpose(dim0, dim1)``."""
    return clone(input.transpose(dim0, dim1))


def unbind_copy(input: Tensor, dim: int = 0) -> tuple:
    """Copies of the slices of ``input.unbind(dim)``."""
    return tuple(clone(t) for t in input.unbind(dim))


def unfold_copy(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """A copy of ``input.unfold(dimension, size, step)``."""
    return clone(input.unfold(dimension, size, step))


def unsqueeze_copy(input: Tensor, dim: int) -> Tensor:
    """A copy of ``input.unsqueeze(dim)``."""
    return clone(input.unsqueeze(dim))


def view_copy(input: Tensor, size) -> Tensor:
    """A copy of ``input.view(size)`` (``size`` a shape; a dtype is ``view``'s error)."""
    return clone(input.view(size) if not isinstance(size, Sequence) else input.view(*size))
