"""Element-wise math functions: sign, abs, exp, expm1, log, log1p, sqrt, rsqrt, reciprocal,
sin, cos, tanh, sigmoid, relu, erf, atan2."""

from __future__ import annotations

import math

import numpy as np

from ..amp.autocast_mode import autocast_op
from ..tensor import Tensor, wrap
from . import samples as S
from .api import api
from .dispatch import binary, record, unary
from .eager_reduce import trig_out_of_domain
from .elementwise_base import default_float, ew
from .fused_backward import sigmoid_backward, tanh_backward, threshold_backward
from .registry import FLOAT

__all__ = [
    "sign", "sgn", "abs", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
    "cos", "tanh", "sigmoid", "relu", "erf", "atan2",
]


# ----------------------------------------------------------------------------------- ops
def _sign_ref(a):
    """PyTorch's sign: 0 for NaN and for -0.0 (``(0 < a) - (a < 0)``)."""
    if a.dtype.kind != "f":
        return np.sign(a)
    return np.where(a > 0, 1.0, np.where(a < 0, -1.0, 0.0)).astype(a.dtype)


SIGN = ew("sign", "SignBackward0", ("a",), "1.0 if a > 0.0 else (-1.0 if a < 0.0 else 0.0)",
          _sign_ref, lambda g, ins, out, p, n: (g * 0.0,), samples=S.unary)
def _abs_complex_vjp(g, ins, out, p, n):
    """``g * z / |z|`` (0 where ``z`` is 0): PyTorch's gradient of ``|z|``."""
    from .selection import where

    z = ins[0]
    r = abs(z)
    return (g * (z / where(r == 0, 1.0, r)),)


ABS = ew("abs", "AbsBackward0", ("a",), "abs(a)", np.abs,
         lambda g, ins, out, p, n: (g * sign(ins[0]),), save=(0,), samples=S.unary_away_from_0,
         complex=_abs_complex_vjp)
EXP = ew("exp", "ExpBackward0", ("a",), "exp(a)", np.exp,
         lambda g, ins, out, p, n: (g * out,), save_out=True, dtype_rule=FLOAT,
         samples=S.unary, complex="holomorphic")
EXPM1 = ew("expm1", "Expm1Backward0", ("a",), "expm1(a)", np.expm1,
           lambda g, ins, out, p, n: (g * (out + 1.0),), save_out=True, dtype_rule=FLOAT,
           samples=S.unary)
LOG = ew("log", "LogBackward0", ("a",), "log(a)", np.log,
         lambda g, ins, out, p, n: (g / ins[0],), save=(0,), dtype_rule=FLOAT,
         samples=S.unary_positive, complex="holomorphic")
LOG1P = ew("log1p", "Log1PBackward0", ("a",), "log1p(a)", np.log1p,
           lambda g, ins, out, p, n: (g / (ins[0] + 1.0),), save=(0,), dtype_rule=FLOAT,
           samples=S.unary_positive)
SQRT = ew("sqrt", "SqrtBackward0", ("a",), "sqrt(a)", np.sqrt,
          lambda g, ins, out, p, n: (g / (out * 2.0),), save_out=True, dtype_rule=FLOAT,
          samples=S.unary_positive, complex="holomorphic")
RSQRT = ew("rsqrt", "RsqrtBackward0", ("a",), "rsqrt(a)", lambda a: 1.0 / np.sqrt(a),
           lambda g, ins, out, p, n: (g * (out * out * out) * -0.5,), save_out=True,
           dtype_rule=FLOAT, samples=S.unary_positive, complex="holomorphic")
RECIPROCAL = ew("reciprocal", "ReciprocalBackward0", ("a",), "1.0 / a", np.reciprocal,
                lambda g, ins, out, p, n: (-g * out * out,), save_out=True, dtype_rule=FLOAT,
                samples=S.unary_away_from_0, complex="holomorphic")


def _libm(op, a):
    with np.errstate(all="ignore"):
        return op.ref(a)


def _trig_fwd(name):
    """The eager forward of sin/cos on a float array or scalar, as :func:`_trig` computes
    it: NumPy's libm when some element lies beyond the vectorised kernel's domain."""
    def fwd(a):
        op = SIN if name == "sin" else COS
        if a.size and trig_out_of_domain(name, a):
            return _libm(op, a)
        from .eager_kernels import run

        return run(op, (a,), None, a.dtype, a.dtype)
    return fwd


