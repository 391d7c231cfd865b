"""Bitwise ops on integer and bool tensors: ``bitwise_and`` / ``or`` / ``xor`` / ``not`` and
the shifts ``bitwise_left_shift`` / ``bitwise_right_shift``, with their methods, in-place
forms and operators (``& | ^ ~ << >>`` and ``&= |= ^= <<= >>=``).

Each is an element-wise op (NumPy's or CuPy's function, no gradient), so it runs on CUDA and
inside ``jitgrad.compile``. Operands promote as PyTorch's (``uint8 & int8`` is ``int16``, a
bool tensor with a Python int is ``int64``); a floating operand raises PyTorch's error. On
bool tensors ``& | ^ ~`` are the logical ops. A shift by a negative amount or by the width
of the type or more gives PyTorch's result (0; a right shift of a negative number: -1),
not C's undefined one.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..devices import array_namespace
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, binary, unary
from .elementwise_base import ew

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
           "bitwise_right_shift"]


def _width(a) -> int:
    return np.dtype(a.dtype).itemsize * 8


def _shift_ref(left: bool):
    """PyTorch's shift: a negative amount or one of the width or more shifts every bit out
    (0; right shift of a signed number: its sign, -1 or 0)."""
    def ref(a, b):
        xp = array_namespace(*[x for x in (a, b) if not np.isscalar(x)])
        a = xp.asarray(a)
        b = xp.asarray(b)
        bits = _width(a)
        ok = (b >= 0) & (b < bits)
        amount = xp.where(ok, b, 0).astype(a.dtype)
        if left:
            return xp.where(ok, xp.left_shift(a, amount), 0).astype(a.dtype)
        spill = xp.right_shift(a, bits - 1) if np.dtype(a.dtype).kind == "i" else 0
        return xp.where(ok, xp.right_shift(a, amount), spill).astype(a.dtype)
    return ref


BITWISE_AND = ew("bitwise_and", None, ("a", "b"), None, np.bitwise_and, samples=S.bitwise)
BITWISE_OR = ew("bitwise_or", None, ("a", "b"), None, np.bitwise_or, samples=S.bitwise)
BITWISE_XOR = ew("bitwise_xor", None, ("a", "b"), None, np.bitwise_xor, samples=S.bitwise)
BITWISE_NOT = ew("bitwise_not", None, ("a",), None, np.invert, samples=S.bitwise_not)
BITWISE_LEFT_SHIFT = ew("bitwise_left_shift", None, ("a", "b"), None, _shift_ref(True),
                        samples=S.shifts)
BITWISE_RIGHT_SHIFT = ew("bitwise_right_shift", None, ("a", "b"), None, _shift_ref(False),
                         samples=S.shifts)


def _kind(dt) -> str:
    """PyTorch's scalar-type name in its dtype errors ('Float', 'Long', 'Bool'...)."""
    return dt.tensor_type[:-len("Tensor")]


def check_integral(kernel: str, *operands, allow_bool: bool = True) -> None:
    """PyTorch's error for an op with integer kernels only (``"gcd_cpu" not implemented for
    'Float'``), from the dtype the operands promote to."""
    dt = dtypes.result_type(*operands)
    if dt.is_floating_point or (dt is dtypes.bool_ and not allow_bool):
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_kind(dt)}\'')


def _binary_int(op, kernel: str, input, other, allow_bool: bool = True) -> Tensor:
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        input = as_tensor_arg(input)
    check_integral(kernel, input, other, allow_bool=allow_bool)
    return binary(op, input, other)


@api(BITWISE_AND, method=("bitwise_and", "__and__", "__rand__"),
     inplace=("bitwise_and_", "__iand__"), export="bitwise_and")
def bitwise_and(input, other) -> Tensor:
    """Bitwise and of integer (or bool: logical and) tensors or numbers."""
    return _binary_int(BITWISE_AND, "bitwise_and_cpu", input, other)


@api(BITWISE_OR, method=("bitwise_or", "__or__", "__ror__"),
     inplace=("bitwise_or_", "__ior__"), export="bitwise_or")
def bitwise_or(input, other) -> Tensor:
    """Bitwise or of integer (or bool: logical or) tensors or numbers."""
    return _binary_int(BITWISE_OR, "bitwise_or_cpu", input, other)


@api(BITWISE_XOR, method=("bitwise_xor", "__xor__", "__rxor__"),
     inplace=("bitwise_xor_", "__ixor__"), export="bitwise_xor")
def bitwise_xor(input, other) -> Tensor:
    """Bitwise exclusive or of integer (or bool: logical xor) tensors or numbers."""
    return _binary_int(BITWISE_XOR, "bitwise_xor_cpu", input, other)


@api(BITWISE_NOT, method="bitwise_not", inplace="bitwise_not_", export="bitwise_not")
def bitwise_not(input: Tensor) -> Tensor:
    """Bitwise not of an integer tensor (``-x - 1``; ``255 - x`` for uint8), logical not of
    a bool one."""
    input = as_tensor_arg(input)
    check_integral("bitwise_not_cpu", input)
    return unary(BITWISE_NOT, input)


@api(BITWISE_NOT, method="__invert__")
def _invert(self: Tensor) -> Tensor:
    """``~x``: :func:`bitwise_not`, with PyTorch's error for a floating tensor."""
    if self.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return unary(BITWISE_NOT, self)


@api(BITWISE_LEFT_SHIFT, method=("bitwise_left_shift", "__lshift__"),
     inplace=("bitwise_left_shift_", "__ilshift__"), export="bitwise_left_shift")
def bitwise_left_shift(input, other) -> Tensor:
    """``input << other`` element-wise (integers; bits shifted out are lost, as in C)."""
    return _binary_int(BITWISE_LEFT_SHIFT, "lshift_cpu", input, other, allow_bool=False)


@api(BITWISE_RIGHT_SHIFT, method=("bitwise_right_shift", "__rshift__"),
     inplace=("bitwise_right_shift_", "__irshift__"), export="bitwise_right_shift")
def bitwise_right_shift(input, other) -> Tensor:
    """``input >> other`` element-wise (integers; arithmetic: the sign is kept)."""
    return _binary_int(BITWISE_RIGHT_SHIFT, "rshift_cpu", input, other, allow_bool=False)


@api(BITWISE_LEFT_SHIFT, method="__rlshift__")
def _reflected_left_shift(self: Tensor, other) -> Tensor:
    """``other << self`` for a number ``other``."""
    return bitwise_left_shift(other, self)


@api(BITWISE_RIGHT_SHIFT, method="__rrshift__")
def _reflected_right_shift(self: Tensor, other) -> Tensor:
    """``other >> self`` for a number ``other``."""
    return bitwise_right_shift(other, self)
