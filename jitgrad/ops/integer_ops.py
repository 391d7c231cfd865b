"""Integer arithmetic: ``gcd``, ``lcm`` and ``floor_divide`` (``//``), element-wise ops with
no gradient (PyTorch has none), on NumPy's or CuPy's functions; ``unravel_index`` (flat
indices to coordinates), PyTorch's composite of ``floor_divide`` and ``remainder``.

``floor_divide`` is PyTorch's: on integers the floor of the exact quotient (a zero divisor
raises ``ZeroDivisionError`` as PyTorch's CPU kernel does); on floats the rounded quotient
PyTorch's ``div_floor`` computes from ``fmod`` (``-5.5 // 0.1`` is ``-55``; a zero divisor
gives ``a / 0``, an infinity or NaN).
"""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace
from ..tensor import Tensor
from ..trace.effects import run_check
from . import samples as S
from .api import api
from .bitwise import check_integral
from .dispatch import as_tensor_arg, binary
from .elementwise_base import ew

__all__ = ["gcd", "lcm", "floor_divide", "unravel_index"]


def _xp(*xs):
    return array_namespace(*[x for x in xs if not np.isscalar(x)])


def _floor_divide_ref(a, b):
    """PyTorch's ``div_floor``: exact for integers; for floats the quotient of
    ``a - fmod(a, b)``, moved down when the remainder's sign differs from ``b``'s, then
    floored and rounded to the nearest integer (``copysign(0, a / b)`` for a zero quotient,
    ``a / b`` for a zero divisor)."""
    xp = _xp(a, b)
    a, b = xp.asarray(a), xp.asarray(b)
    if np.dtype(a.dtype).kind != "f":
        return xp.floor_divide(a, xp.where(b == 0, 1, b).astype(b.dtype))
    with np.errstate(all="ignore"):
        mod = xp.fmod(a, b)
        div = (a - mod) / b
        div = xp.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
        floor = xp.floor(div)
        floor = xp.where(div - floor > 0.5, floor + 1, floor)
        floor = xp.where(div == 0, xp.copysign(xp.zeros_like(div), a / b), floor)
        return xp.where(b == 0, a / b, floor).astype(a.dtype)


def _floor_divide_vjp(g, ins, out, p, n):
    raise RuntimeError("derivative for aten::floor_divide is not implemented")


GCD = ew("gcd", None, ("a", "b"), None, np.gcd, samples=S.integer_pairs)
LCM = ew("lcm", None, ("a", "b"), None, np.lcm, samples=S.integer_pairs)
# (a float result requires grad when an operand does, but has no derivative: PyTorch's)
FLOOR_DIVIDE = ew("floor_divide", "torch::autograd::NotImplemented", ("a", "b"), None,
                  _floor_divide_ref, _floor_divide_vjp, samples=S.floor_divide)


def require_tensor(fn: str, arg: str, position: int, value) -> None:
    """PyTorch's error for a function whose argument takes tensors only."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be Tensor, not "
                        f"{type(value).__name__}")


@api(GCD, method="gcd", inplace="gcd_", export="gcd")
def gcd(input: Tensor, other: Tensor) -> Tensor:
    """The greatest common divisor, element-wise, of two integer tensors (non-negative;
    ``gcd(0, 0)`` is 0)."""
    require_tensor("gcd", "input", 1, input)
    require_tensor("gcd", "other", 2, other)
    check_integral("gcd_cpu", input, other, allow_bool=False)
    return binary(GCD, input, other)


@api(LCM, method="lcm", inplace="lcm_", export="lcm")
def lcm(input: Tensor, other: Tensor) -> Tensor:
    """The least common multiple, element-wise, of two integer tensors (non-negative; 0
    where either is 0)."""
    require_tensor("lcm", "input", 1, input)
    require_tensor("lcm", "other", 2, other)
    check_integral("lcm_cpu", input, other, allow_bool=False)
    return binary(LCM, input, other)


@api(FLOOR_DIVIDE, method=("floor_divide", "__floordiv__"),
     inplace=("floor_divide_", "__ifloordiv__"), export="floor_divide")
def floor_divide(input, other) -> Tensor:
    """``input // other`` element-wise: the quotient rounded down (no gradient)."""
    if not isinstance(input, Tensor):
        from .methods import _lift

        input = _lift(input, other) if isinstance(other, Tensor) else as_tensor_arg(input)
    from .. import dtypes

    dt = dtypes.result_type(input, other)
    if dt is dtypes.bool_:
        raise NotImplementedError("\"div_floor_cpu\" not implemented for 'Bool'")
    if not dt.is_floating_point:
        if isinstance(other, Tensor):
            run_check(other, _has_zero, _zero_division, "integer division's zero check")
        elif other == 0:
            raise _zero_division()
    return binary(FLOOR_DIVIDE, input, other)


def _has_zero(b) -> bool:
    return bool(array_namespace(b).any(b == 0))


def _zero_division() -> Exception:
    return RuntimeError("ZeroDivisionError")


@api(FLOOR_DIVIDE, method="__rfloordiv__")
def _reflected_floor_divide(self: Tensor, other) -> Tensor:
    """``other // self`` for a number ``other``."""
    return floor_divide(other, self)


@api(FLOOR_DIVIDE, export="unravel_index")
def unravel_index(indices: Tensor, shape) -> tuple:
    """The coordinates, one int64 tensor per dim of ``shape``, of the flat positions
    ``indices`` in a tensor of that shape (as PyTorch: positions are taken modulo the size,
    so -1 is the last element).

    >>> import jitgrad
    >>> jitgrad.unravel_index(jitgrad.tensor([4, 1]), (2, 3))
    (tensor([1, 0]), tensor([1, 1]))
    """
    from ..creation import tensor

    require_tensor("unravel_index", "indices", 1, indices)
    if indices.dtype.is_floating_point or indices.dtype.name == "bool":
        raise TypeError(f"expected 'indices' to be integer dtype, but got "
                        f"torch.{indices.dtype.name}")
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    elif not isinstance(shape, (tuple, list)):
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got "
                        f"{type(shape)}")
    for n in shape:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"expected 'shape' sequence to only contain ints, but got "
                            f"{type(n)}")
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    coefs, acc = [], 1
    for n in reversed(shape):
        coefs.append(acc)
        acc *= n
    coefs.reverse()
    from ..dtypes import int64

    dev = indices.device
    res = floor_divide(indices.unsqueeze(-1), tensor(coefs, dtype=int64, device=dev))
    res = res % tensor(list(shape), dtype=int64, device=dev)
    return tuple(res.unbind(-1))
