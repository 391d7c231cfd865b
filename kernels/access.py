"""Operand access helpers for generated element-wise kernels.

``ld(a, i)`` reads element ``i`` of an array operand or returns a scalar operand unchanged, so
one kernel source serves every array/scalar combination (Numba specialises per type).
"""

from __future__ import annotations

from numba import types
from numba.extending import overload

__all__ = ["ld", "ld2"]


def ld(a, i):
    """``a[i]`` for an array, ``a`` for a scalar (usable inside ``@njit`` code)."""
    return a if not hasattr(a, "__getitem__") else a[i]


def ld2(a, i, j):
    """``a[i, j]`` for a 2-D array, ``a`` for a scalar (usable inside ``@njit`` code)."""
    return a if not hasattr(a, "__getitem__") else a[i, j]


@overload(ld, inline="always")
def _ld(a, i):
    if isinstance(a, types.Array):
        return lambda a, i: a[i]
    return lambda a, i: a


@overload(ld2, inline="always")
def _ld2(a, i, j):
    if isinstance(a, types.Array):
        return lambda a, i, j: a[i, j]
    return lambda a, i, j: a
