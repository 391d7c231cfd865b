"""PyTorch's ``torch.nn.common_types``: the typing aliases layer signatures use
(``_size_2_t`` is "an int or a pair of ints", ``_ratio_2_t`` "a float or a pair of floats",
``_tensor_list_t`` "a tensor or a tuple of tensors"...), for annotations in user code.

>>> from jitgrad.nn.common_types import _size_2_t
>>> def pool(kernel_size: _size_2_t) -> None: ...
"""

from __future__ import annotations

from typing import TypeVar, Union

from ..tensor import Tensor

__all__ = ["_scalar_or_tuple_any_t", "_scalar_or_tuple_1_t", "_scalar_or_tuple_2_t",
           "_scalar_or_tuple_3_t", "_scalar_or_tuple_4_t", "_scalar_or_tuple_5_t",
           "_scalar_or_tuple_6_t", "_size_any_t", "_size_1_t", "_size_2_t", "_size_3_t",
           "_size_4_t", "_size_5_t", "_size_6_t", "_size_any_opt_t", "_size_2_opt_t",
           "_size_3_opt_t", "_ratio_2_t", "_ratio_3_t", "_ratio_any_t", "_tensor_list_t",
           "_maybe_indices_t"]

T = TypeVar("T")

# an instance of T or a tuple of them (of any length, or of N)
_scalar_or_tuple_any_t = Union[T, tuple[T, ...]]  # noqa: UP007 - subscripted below
_scalar_or_tuple_1_t = Union[T, tuple[T]]  # noqa: UP007
_scalar_or_tuple_2_t = Union[T, tuple[T, T]]  # noqa: UP007
_scalar_or_tuple_3_t = Union[T, tuple[T, T, T]]  # noqa: UP007
_scalar_or_tuple_4_t = Union[T, tuple[T, T, T, T]]  # noqa: UP007
_scalar_or_tuple_5_t = Union[T, tuple[T, T, T, T, T]]  # noqa: UP007
_scalar_or_tuple_6_t = Union[T, tuple[T, T, T, T, T, T]]  # noqa: UP007

# sizes: kernel_size, stride, padding, dilation...
_size_any_t = _scalar_or_tuple_any_t[int]
_size_1_t = _scalar_or_tuple_1_t[int]
_size_2_t = _scalar_or_tuple_2_t[int]
_size_3_t = _scalar_or_tuple_3_t[int]
_size_4_t = _scalar_or_tuple_4_t[int]
_size_5_t = _scalar_or_tuple_5_t[int]
_size_6_t = _scalar_or_tuple_6_t[int]

# sizes whose entries may be None (adaptive pooling's output_size)
_size_any_opt_t = _scalar_or_tuple_any_t[Union[int, None]]  # noqa: UP007
_size_2_opt_t = _scalar_or_tuple_2_t[Union[int, None]]  # noqa: UP007
_size_3_opt_t = _scalar_or_tuple_3_t[Union[int, None]]  # noqa: UP007

# scale factors (interpolation)
_ratio_2_t = _scalar_or_tuple_2_t[float]
_ratio_3_t = _scalar_or_tuple_3_t[float]
_ratio_any_t = _scalar_or_tuple_any_t[float]

_tensor_list_t = _scalar_or_tuple_any_t[Tensor]

# pooling that may also return indices
_maybe_indices_t = _scalar_or_tuple_2_t[Tensor]
