"""Element-wise functions NumPy's (or CuPy's) ufuncs compute, with no generated kernel of
jitgrad's own: ``log2``, ``log10``, ``exp2`` and the hyperbolic and inverse trigonometric
functions (``sinh cosh tan asin acos atan asinh acosh atanh``). Their gradients are
PyTorch's formulas (derivatives.yaml), written with ops."""

from __future__ import annotations

import numpy as np

from . import samples as S
from .elementwise_base import ew, unary_public
from .registry import FLOAT

__all__ = ["log2", "log10", "exp2", "sinh", "cosh", "tan", "asin", "acos", "atan", "asinh",
           "acosh", "atanh"]

_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046


def _ufunc(fn):
    def ref(a):
        with np.errstate(all="ignore"):
            return fn(a)
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
