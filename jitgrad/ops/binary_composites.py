"""Two-operand element-wise functions written with element-wise ops (so differentiable
where PyTorch's are, compilable and on CUDA): ``logaddexp2``, ``ldexp`` and ``heaviside``.

``logaddexp2`` is ``max + log2(1 + 2 ** -|a - b|)`` (no overflow; equal infinities give
the infinity), its gradient PyTorch's (a tie splits it evenly). ``ldexp`` is PyTorch's
``input * 2 ** other``, differentiable in both. ``heaviside`` has no gradient in PyTorch;
here its result does not require grad (PyTorch's records a node that raises when reached).
"""

from __future__ import annotations

import math

from ..tensor import Tensor
from .api import api
from .arithmetic import MUL, POW, mul, pow
from .dispatch import as_tensor_arg
from .integer_ops import require_tensor
from .math_functions import log1p
from .selection import MAXIMUM, WHERE, maximum, where
from .transcendental import EXP2, exp2

__all__ = ["logaddexp2", "ldexp", "heaviside"]


@api(MAXIMUM, WHERE, EXP2, method="logaddexp2", export="logaddexp2")
def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """``log2(2 ** input + 2 ** other)`` without overflow."""
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    from .. import dtypes

    dt = dtypes.result_type(input, other)
    if not dt.is_floating_point:
        raise NotImplementedError(f"\"logaddexp2_cpu\" not implemented for "
                                  f"'{dt.tensor_type[:-len('Tensor')]}'")
    m = maximum(input, other)
    d = input - other
    gap = where(d == d, -d.abs(), float("-inf"))  # equal infinities: the max alone
    return m + log1p(exp2(gap)) * (1.0 / math.log(2.0))


@api(MUL, POW, method="ldexp", inplace="ldexp_", export="ldexp")
def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """``input * 2 ** other`` (integers become the default float dtype)."""
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    return mul(input, pow(2.0, other))


@api(WHERE, method="heaviside", inplace="heaviside_", export="heaviside")
def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """The Heaviside step: 0 where ``input < 0``, ``values`` where ``input == 0``, 1 where
    ``input > 0`` (NaN: 0); ``input`` and ``values`` have one dtype. No gradient."""
    require_tensor("heaviside", "input", 1, input)
    require_tensor("heaviside", "values", 2, values)
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different "
                           "dtypes.")
    x = input.detach()
    return where(x == 0, values.detach(), (x > 0).to(input.dtype))
