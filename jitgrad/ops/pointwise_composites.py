"""Element-wise functions written with element-wise ops (so differentiable, compilable and
on CUDA): ``deg2rad``, ``rad2deg``, ``copysign``, ``fmax``, ``fmin``, ``float_power``,
``positive``, ``sinc``. Gradients are PyTorch's: ``fmax``/``fmin`` give a tie to the first
argument and skip a NaN (not split as ``maximum``'s), ``copysign``'s is ``g * out / x`` (0 at
``x == 0``), ``sinc``'s is 0 at 0."""

from __future__ import annotations

import math

from ..tensor import Tensor
from .api import api
from .arithmetic import MUL, POW, mul, pow
from .dispatch import as_tensor_arg
from .math_functions import SIN
from .selection import WHERE, kept_in_graph, where

__all__ = ["deg2rad", "rad2deg", "copysign", "fmax", "fmin", "float_power", "positive",
           "sinc"]


def _floating(t: Tensor) -> Tensor:
    from .. import dtypes

    if t.dtype.is_floating_point or t.dtype.is_complex:  # (complex: each op says if it can)
        return t
    return t.to(dtypes.get_default_dtype())


@api(MUL, method="deg2rad", inplace="deg2rad_", export="deg2rad")
def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians (``input * pi / 180``)."""
    return mul(_floating(as_tensor_arg(input)), math.pi / 180.0)


@api(MUL, method="rad2deg", inplace="rad2deg_", export="rad2deg")
def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees (``input * 180 / pi``)."""
    return mul(_floating(as_tensor_arg(input)), 180.0 / math.pi)


@api(WHERE, method="copysign", inplace="copysign_", export="copysign")
def copysign(input: Tensor, other) -> Tensor:
    """``|input|`` with the sign of ``other`` (``-0.0`` is negative; a NaN ``other`` counts
    as positive)."""
    input = _floating(as_tensor_arg(input))
    if not isinstance(other, Tensor):
        from ..creation import tensor

        other = tensor(float(other), dtype=input.dtype, device=input.device)
    mag = input.abs()
    # the sign bit from comparisons (traceable): x < 0, or -0.0 (1 / -0.0 is -inf); a NaN
    # counts as positive whatever its sign bit (PyTorch reads the bit)
    negative = (other < 0) | ((other == 0) & (1.0 / other < 0))
    # other's gradient is 0 (PyTorch's CopysignBackward0), but the result requires grad
    return kept_in_graph(where(negative, -mag, mag), other)


def _nan_skipping(a, b, take_a_when):
    a, b = as_tensor_arg(a, "input"), as_tensor_arg(b, "other")
    return where(take_a_when(a, b) | (b != b), a, b)  # b != b: b is NaN


@api(WHERE, method="fmax", export="fmax")
def fmax(input: Tensor, other: Tensor) -> Tensor:
    """Element-wise maximum that ignores a NaN (NaN only where both are)."""
    return _nan_skipping(input, other, lambda a, b: a >= b)


@api(WHERE, method="fmin", export="fmin")
def fmin(input: Tensor, other: Tensor) -> Tensor:
    """Element-wise minimum that ignores a NaN (NaN only where both are)."""
    return _nan_skipping(input, other, lambda a, b: a <= b)


@api(POW, method="float_power", inplace="float_power_", export="float_power")
def float_power(input, exponent) -> Tensor:
    """``input ** exponent`` in float64 (both operands cast first)."""
    from .. import dtypes

    def f64(v):
        return v.to(dtypes.float64) if isinstance(v, Tensor) else float(v)
    return pow(f64(input), f64(exponent))


@api(MUL, method="positive", export="positive")
def positive(input: Tensor) -> Tensor:
    """``input`` itself (``+input``); not defined for bool tensors, as in PyTorch."""
    input = as_tensor_arg(input)
    if input.dtype.name == "bool":
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


@api(SIN, WHERE, method="sinc", inplace="sinc_", export="sinc")
def sinc(input: Tensor) -> Tensor:
    """``sin(pi x) / (pi x)``, 1 at 0 (its gradient 0 there)."""
    x = _floating(as_tensor_arg(input))
    zero = x == 0
    px = where(zero, 1.0, x * math.pi)  # no 0/0 on either branch, value or gradient
    return where(zero, 1.0, px.sin() / px)
