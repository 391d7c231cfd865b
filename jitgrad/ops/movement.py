"""Movement ops, declared by job in four modules: :mod:`.views` (reshape, permute and expand
families: results are views of the input), :mod:`.indexing` (``x[index]``, select, narrow,
split, chunk, unbind), :mod:`.concat` (cat, stack) and :mod:`.copies` (clone, contiguous,
dtype conversion).

This module gathers them under the import path code has always used
(``from jitgrad.ops.movement import stack``, ``movement.RESHAPE``).
"""

from __future__ import annotations

from . import concat, copies, indexing, views
from .registry import gather

__all__ = gather(globals(), views, indexing, concat, copies)
