"""Element-wise arithmetic: add, sub, rsub, mul, div, neg and the power family (pow with a
tensor or scalar exponent, a scalar base raised to a tensor, square)."""

from __future__ import annotations

import numpy as np

from ..amp.autocast_mode import autocast_op
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import binary, unary
from .eager_fast import binary_operator
from .elementwise_base import as_tensor, default_float, ew, is_tensor
from .fused_backward import pow_backward
from .inplace import write_out
from .math_functions import RECIPROCAL, log, reciprocal
from .registry import FLOAT
from .selection import kept_in_graph, where

__all__ = ["add", "sub", "rsub", "mul", "div", "true_divide", "neg", "pow", "square"]


# ---------------------------------------------------------------------------- arithmetic
ADD = ew("add", "AddBackward0", ("a", "b"), "a + b", np.add,
         lambda g, ins, out, p, n: (g, g), samples=S.binary, complex="holomorphic")
ADD_SCALED = ew("add_scaled", "AddBackward0", ("a", "b"), "a + alpha * b",
                lambda a, b, alpha: np.add(a, np.multiply(b, np.asarray(alpha, b.dtype))),
                lambda g, ins, out, p, n: (g if n[0] else None,
                                           g * p["alpha"] if n[1] else None),
                params=("alpha",), samples=S.binary_scaled, complex="holomorphic")
SUB = ew("sub", "SubBackward0", ("a", "b"), "a - b", np.subtract,
         lambda g, ins, out, p, n: (g, -g if n[1] else None), samples=S.binary,
         complex="holomorphic")
RSUB = ew("rsub", lambda p: "RsubBackward0" if p and p.get("tensor_other") else "RsubBackward1",
          ("a", "b"), "b - a", lambda a, b: np.subtract(b, a),
          lambda g, ins, out, p, n: (-g if n[0] else None, g), samples=S.binary,
          complex="holomorphic")
MUL = ew("mul", "MulBackward0", ("a", "b"), "a * b", np.multiply,
         lambda g, ins, out, p, n: (g * ins[1] if n[0] else None,
                                    g * ins[0] if n[1] else None),
         save=(0, 1), save_for=((0, 1), (1, 0)), samples=S.binary, complex="holomorphic")


def _div_vjp(g, ins, out, p, n):
    a, b = ins
    return (g / b if n[0] else None, -g * a / (b * b) if n[1] else None)


DIV = ew("div", "DivBackward0", ("a", "b"), "a / b", np.true_divide, _div_vjp, save=(0, 1),
         save_for=((0, 1),),
         dtype_rule=FLOAT, samples=S.binary_nonzero_b, complex="holomorphic")
NEG = ew("neg", "NegBackward0", ("a",), "-a", np.negative,
         lambda g, ins, out, p, n: (-g,), samples=S.unary, complex="holomorphic")


# -------------------------------------------------------------------------------- powers
def _pow_scalar_ref(a, exponent):
    return np.power(a, np.asarray(exponent, dtype=a.dtype))


POW_SCALAR = ew("pow_scalar", "PowBackward0", ("a",), "pow_scalar(a, exponent)",
                _pow_scalar_ref,
                lambda g, ins, out, p, n: (pow_backward(g, ins[0], p["exponent"]),),
                params=("exponent",), save=(0,), samples=S.pow_scalar, complex="holomorphic")


def _pow_vjp(g, ins, out, p, n):
    a, b = ins
    # PyTorch's pow_backward_self: 0 where the exponent is 0 (d(x**x)/dx at 0 is 0)
    ga = where(b == 0.0, 0.0, g * (b * pow(a, b - 1.0))) if n[0] else None
    # PyTorch's order of operations (float32 results match it bit for bit)
    gb = g * where((a == 0.0) & (b >= 0.0), 0.0, out * log(a)) if n[1] else None
    return ga, gb


def _pow_ref(a, b):
    """``a ** b`` element-wise; integers to negative integer powers as PyTorch's: 1 for a
    base of 1, +-1 (by the exponent's parity) for -1, else 0 (NumPy raises)."""
    if a.dtype.kind in "iu" and getattr(b, "dtype", np.dtype(type(b))).kind == "i":
        neg = np.less(b, 0)
        if neg.any():
            r = np.power(a, np.where(neg, 0, b))
            one = np.ones_like(r)
            special = np.where(a == 1, one, np.where(a == -1, np.where(
                np.remainder(b, 2) == 0, one, -one), 0))
            return np.where(neg, special, r).astype(r.dtype, copy=False)
    return np.power(a, b)


