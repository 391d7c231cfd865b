"""Tests and repairs of values, written with jitgrad's element-wise ops (so they trace,
compile and run on every device): ``isclose``, ``count_nonzero``, ``nan_to_num``, ``isin``,
``isneginf``, ``isposinf``, ``signbit``."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .api import api
from .arithmetic import MUL, SUB
from .dispatch import as_tensor_arg
from .math_functions import ABS
from .selection import EQ, LE, LOGICAL_AND, LOGICAL_OR, NE, WHERE, where
from .sums import SUM

__all__ = ["isclose", "count_nonzero", "nan_to_num", "isin", "isneginf", "isposinf",
           "signbit"]


def _finite(t: Tensor) -> Tensor:
    """Whether each element is finite (``x - x`` is 0 for a finite x, NaN for inf or NaN)."""
    return (t - t) == 0


@api(EQ, NE, LE, SUB, MUL, ABS, LOGICAL_AND, LOGICAL_OR, method="isclose", export="isclose")
def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """Element-wise ``|input - other| <= atol + rtol * |other|`` (infinities close only to
    themselves; NaNs close to each other when ``equal_nan``), as a bool tensor."""
    input, other = as_tensor_arg(input, "input"), as_tensor_arg(other, "other")
    if input.dtype != other.dtype:
        raise RuntimeError(f"{input.dtype.tensor_type[:-6]} did not match "
                           f"{other.dtype.tensor_type[:-6]}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    close = input == other
    if input.dtype.is_floating_point or input.dtype.is_complex:  # (complex: moduli)
        near = (input - other).abs() <= (other.abs() * rtol + atol)
        close = close | (_finite(input) & _finite(other) & near)
        if equal_nan:
            close = close | ((input != input) & (other != other))
    elif rtol or atol:
        a, b = input.double(), other.double()
        close = close | ((a - b).abs() <= (b.abs() * rtol + atol))
    return close


@api(NE, SUM, method="count_nonzero", export="count_nonzero")
def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """How many elements are not zero, in all of ``input`` or along ``dim`` (an int or a
    tuple), as int64."""
    input = as_tensor_arg(input, "input")
    nz = (input != 0).long()
    return nz.sum() if dim is None else nz.sum(dim)


@api(WHERE, EQ, NE, method="nan_to_num", inplace="nan_to_num_", export="nan_to_num")
def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """``input`` with NaN replaced by ``nan``, +inf by ``posinf`` and -inf by ``neginf``
    (by default the dtype's largest and lowest finite values); the gradient passes where
    ``input`` is finite."""
    input = as_tensor_arg(input, "input")
    if input.dtype.is_complex:  # the real and imaginary parts each, as PyTorch's
        from .complex_functions import complex as make_complex

        return make_complex(nan_to_num(input.real, nan, posinf, neginf),
                            nan_to_num(input.imag, nan, posinf, neginf))
    if not input.dtype.is_floating_point:
        return input.clone()
    info = np.finfo(input.dtype.np)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    out = where(input != input, float(nan), input)
    out = where(input == float("inf"), hi, out)
    return where(input == float("-inf"), lo, out)




@api(EQ, method="isin", export="isin")
def isin(elements, test_elements, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` is among ``test_elements`` (a tensor or a
    number); ``invert``: whether it is not."""
    elements = as_tensor_arg(elements, "elements")
    tests = test_elements if isinstance(test_elements, Tensor) else None
    if tests is None:
        hit = elements == test_elements
    else:
        flat = tests.reshape(-1)
        if flat.numel():
            hit = (elements.unsqueeze(-1) == flat).any(-1)
        else:
            from ..creation import zeros

            hit = zeros(tuple(elements.shape), dtype=dtypes.bool_, device=elements.device)
    return hit.logical_not() if invert else hit


@api(EQ, method="isneginf", export="isneginf")
def isneginf(input: Tensor) -> Tensor:
    """Whether each element is -inf."""
    input = as_tensor_arg(input)
    if input.dtype.is_complex:
        raise RuntimeError("isneginf does not support complex inputs.")
    return input == float("-inf") if input.dtype.is_floating_point else input != input


@api(EQ, method="isposinf", export="isposinf")
def isposinf(input: Tensor) -> Tensor:
    """Whether each element is +inf."""
    input = as_tensor_arg(input)
    if input.dtype.is_complex:
        raise RuntimeError("isposinf does not support complex inputs.")
    return input == float("inf") if input.dtype.is_floating_point else input != input


@api(EQ, method="signbit", export="signbit")
def signbit(input: Tensor) -> Tensor:
    """Whether each element's sign bit is set (-0.0 and negative NaNs too)."""
    from ..devices import array_namespace
    from ..tensor import wrap

    input = as_tensor_arg(input)
    return wrap(array_namespace(input._data).signbit(input._data))
