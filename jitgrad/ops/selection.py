"""Element-wise selection and comparison: maximum, minimum, clamp, where, masked_fill, the
comparisons (eq, ne, lt, le, gt, ge) and the logical ops."""

from __future__ import annotations

import numpy as np

from ..shapes import broadcast_sizes
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import binary, elementwise, unary
from .elementwise_base import as_tensor, ew, is_tensor
from .fused_backward import clamp_backward
from .registry import BOOL

__all__ = [
    "maximum", "minimum", "clamp", "clip", "where", "masked_fill", "eq", "ne", "lt", "le",
    "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
]


# ----------------------------------------------------------------------------- selection
# PyTorch's rules: ties split the gradient, the smaller (larger) side gets 0, and where
# either side is NaN (no comparison holds) both sides get the whole gradient.
def _maximum_vjp(g, ins, out, p, n):
    a, b = ins
    half = g * 0.5
    ga = where(a == b, half, where(a < b, 0.0, g)) if n[0] else None
    gb = where(a == b, half, where(a > b, 0.0, g)) if n[1] else None
    return ga, gb


def _minimum_vjp(g, ins, out, p, n):
    a, b = ins
    half = g * 0.5
    ga = where(a == b, half, where(a > b, 0.0, g)) if n[0] else None
    gb = where(a == b, half, where(a < b, 0.0, g)) if n[1] else None
    return ga, gb


MAXIMUM = ew("maximum", "MaximumBackward0", ("a", "b"), "maximum(a, b)", np.maximum,
             _maximum_vjp, save=(0, 1), samples=S.binary)
MINIMUM = ew("minimum", "MinimumBackward0", ("a", "b"), "minimum(a, b)", np.minimum,
             _minimum_vjp, save=(0, 1), samples=S.binary)


def _clamp_ref(a, min, max):  # noqa: A002 - PyTorch's parameter names
    return np.minimum(np.maximum(a, np.asarray(min, a.dtype)), np.asarray(max, a.dtype))


CLAMP = ew("clamp", "ClampBackward1", ("a",), "minimum(maximum(a, min), max)", _clamp_ref,
           lambda g, ins, out, p, n: (clamp_backward(g, ins[0], p["min"], p["max"]),),
           params=("min", "max"), save=(0,), samples=S.clamp)


def _where_vjp(g, ins, out, p, n):
    c = ins[0]
    return (None, where(c, g, 0.0) if n[1] else None, where(c, 0.0, g) if n[2] else None)


WHERE = ew("where", "WhereBackward0", ("cond", "a", "b"), "a if cond else b", np.where,
           _where_vjp, save=(0,), extra={"no_promote": (0,)}, samples=S.where,
           complex="holomorphic")
MASKED_FILL = ew("masked_fill", "MaskedFillBackward0", ("a", "mask"), "value if mask else a",
                 lambda a, mask, value: np.where(mask, np.asarray(value, a.dtype), a),
                 lambda g, ins, out, p, n: (where(ins[1], 0.0, g), None), params=("value",),
                 save=(1,), extra={"no_promote": (1,)}, samples=S.masked_fill,
                 complex="holomorphic")


# --------------------------------------------------------------------------- comparisons
def _cmp(name, expr, ref, **kw):
    return ew(name, None, ("a", "b"), expr, ref, dtype_rule=BOOL, samples=S.binary, **kw)


EQ = _cmp("eq", "a == b", np.equal, complex="holomorphic")  # (no gradient: any value)
NE = _cmp("ne", "a != b", np.not_equal, complex="holomorphic")
LT = _cmp("lt", "a < b", np.less)
LE = _cmp("le", "a <= b", np.less_equal)
GT = _cmp("gt", "a > b", np.greater)
GE = _cmp("ge", "a >= b", np.greater_equal)
LOGICAL_AND = ew("logical_and", None, ("a", "b"), None, np.logical_and, dtype_rule=BOOL)
LOGICAL_OR = ew("logical_or", None, ("a", "b"), None, np.logical_or, dtype_rule=BOOL)
LOGICAL_XOR = ew("logical_xor", None, ("a", "b"), None, np.logical_xor, dtype_rule=BOOL)
LOGICAL_NOT = ew("logical_not", None, ("a",), None, np.logical_not, dtype_rule=BOOL)


# ---------------------------------------------------------------------- public functions
@api(MAXIMUM, method="maximum", export="maximum")
def maximum(input: Tensor, other: Tensor) -> Tensor:
    """Element-wise maximum (NaN propagates)."""
    return binary(MAXIMUM, input, other)


@api(MINIMUM, method="minimum", export="minimum")
def minimum(input: Tensor, other: Tensor) -> Tensor:
    """Element-wise minimum (NaN propagates)."""
    return binary(MINIMUM, input, other)


@api(CLAMP, MAXIMUM, MINIMUM, method=("clamp", "clip"), inplace=("clamp_", "clip_"),
     export=("clamp", "clip"))
