"""Element-wise ops, declared by job in four modules: :mod:`.arithmetic` (add, sub, mul, div,
neg, pow...), :mod:`.math_functions` (exp, log, sqrt, sin, tanh, relu...), :mod:`.selection`
(maximum, clamp, where, masked_fill, comparisons, logical ops) and :mod:`.fused_backward`
(``tanh_backward``...). Each op is declared once with its scalar expression (compiled into
kernels by the compiler's generator), NumPy reference and VJP rule.

This module gathers them under the import path code has always used
(``from jitgrad.ops.elementwise import tanh``, ``elementwise.ADD``).
"""

from __future__ import annotations

from . import arithmetic, fused_backward, math_functions, selection
from .dispatch import binary, unary
from .registry import gather

__all__ = gather(globals(), arithmetic, math_functions, selection, fused_backward) + [
    "binary", "unary"]  # the dispatch entry points, for code that used them from here
