"""Movement ops, declared by job in four modules: :mod:`.views` (reshape, permute and expand
families: results are views of the input), :mod:`.indexing` (``x[index]``, select, narrow,
split, chunk, unbind), :mod:`.concat` (cat, stack) and :mod:`.copies` (clone, contiguous,
dtype conversion).

This module gathers them under the import path code has always used
(``from jitgrad.ops.movement import stack``, ``movement.RESHAPE``).
"""

from __future__ import annotations

from .concat import CAT, STACK, cat, concatenate, stack
from .copies import CLONE, TO_DTYPE, clone, contiguous, to_dtype
from .indexing import (
    GETITEM,
    GETITEM_BACKWARD,
    chunk,
    getitem,
    narrow,
    select,
    split,
    unbind,
)
from .views import (
    EXPAND,
    PERMUTE,
    RESHAPE,
    T,
    expand,
    expand_as,
    flatten,
    movedim,
    permute,
    reshape,
    squeeze,
    swapaxes,
    t,
    transpose,
    unflatten,
    unsqueeze,
    view,
)

__all__ = ["reshape", "view", "flatten", "unflatten", "squeeze", "unsqueeze", "permute",
           "transpose", "t", "expand", "expand_as", "getitem", "cat", "concatenate", "stack",
           "clone", "to_dtype", "contiguous", "select", "narrow", "split", "chunk", "unbind",
           "movedim", "swapaxes",
           # the op declarations and tensor.T, for code that used them from here
           "RESHAPE", "PERMUTE", "EXPAND", "GETITEM", "GETITEM_BACKWARD", "CAT", "STACK",
           "CLONE", "TO_DTYPE", "T"]
