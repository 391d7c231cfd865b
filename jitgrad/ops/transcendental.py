"""Element-wise functions NumPy's (or CuPy's) ufuncs compute, with no generated kernel of
jitgrad's own: ``log2``, ``log10``, ``exp2``, ``hypot`` and the hyperbolic and inverse
trigonometric functions (``sinh cosh tan asin acos atan asinh acosh atanh``). Their gradients
are PyTorch's formulas (derivatives.yaml), written with ops. Also ``logit``, a composite of
those ops, and ``xlogy`` (as ``special.xlog1py``): an op with a kernel expression, for
PyTorch's gradients at ``x = 0`` (:func:`zero_times_log_op`)."""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import binary
from .elementwise_base import ew, unary_public
from .math_functions import LOG
from .registry import FLOAT
from .selection import CLAMP

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


def zero_times_log_op(name: str, node: str, log: str, lower: float):
    """The element-wise op ``x * log(y)`` (``log``: "log" or "log1p"), and 0 where ``x`` is
    0 and ``y`` is not NaN (``xlogy``, ``xlog1py``; ``lower``: where the log's argument is
    0), with PyTorch's gradients: for ``x``, the op of ``(g, y)``, 0 where ``x`` is 0 and
    ``y <= lower``; for ``y``, ``g x / (y - lower)`` (NaN at ``x = 0, y = lower``)."""
    def ref(x, y):
        with np.errstate(all="ignore"):
            prod = x * getattr(np, log)(y)
        return array_namespace(prod).where((x == 0) & (y == y), 0, prod)

    def vjp(g, ins, out, p, n):
        x, y = ins
        return (binary(op, g, y).masked_fill((x == 0) & (y <= lower), 0.0) if n[0] else None,
                g * x / (y - lower) if n[1] else None)

    op = ew(name, node, ("x", "y"), f"0.0 if (x == 0.0 and y == y) else x * {log}(y)", ref,
            vjp, save=(0, 1), dtype_rule=FLOAT, samples=S.zero_times_log)
    return op


def float_operands(input, other, kernel: str) -> tuple:
    """``(input, other)`` as tensors for ``xlogy`` / ``xlog1py`` (``kernel``: PyTorch's
    kernel's name in the error for complex ones)."""
    from .dispatch import as_tensor_arg

    x = input if isinstance(input, Tensor) else as_tensor_arg(input)
    y = other if isinstance(other, Tensor) else as_tensor_arg(other)
    if x.dtype.is_complex or y.dtype.is_complex:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'ComplexFloat'")
    return x, y


XLOGY = zero_times_log_op("xlogy", "XlogyBackward0", "log", 0.0)


@api(XLOGY, method="xlogy", inplace="xlogy_", export="xlogy")
def xlogy(input, other) -> Tensor:
    """``input * log(other)``, and 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    return binary(XLOGY, *float_operands(input, other, "xlogy_cpu"))