POW = ew("pow", "PowBackward1", ("a", "b"), "pow(a, b)", _pow_ref, _pow_vjp, save=(0, 1),
         save_out=True, samples=S.pow_tensor)


def _rpow_ref(a, base):
    return np.power(np.asarray(base, dtype=a.dtype), a)


def _rpow_vjp(g, ins, out, p, n):
    base = p["base"]
    if base == 0.0:
        return (g * where(ins[0] >= 0.0, 0.0, out * float("-inf")),)
    with np.errstate(invalid="ignore"):
        log_base = float(np.log(np.float64(base)))
    return (g * (out * log_base),)


RPOW_SCALAR = ew("rpow_scalar", "PowBackward2", ("a",), "pow(base, a)", _rpow_ref, _rpow_vjp,
                 params=("base",), save=(0,), save_out=True, dtype_rule=FLOAT,
                 samples=S.rpow_scalar)


# ---------------------------------------------------------------------- public functions
def _scaled(x, alpha):
    """``alpha * x`` for ``add``/``sub``'s ``alpha``, which -- unlike a number operand, wrapped
    into an integer dtype -- must fit the tensor's dtype (PyTorch's error)."""
    if not is_tensor(x):
        return x * alpha
    kind = x._data.dtype
    if type(alpha) is int and kind.kind in "iu":
        try:
            kind.type(alpha)
        except OverflowError:
            raise RuntimeError(f"value cannot be converted to type {kind.name}_t without "
                               "overflow") from None
    return mul(x, alpha)


@api(ADD, ADD_SCALED, method="add", inplace="add_", export="add")
def add(input, other, *, alpha=None, out=None) -> Tensor:
    """``input + alpha * other`` with broadcasting (written into ``out`` when given); two
    floating-point tensors and an ``alpha``: one op (one kernel, PyTorch's one node)."""
    if alpha is not None and alpha != 1:
        if (is_tensor(input) and is_tensor(other) and input._data.dtype.kind == "f"
                and other._data.dtype == input._data.dtype):
            r = binary(ADD_SCALED, input, other, {"alpha": alpha})
            return r if out is None else write_out(out, r, "add")
        other = _scaled(other, alpha)
    r = binary(ADD, other, input) if not is_tensor(input) else binary(ADD, input, other)
    return r if out is None else write_out(out, r, "add")


@api(SUB, RSUB, method=("sub", "subtract"), inplace="sub_", export=("sub", "subtract"))
def sub(input, other, *, alpha=None, out=None) -> Tensor:
    """``input - alpha * other`` (written into ``out`` when given)."""
    if alpha is not None and alpha != 1:
        other = _scaled(other, alpha)
    r = binary(RSUB, other, input) if not is_tensor(input) else binary(SUB, input, other)
    return r if out is None else write_out(out, r, "sub")


@api(RSUB, export="rsub")
def rsub(input, other, *, alpha=None) -> Tensor:
    """``other - input``."""
    if alpha is not None and alpha != 1:
        input = _scaled(input, alpha)
    return binary(RSUB, input, other, {"tensor_other": True} if is_tensor(other) else None)


@api(MUL, method=("mul", "multiply"), inplace="mul_", export=("mul", "multiply"))
def mul(input, other, *, out=None) -> Tensor:
    """Element-wise product (written into ``out`` when given)."""
    r = binary(MUL, other, input) if not is_tensor(input) else binary(MUL, input, other)
    return r if out is None else write_out(out, r, "mul")


@api(DIV, method=("div", "divide", "true_divide"), inplace="div_",
     export=("div", "divide", "true_divide"))
