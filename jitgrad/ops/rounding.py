"""Rounding: ``round`` (half to even, to ``decimals`` places), ``trunc`` / ``fix`` (toward
zero), ``floor``, ``ceil`` and ``frac`` (what ``trunc`` drops), with PyTorch's gradients
(zero for all but ``frac``, which passes the incoming gradient); and the remainders of a
rounded division, ``remainder`` (``%``: the divisor's sign) and ``fmod`` (the dividend's),
differentiable in both operands as PyTorch's. NumPy's (or CuPy's)
functions compute them: ``round`` with decimals scales by ``10 ** decimals`` in the input's
dtype, rounds and scales back, as PyTorch does."""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace
from ..tensor import Tensor
from ..trace.effects import run_check
from . import samples as S
from .api import api
from .dispatch import binary, unary
from .elementwise_base import ew, unary_public
from .integer_ops import _has_zero, _zero_division

__all__ = ["round", "trunc", "fix", "floor", "ceil", "frac", "remainder", "fmod"]


def _round_ref(a, decimals=None):
    if a.dtype.kind != "f":
        return a.copy()
    if not decimals:
        return np.rint(a)
    if decimals > 0:
        scale = a.dtype.type(10.0 ** decimals)
        return np.rint(a * scale) / scale
    scale = a.dtype.type(10.0 ** -decimals)
    return np.rint(a / scale) * scale


def _zero_grad(g, ins, out, p, n):
    return (g * 0.0,)


# PyTorch's two overloads: round(x) records RoundBackward0, round(x, decimals=d) (0 too)
# RoundBackward1
ROUND = ew("round", lambda p: "RoundBackward0" if p["decimals"] is None else "RoundBackward1",
           ("a",), None, _round_ref, _zero_grad, params=("decimals",), samples=S.rounding)
TRUNC = ew("trunc", "TruncBackward0", ("a",), None,
           lambda a: np.trunc(a) if a.dtype.kind == "f" else a.copy(), _zero_grad,
           samples=S.unary)
FLOOR = ew("floor", "FloorBackward0", ("a",), None,
           lambda a: np.floor(a) if a.dtype.kind == "f" else a.copy(), _zero_grad,
           samples=S.unary)
CEIL = ew("ceil", "CeilBackward0", ("a",), None,
          lambda a: np.ceil(a) if a.dtype.kind == "f" else a.copy(), _zero_grad,
          samples=S.unary)
FRAC = ew("frac", "FracBackward0", ("a",), None, lambda a: a - np.trunc(a),
          lambda g, ins, out, p, n: (g,), samples=S.unary)


@api(ROUND, method="round", inplace="round_", export="round")
def round(input: Tensor, *, decimals: int | None = None) -> Tensor:  # noqa: A001
    """``input`` rounded to the nearest integer (ties to even), or to ``decimals`` places.

    >>> import jitgrad
    >>> jitgrad.tensor([0.5, 1.5, 2.5, -0.5]).round()
    tensor([0., 2., 2., -0.])
    """
    return unary(ROUND, input, {"decimals": None if decimals is None else int(decimals)})


trunc = unary_public(TRUNC, ("trunc", "fix"), "``input`` rounded toward zero.")
fix = trunc


floor = unary_public(FLOOR, ("floor",), "The largest integer not above each element.")
ceil = unary_public(CEIL, ("ceil",), "The smallest integer not below each element.")


@api(FRAC, method="frac", inplace="frac_", export="frac")
def frac(input: Tensor) -> Tensor:
    """The fractional part, ``input - trunc(input)`` (the sign of ``input``)."""
    if input.dtype.is_floating_point is False:
        kind = input.dtype.tensor_type[:-6]
        raise NotImplementedError(f"\"frac_cpu\" not implemented for '{kind}'")
    return unary(FRAC, input)



def _remainder_vjp(rounding):
    def vjp(g, ins, out, p, n):
        a, b = ins
        return (g if n[0] else None, -g * rounding(a / b) if n[1] else None)
    return vjp


def _quiet(fn):
    def ref(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(a, b)
    return ref


def _overload(name: str):
    """PyTorch's node of the Tensor overload (1) or the Scalar one (0)."""
    return lambda p: f"{name}Backward1" if p and p.get("tensor_other") else f"{name}Backward0"


def _remainder_ref(a, b):
    """PyTorch's ``remainder``: ``fmod``, moved by ``b`` where its sign differs from
    ``b``'s. (NumPy's differs only in a zero result's sign: it takes ``b``'s, PyTorch keeps
    ``fmod``'s, the dividend's: ``-0.0 % 3.0`` is ``-0.0``.)"""
    if np.dtype(getattr(a, "dtype", np.float64)).kind != "f":
        return np.remainder(a, b)
    xp = array_namespace(*[x for x in (a, b) if not np.isscalar(x)])
    mod = xp.fmod(a, b)
    return xp.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod).astype(mod.dtype,
                                                                          copy=False)


REMAINDER = ew("remainder", _overload("Remainder"), ("a", "b"), None, _quiet(_remainder_ref),
               _remainder_vjp(lambda q: floor(q)), save=(0, 1),
               samples=S.binary_nonzero_b)
FMOD = ew("fmod", _overload("Fmod"), ("a", "b"), None, _quiet(np.fmod),
          _remainder_vjp(lambda q: trunc(q)), save=(0, 1), samples=S.binary_nonzero_b)


def _call(op, input, other) -> Tensor:
    """``op`` of a tensor and a tensor or number (a number first becomes a tensor of the
    other's device), with PyTorch's error for an integer division by zero."""
    from .methods import _lift

    if not isinstance(input, Tensor):
        input = _lift(input, other)
    other_t = isinstance(other, Tensor)
    ints = not input.dtype.is_floating_point and (
        not other.dtype.is_floating_point if other_t else isinstance(other, (int, np.integer)))
    if ints and other_t:
        run_check(other, _has_zero, _zero_division, "integer division's zero check")
    elif ints and other == 0:
        raise _zero_division()
    return binary(op, input, other, {"tensor_other": True} if other_t else None)


@api(REMAINDER, method=("remainder", "__mod__"), inplace=("remainder_", "__imod__"),
     export="remainder")
def remainder(input, other) -> Tensor:
    """``input - other * floor(input / other)`` element-wise: the remainder with the sign of
    ``other`` (Python's ``%``)."""
    return _call(REMAINDER, input, other)


@api(REMAINDER, method="__rmod__")
def _reflected_remainder(self, other) -> Tensor:
    return remainder(other, self)


@api(FMOD, method="fmod", inplace="fmod_", export="fmod")
def fmod(input, other) -> Tensor:
    """``input - other * trunc(input / other)`` element-wise: the remainder with the sign
    of ``input`` (C's ``fmod``)."""
    return _call(FMOD, input, other)