def clamp(input: Tensor, min=None, max=None) -> Tensor:  # noqa: A002 - PyTorch's names
    """Limit values to ``[min, max]``; bounds may be numbers or tensors."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if is_tensor(min) or is_tensor(max):
        # selections, not maximum/minimum: at a tie the gradient goes to ``input`` whole
        # (PyTorch's clamp), not half to each; a NaN bound gives NaN as maximum would
        r = input
        if min is not None:
            lo = min if is_tensor(min) else as_tensor(min)
            r = where((r < lo) | (lo != lo), lo, r)
        if max is not None:
            hi = max if is_tensor(max) else as_tensor(max)
            r = where((r > hi) | (hi != hi), hi, r)
        return r
    from ..dtypes import result_type

    rt = result_type(input, *[b for b in (min, max) if b is not None])
    if rt.np != input._data.dtype:
        input = input.to(rt)
    dt = input._data.dtype
    if dt.kind == "f":
        lo = float("-inf") if min is None else min
        hi = float("inf") if max is None else max
    else:
        info = np.iinfo(dt) if dt.kind in "iu" else None
        lo = (info.min if info else False) if min is None else min
        hi = (info.max if info else True) if max is None else max
    return unary(CLAMP, input, {"min": lo, "max": hi})


clip = clamp


_NO_ARG = object()  # where()'s omitted arguments


@api(WHERE, export="where")
def where(condition, input=_NO_ARG, other=_NO_ARG) -> Tensor:
    """``input`` where ``condition`` else ``other`` (either may be a number); ``where(
    condition)`` alone is ``nonzero(condition, as_tuple=True)``, as PyTorch's."""
    if input is _NO_ARG and other is _NO_ARG:
        from .tensor_extras import nonzero

        return nonzero(condition, as_tuple=True)
    if input is _NO_ARG or other is _NO_ARG:
        raise TypeError("where() missing 1 required positional argument: "
                        f"'{'input' if input is _NO_ARG else 'other'}'")
    if not is_tensor(condition):
        condition = as_tensor(condition)
    if condition._data.dtype != np.bool_:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{condition.dtype.tensor_type[:-len('Tensor')]}"
        )
    return elementwise(WHERE, (condition, input, other))


def kept_in_graph(result: Tensor, *operands) -> Tensor:
    """``result``, its values unchanged, in the graph of each tensor of ``operands`` that
    requires grad (in grad mode), with a zero gradient for it: through a never-true
    ``where`` (NaN-safe, unlike ``operand * 0 + result``). For PyTorch's nodes whose
    gradients are zero (``copysign``'s for ``other``, ``div(rounding_mode="floor")``'s)."""
    from ..autograd.grad_mode import is_grad_enabled

    graph = [t for t in operands if is_tensor(t) and t._requires_grad]
    if not graph or not is_grad_enabled():
        return result
    from ..creation import tensor

    never, d = tensor(False, device=result.device), result.dtype
    for t in graph:
        result = where(never, t, result).to(d)
    return result


@api(MASKED_FILL, WHERE, method="masked_fill", export="masked_fill")
def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """``value`` where ``mask`` is true, else ``input``."""
    if not is_tensor(mask):
        mask = as_tensor(mask)
    if mask._data.shape != input._data.shape:  # (PyTorch's message names the mask tensor a)
        broadcast_sizes(mask._data.shape, input._data.shape)
    if mask._data.dtype != np.bool_:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{mask.dtype.cpp_name}"
        )
    if is_tensor(value):
        if value._data.ndim:
            raise RuntimeError(
                f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value._data.ndim} dimension(s)."
            )
        if value._requires_grad:
            return where(mask, value, input)
        value = value.item()
    return elementwise(MASKED_FILL, (input, mask), {"value": value})


@api(MASKED_FILL, WHERE, inplace="masked_fill_")
def _masked_fill_inplace(input: Tensor, mask: Tensor, value) -> Tensor:
    """``input.masked_fill_(mask, value)``'s new value: :func:`masked_fill`, where a mask
    that does not broadcast is named tensor b in PyTorch's message (a: ``input``)."""
    shape = getattr(mask, "shape", None)
    if shape is not None and tuple(shape) != input._data.shape:
        broadcast_sizes(input._data.shape, tuple(shape))
    return masked_fill(input, mask, value)


def _compare(op, input, other):
    if not is_tensor(input):
        input = as_tensor(input)
    return binary(op, input, other)


@api(EQ, method="eq", export="eq")  # (== : methods._comparison_operator)
def eq(input, other) -> Tensor:
    """``input == other`` element-wise (bool)."""
    return _compare(EQ, input, other)


@api(NE, method="ne", export="ne")  # (!= : methods._comparison_operator)
def ne(input, other) -> Tensor:
    """``input != other`` element-wise (bool)."""
    return _compare(NE, input, other)


@api(LT, method=("lt", "__lt__"), export="lt")
def lt(input, other) -> Tensor:
    """``input < other`` element-wise (bool)."""
    return _compare(LT, input, other)


@api(LE, method=("le", "__le__"), export="le")
def le(input, other) -> Tensor:
    """``input <= other`` element-wise (bool)."""
    return _compare(LE, input, other)


@api(GT, method=("gt", "__gt__"), export="gt")
def gt(input, other) -> Tensor:
    """``input > other`` element-wise (bool)."""
    return _compare(GT, input, other)


@api(GE, method=("ge", "__ge__"), export="ge")
def ge(input, other) -> Tensor:
    """``input >= other`` element-wise (bool)."""
    return _compare(GE, input, other)


@api(LOGICAL_AND, method="logical_and", export="logical_and")
def logical_and(input, other) -> Tensor:
    """Element-wise logical and (bool)."""
    return binary(LOGICAL_AND, input, other)


@api(LOGICAL_OR, method="logical_or", export="logical_or")
def logical_or(input, other) -> Tensor:
    """Element-wise logical or (bool)."""
    return binary(LOGICAL_OR, input, other)


@api(LOGICAL_XOR, method="logical_xor", export="logical_xor")
def logical_xor(input, other) -> Tensor:
    """Element-wise logical xor (bool)."""
    return binary(LOGICAL_XOR, input, other)


@api(LOGICAL_NOT, method="logical_not", export="logical_not")
def logical_not(input) -> Tensor:
    """Element-wise logical not (bool)."""
    return unary(LOGICAL_NOT, input)


@api(WHERE, method="where")
def _where_method(self, condition, other):
    """``tensor.where(condition, other)``: ``where(condition, tensor, other)``."""
    return where(condition, self, other)