# not fusable: their eager path checks the data and switches to libm beyond the vectorised
# range reduction's ACCURATE_DOMAIN (see _trig), so inside a plan they run as a call to the
# same eager function (fwd) rather than fused, and compiled results stay identical to eager
# for any input
SIN = ew("sin", "SinBackward0", ("a",), "sin(a)", np.sin,
         lambda g, ins, out, p, n: (g * cos(ins[0]),), save=(0,), dtype_rule=FLOAT,
         fwd=_trig_fwd("sin"), fusable=False, samples=S.unary, complex="holomorphic")
COS = ew("cos", "CosBackward0", ("a",), "cos(a)", np.cos,
         lambda g, ins, out, p, n: (g * -sin(ins[0]),), save=(0,), dtype_rule=FLOAT,
         fwd=_trig_fwd("cos"), fusable=False, samples=S.unary, complex="holomorphic")
TANH = ew("tanh", "TanhBackward0", ("a",), "tanh(a)", np.tanh,
          lambda g, ins, out, p, n: (tanh_backward(g, out),), save_out=True, dtype_rule=FLOAT,
          samples=S.unary, complex="holomorphic")


def _sigmoid_ref(a):
    return np.where(a >= 0, 1.0 / (1.0 + np.exp(-np.abs(a))),
                    np.exp(-np.abs(a)) / (1.0 + np.exp(-np.abs(a)))).astype(a.dtype)


SIGMOID = ew("sigmoid", "SigmoidBackward0", ("a",), "sigmoid(a)", _sigmoid_ref,
             lambda g, ins, out, p, n: (sigmoid_backward(g, out),), save_out=True,
             dtype_rule=FLOAT, samples=S.unary)
RELU = ew("relu", "ReluBackward0", ("a",), "a if (a > 0.0 or a != a) else 0.0",
          lambda a: np.where((a > 0) | np.isnan(a), a, np.zeros_like(a)) if a.dtype.kind == "f"
          else np.maximum(a, 0),
          lambda g, ins, out, p, n: (threshold_backward(g, out, 0.0),), save_out=True,
          samples=S.unary_away_from_0)

_erf_f64 = np.vectorize(math.erf, otypes=[np.float64])
_TWO_OVER_SQRT_PI = 1.1283791670955126


def _erf_ref(a):
    """``math.erf`` element by element (NumPy has none), rounded once to ``a``'s dtype."""
    a = np.asarray(a)
    return np.asarray(_erf_f64(a.astype(np.float64)),
                      dtype=a.dtype if a.dtype.kind == "f" else np.float64)


ERF = ew("erf", "ErfBackward0", ("a",), "erf(a)", _erf_ref,
         lambda g, ins, out, p, n: (g * exp(-(ins[0] * ins[0])) * _TWO_OVER_SQRT_PI,),
         save=(0,), dtype_rule=FLOAT, samples=S.unary)


def _atan2_vjp(g, ins, out, p, n):
    a, b = ins
    r2 = a * a + b * b
    from .selection import where

    r2 = where(r2 == 0, 1.0, r2)  # atan2(0, 0): gradients 0, as PyTorch's
    return (g * b / r2 if n[0] else None, g * -a / r2 if n[1] else None)


# NumPy's (CuPy's) arctan2: no kernel of jitgrad's own (no libdevice/vmath twin yet)
ATAN2 = ew("atan2", "Atan2Backward0", ("a", "b"), None, np.arctan2, _atan2_vjp, save=(0, 1),
           dtype_rule=FLOAT, samples=S.binary_tensors)


# ---------------------------------------------------------------------- public functions
@api(ATAN2, method=("atan2", "arctan2"), inplace=("atan2_", "arctan2_"),
     export=("atan2", "arctan2"))
@autocast_op
def atan2(input: Tensor, other: Tensor) -> Tensor:
    """The angle of the point (``other``, ``input``) in radians, in [-pi, pi]
    (element-wise ``arctan(input / other)`` with the quadrant from both signs)."""
    return binary(ATAN2, input, other)