def div(input, other, *, rounding_mode=None) -> Tensor:
    """True division; ``rounding_mode`` "floor" is :func:`floor_divide`, "trunc" the quotient
    rounded toward zero -- both in the operands' promoted dtype (exact for integers, as
    PyTorch's), traceable by ``jitgrad.compile``."""
    if rounding_mode is None:
        if not is_tensor(input):
            return mul(reciprocal(other), input)
        return binary(DIV, input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                         f"but found '{rounding_mode}'")
    from .integer_ops import floor_divide

    if rounding_mode == "floor":  # (PyTorch's DivBackward2: zero gradients, not none)
        q = floor_divide(*(x.detach() if is_tensor(x) else x for x in (input, other)))
        return kept_in_graph(q, input, other)
    from ..dtypes import result_type

    dt = result_type(input, other)
    if dt.is_floating_point:
        return div(input, other).trunc()
    # integers: the floor quotient, one up where it was rounded down past zero
    from ..creation import tensor

    device = (input if is_tensor(input) else other).device
    a, b = (x.to(dt) if is_tensor(x) else tensor(x, dtype=dt, device=device)
            for x in (input, other))
    q = floor_divide(a, b)
    return where((q * b != a) & ((a < 0) != (b < 0)), q + 1, q)


true_divide = div


@api(NEG, method=("neg", "negative", "__neg__"), inplace="neg_",
     export=("neg", "negative"))
def neg(input: Tensor) -> Tensor:
    """``-input``."""
    if input._data.dtype == np.bool_:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return unary(NEG, input)


@api(POW, POW_SCALAR, RPOW_SCALAR, method=("pow", "__pow__"), inplace=("pow_", "__ipow__"),
     export="pow")
@autocast_op
def pow(input, exponent) -> Tensor:  # noqa: A001 - PyTorch's name
    """``input ** exponent``; either may be a Python number (not both)."""
    if is_tensor(input) and not is_tensor(exponent):
        if isinstance(exponent, np.generic):
            exponent = exponent.item()
        if not isinstance(exponent, (int, float, bool)):
            exponent = as_tensor(exponent)
            return binary(POW, input, exponent)
        if input._data.dtype.kind not in "fc" and (isinstance(exponent, float) or exponent < 0):
            if not isinstance(exponent, float):
                raise RuntimeError("Integers to negative integer powers are not allowed.")
            input = input.to(default_float())
        return unary(POW_SCALAR, input, {"exponent": exponent})
    if not is_tensor(input):
        if isinstance(input, np.generic):
            input = input.item()
        if isinstance(input, int) and exponent._data.dtype.kind in "iub":
            # an integer base and exponents: an integer result, as PyTorch's (2 ** t)
            from ..dtypes import result_type

            base = as_tensor(np.full(exponent._data.shape, input,
                                     result_type(input, exponent).np))
            return binary(POW, base, exponent)
        return unary(RPOW_SCALAR, exponent, {"base": input})
    return binary(POW, input, exponent)


@api(POW_SCALAR, method="square", inplace="square_", export="square")
def square(input: Tensor) -> Tensor:
    """``input ** 2``."""
    return pow(input, 2)


# ----------------------------------------------------------------------------- operators
# the operators (a tensor on the left, no ``alpha``): ``x + y`` is the hottest call of eager
# code; each is one function specialised for its op (ops/eager_fast.py)
_add_op = api(ADD, method=("__add__", "__radd__"), inplace="__iadd__")(binary_operator(
    ADD, "_add_op", "``self + other`` (and ``other + self``)."))
_sub_op = api(SUB, method="__sub__", inplace="__isub__")(binary_operator(
    SUB, "_sub_op", "``self - other``."))
_rsub_op = api(RSUB, method="__rsub__")(binary_operator(RSUB, "_rsub_op", "``other - self``."))
_mul_op = api(MUL, method=("__mul__", "__rmul__"), inplace="__imul__")(binary_operator(
    MUL, "_mul_op", "``self * other`` (and ``other * self``)."))
_truediv_op = api(DIV, method="__truediv__", inplace="__itruediv__")(binary_operator(
    DIV, "_truediv_op", "``self / other``."))


@api(RECIPROCAL, MUL, method="__rtruediv__")
def _rtruediv_op(self, other):
    """``other / self`` for a number ``other``: ``reciprocal(self) * other``, as PyTorch."""
    return mul(reciprocal(self), other)


@api(RPOW_SCALAR, POW, method="__rpow__")
def _rpow_op(self, base):
    """``base ** self``."""
    return pow(base, self)
