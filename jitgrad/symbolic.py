"""PyTorch's ``torch.sym_*`` helpers on plain Python numbers.

PyTorch's versions take symbolic sizes (``SymInt``, ``SymFloat``, ``SymBool``) when its
compiler traces, and behave as below for ordinary numbers -- which is all jitgrad's tracer
gives them (it specialises on Python numbers). Objects that implement PyTorch's symbolic
protocol (``__sym_float__``, ``__sym_max__``, ``__sym_not__``...) are honoured as PyTorch's
functions honour them.

>>> import jitgrad
>>> jitgrad.sym_int(-3.7), jitgrad.sym_max(1, 2.0), jitgrad.sym_sum([1, 2, 3])
(-3, 2.0, 6)
"""

from __future__ import annotations

import builtins
import math
import numbers
from collections.abc import Sequence
from typing import Any

__all__ = ["sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_ite", "sym_sqrt",
           "sym_sum"]

_ALL = (int, float, numbers.Integral, numbers.Real)  # (bool is an int, as in PyTorch)


def sym_int(a: Any) -> int:
    """``int(a)``: a float is truncated toward zero."""
    if isinstance(a, float):
        return math.trunc(a)
    return builtins.int(a)


def sym_float(a: Any) -> float:
    """``float(a)`` (``a.__sym_float__()`` where ``a`` defines it)."""
    if hasattr(a, "__sym_float__"):
        return a.__sym_float__()
    return builtins.float(a)


def _check_number(a: Any) -> None:
    if not isinstance(a, _ALL):
        raise AssertionError(f"expected {(int, float)}, got {type(a)}")


def _extremum(a: Any, b: Any, pick, method: str):
    for x, y in ((a, b), (b, a)):
        if hasattr(x, method):
            return getattr(x, method)(y)
    _check_number(a)
    _check_number(b)
    if isinstance(a, float) or isinstance(b, float) or not (
            isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral)):
        return builtins.float(pick(a, b))
    return pick(a, b)


def sym_max(a: int | float, b: int | float) -> int | float:
    """The larger of two numbers, a float if either is one (``sym_max(1, 2.0)`` is
    ``2.0``; unlike ``max``, the type does not depend on which is larger)."""
    return _extremum(a, b, builtins.max, "__sym_max__")


def sym_min(a: int | float, b: int | float) -> int | float:
    """The smaller of two numbers, a float if either is one (see :func:`sym_max`)."""
    return _extremum(a, b, builtins.min, "__sym_min__")


def sym_not(a: Any) -> bool:
    """``not a`` (``a.__sym_not__()`` where ``a`` defines it)."""
    if hasattr(a, "__sym_not__"):
        return a.__sym_not__()
    return not a


def sym_ite(b: bool, t: Any, f: Any) -> Any:
    """``t if b else f``; ``b`` must be a bool and ``t`` and ``f`` of one type."""
    if not isinstance(b, builtins.bool):
        raise AssertionError(f"expected SymBool or bool, got {type(b)}")
    if type(t) is not type(f):
        raise AssertionError(f"type mismatch: {type(t)} vs {type(f)}")
    return t if b else f


def sym_sqrt(a: int | float) -> float:
    """``math.sqrt(a)`` (``a.__sym_sqrt__()`` where ``a`` defines it)."""
    if hasattr(a, "__sym_sqrt__"):
        return a.__sym_sqrt__()
    return math.sqrt(a)


def sym_sum(*args: Any) -> Any:
    """The sum of numbers, given as ``sym_sum([a, b, c])`` or ``sym_sum(a, b, c)``."""
    if len(args) == 1 and isinstance(args[0], Sequence):
        args = args[0]
    return builtins.sum(args)