@api(ABS, method=("abs", "__abs__"), inplace="abs_", export=("abs", "absolute"))
def abs(input: Tensor) -> Tensor:  # noqa: A001 - PyTorch's name
    """Absolute value."""
    return unary(ABS, input)


@api(SIGN, method="sign", export="sign")
def sign(input: Tensor) -> Tensor:
    """-1, 0 or 1 (PyTorch's error for a complex tensor: :func:`sgn` is its sign)."""
    if type(input) is Tensor and input._data.dtype.kind == "c":
        raise RuntimeError("Unlike NumPy, torch.sign is not intended to support complex "
                           "numbers. Please use torch.sgn instead.")
    return unary(SIGN, input)


@api(SIGN, ABS, method="sgn", export="sgn")
def sgn(input: Tensor) -> Tensor:
    """:func:`sign` of a real tensor; ``z / |z|`` (0 where ``z`` is 0) of a complex one."""
    if type(input) is Tensor and input._data.dtype.kind == "c":
        from .selection import where

        r = abs(input)
        return input / where(r == 0, 1.0, r)
    return unary(SIGN, input)


@api(EXP, method="exp", inplace="exp_", export="exp")
@autocast_op
def exp(input: Tensor) -> Tensor:
    """``e ** input``."""
    return unary(EXP, input)


@api(EXPM1, method="expm1", export="expm1")
@autocast_op
def expm1(input: Tensor) -> Tensor:
    """``exp(input) - 1``, accurate near 0."""
    return unary(EXPM1, input)


@api(LOG, method="log", inplace="log_", export="log")
@autocast_op
def log(input: Tensor) -> Tensor:
    """Natural logarithm."""
    return unary(LOG, input)


@api(LOG1P, method="log1p", export="log1p")
@autocast_op
def log1p(input: Tensor) -> Tensor:
    """``log(1 + input)``, accurate near 0."""
    return unary(LOG1P, input)


@api(SQRT, method="sqrt", inplace="sqrt_", export="sqrt")
def sqrt(input: Tensor) -> Tensor:
    """Square root."""
    return unary(SQRT, input)


@api(RSQRT, method="rsqrt", export="rsqrt")
@autocast_op
def rsqrt(input: Tensor) -> Tensor:
    """``1 / sqrt(input)``."""
    return unary(RSQRT, input)


@api(RECIPROCAL, method="reciprocal", inplace="reciprocal_", export="reciprocal")
@autocast_op
def reciprocal(input: Tensor) -> Tensor:
    """``1 / input``."""
    return unary(RECIPROCAL, input)


def _trig(op, input: Tensor) -> Tensor:
    # the vectorised sin/cos reduce arguments exactly only below ACCURATE_DOMAIN; beyond it
    # (|x| >= 6.6e6 in float32) NumPy's libm gives the right answer, so use it (integers are
    # checked as the float values the kernel would compute on)
    a = input._data
    if a.size:
        f = a if a.dtype.kind == "f" else a.astype(default_float().np)
        if trig_out_of_domain(op.name, f):
            return record(op, wrap(_libm(op, f)), (input,), None)
    return unary(op, input)


@api(SIN, method="sin", inplace="sin_", export="sin")
def sin(input: Tensor) -> Tensor:
    """Sine."""
    return _trig(SIN, input)


@api(COS, method="cos", inplace="cos_", export="cos")
def cos(input: Tensor) -> Tensor:
    """Cosine."""
    return _trig(COS, input)


@api(TANH, method="tanh", inplace="tanh_", export="tanh")
def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return unary(TANH, input)


@api(SIGMOID, method="sigmoid", inplace="sigmoid_", export="sigmoid")
def sigmoid(input: Tensor) -> Tensor:
    """Logistic sigmoid ``1 / (1 + exp(-input))``."""
    return unary(SIGMOID, input)


@api(RELU, method="relu", inplace="relu_", export="relu")
def relu(input: Tensor) -> Tensor:
    """``max(input, 0)``."""
    return unary(RELU, input)


@api(ERF, method="erf", inplace="erf_", export="erf")
def erf(input: Tensor) -> Tensor:
    """Error function ``2/sqrt(pi) * integral from 0 to input of exp(-t**2) dt``."""
    return unary(ERF, input)
