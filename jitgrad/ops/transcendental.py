"""Element-wise functions NumPy's (or CuPy's) ufuncs compute, with no generated kernel of
jitgrad's own: ``log2``, ``log10``, ``exp2``, ``hypot`` and the hyperbolic and inverse
trigonometric functions (``sinh cosh tan asin acos atan asinh acosh atanh``). Their gradients
are PyTorch's formulas (derivatives.yaml), written with ops. Also ``logit`` and ``xlogy``,
composites of those ops."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import samples as S
from .api import api
from .arithmetic import MUL
from .dispatch import binary
from .elementwise_base import ew, unary_public
from .math_functions import LOG
from .math_functions import log as LOG_FN
from .registry import FLOAT
from .selection import CLAMP, WHERE, where

__all__ = ["log2", "log10", "exp2", "sinh", "cosh", "tan", "asin", "acos",
           "atan", "asinh", "acosh", "atanh", "hypot", "logit", "xlogy"]

_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046


def _ufunc(fn):
    def ref(*arrays):
        with np.errstate(all="ignore"):
            return fn(*arrays)
    return ref


def _op(name: str, node: str, fn, vjp, samples, save_out: bool = False):
    return ew(name, node, ("a",), None, _ufunc(fn), vjp,
              save=() if save_out else (0,), save_out=save_out, dtype_rule=FLOAT,
              samples=samples)


LOG2 = _op("log2", "Log2Backward0", np.log2,
           lambda g, ins, out, p, n: (g / (ins[0] * _LN2),), S.unary_positive)
LOG10 = _op("log10", "Log10Backward0", np.log10,
            lambda g, ins, out, p, n: (g / (ins[0] * _LN10),), S.unary_positive)
EXP2 = _op("exp2", "Exp2Backward0", np.exp2,
           lambda g, ins, out, p, n: (g * out * _LN2,), S.unary, save_out=True)
SINH = _op("sinh", "SinhBackward0", np.sinh,
           lambda g, ins, out, p, n: (g * cosh(ins[0]),), S.unary)
COSH = _op("cosh", "CoshBackward0", np.cosh,
           lambda g, ins, out, p, n: (g * sinh(ins[0]),), S.unary)
TAN = _op("tan", "TanBackward0", np.tan,
          lambda g, ins, out, p, n: (g * (out * out + 1.0),), S.unary_inside_1, save_out=True)
ASIN = _op("asin", "AsinBackward0", np.arcsin,
           lambda g, ins, out, p, n: (g * (-ins[0] * ins[0] + 1.0).rsqrt(),), S.unary_inside_1)
ACOS = _op("acos", "AcosBackward0", np.arccos,
           lambda g, ins, out, p, n: (g * -((-ins[0] * ins[0] + 1.0).rsqrt()),),
           S.unary_inside_1)
ATAN = _op("atan", "AtanBackward0", np.arctan,
           lambda g, ins, out, p, n: (g / (ins[0] * ins[0] + 1.0),), S.unary)
ASINH = _op("asinh", "AsinhBackward0", np.arcsinh,
            lambda g, ins, out, p, n: (g * (ins[0] * ins[0] + 1.0).rsqrt(),), S.unary)
ACOSH = _op("acosh", "AcoshBackward0", np.arccosh,
            lambda g, ins, out, p, n: (g * (ins[0] * ins[0] - 1.0).rsqrt(),), S.unary_above_1)
ATANH = _op("atanh", "AtanhBackward0", np.arctanh,
            lambda g, ins, out, p, n: (g * (1.0 / (-ins[0] * ins[0] + 1.0)),),
            S.unary_inside_1)


log2 = unary_public(LOG2, ("log2",), "Base-2 logarithm.")
log10 = unary_public(LOG10, ("log10",), "Base-10 logarithm.")
exp2 = unary_public(EXP2, ("exp2",), "``2 ** input``.")
sinh = unary_public(SINH, ("sinh",), "Hyperbolic sine.")
cosh = unary_public(COSH, ("cosh",), "Hyperbolic cosine.")
tan = unary_public(TAN, ("tan",), "Tangent.")
asin = unary_public(ASIN, ("asin", "arcsin"), "Inverse sine (NaN outside [-1, 1]).")
acos = unary_public(ACOS, ("acos", "arccos"), "Inverse cosine (NaN outside [-1, 1]).")
atan = unary_public(ATAN, ("atan", "arctan"), "Inverse tangent.")
asinh = unary_public(ASINH, ("asinh", "arcsinh"), "Inverse hyperbolic sine.")
acosh = unary_public(ACOSH, ("acosh", "arccosh"), "Inverse hyperbolic cosine (NaN below 1).")
atanh = unary_public(ATANH, ("atanh", "arctanh"), "Inverse hyperbolic tangent.")



def _hypot_vjp(g, ins, out, p, n):
    a, b = ins
    return (g * a / out if n[0] else None, g * b / out if n[1] else None)


HYPOT = ew("hypot", "HypotBackward0", ("a", "b"), None, _ufunc(np.hypot), _hypot_vjp,
           save=(0, 1), save_out=True, dtype_rule=FLOAT, samples=S.binary_tensors)


@api(HYPOT, method="hypot", inplace="hypot_", export="hypot")
def hypot(input: Tensor, other: Tensor) -> Tensor:
    """``sqrt(input**2 + other**2)`` element-wise, without overflow (C's ``hypot``)."""
    return binary(HYPOT, input, other)


@api(LOG, CLAMP, method="logit", inplace="logit_", export="logit")
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given
    (the gradient is then 0 outside, as PyTorch's)."""
    z = input if eps is None else input.clamp(eps, 1.0 - eps)
    return (z / (1.0 - z)).log()


def zero_times_log(x: Tensor, y: Tensor, log_fn, lower: float, neutral: float) -> Tensor:
    """``x * log_fn(y)``, and 0 where ``x`` is 0 and ``y`` is not NaN (``xlogy``,
    ``xlog1py``): the gradients are PyTorch's, ``log_fn(y)`` for ``x`` (0 where ``y`` is at
    or below ``lower``, the log's domain, or inf) and ``g x / ...`` for ``y`` (0 where ``x``
    is 0). ``neutral`` is an argument where ``log_fn`` is 0."""
    keep = (x != 0) | (y != y)
    finite = (y > lower) & (y < float("inf"))
    safe = where(keep | finite, y, neutral)  # no -inf * 0 in a value or gradient dropped
    prod = x * log_fn(safe)
    return where(keep, prod, prod + 0.0)  # +0.0, not -0.0, where x is 0


@api(LOG, MUL, WHERE, method="xlogy", inplace="xlogy_", export="xlogy")
def xlogy(input, other) -> Tensor:
    """``input * log(other)``, and 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    from .dispatch import as_tensor_arg

    x = input if isinstance(input, Tensor) else as_tensor_arg(input)
    y = other if isinstance(other, Tensor) else as_tensor_arg(other)
    if x.dtype.is_complex or y.dtype.is_complex:
        raise RuntimeError("\"xlogy_cpu\" not implemented for 'ComplexFloat'")
    if not y.dtype.is_floating_point:
        y = y.to(x.dtype if x.dtype.is_floating_point else None)
    return zero_times_log(x, y, LOG_FN, lower=0.0, neutral=1.0)
