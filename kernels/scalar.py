"""The generic helpers an op's scalar expression may call besides the kernel math
(``kernels/mathtable.py``: ``SCALAR_HELPERS``), written so NaN propagates as in PyTorch.

Transcendentals come from :mod:`jitgrad.kernels.vmath` (inlined, vectorisable, never libm).
"""

from __future__ import annotations

from numba import njit

from .vmath import pow, sqrt

__all__ = ["maximum", "minimum", "pow_scalar"]


@njit(inline="always")
def maximum(a, b):
    """Larger of ``a`` and ``b``; NaN if either is NaN."""
    return a if (a > b or a != a) else b


@njit(inline="always")
def minimum(a, b):
    """Smaller of ``a`` and ``b``; NaN if either is NaN."""
    return a if (a < b or a != a) else b


@njit(inline="always")
def pow_scalar(a, e):
    """``a ** e`` for a loop-invariant exponent, with PyTorch's fast paths (2, 3 -> products,
    +-0.5 -> (r)sqrt, -1, -2 -> reciprocals); LLVM unswitches the loop on ``e``."""
    if e == 2.0:
        return a * a
    if e == 3.0:
        return a * a * a
    if e == 1.0:
        return a
    if e == 0.5:
        return sqrt(a)
    if e == -0.5:
        return (e / e) / sqrt(a)
    if e == -1.0:
        return (e / e) / a
    if e == -2.0:
        return (e / e) / (a * a)
    return pow(a, e)
