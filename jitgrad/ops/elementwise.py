"""Element-wise ops: arithmetic, math functions, selection, comparisons and the fused backward
ops (``tanh_backward``...). Each is declared once with its scalar expression (compiled into
kernels by :mod:`jitgrad.ops.gen_kernels`), NumPy reference and VJP rule."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import samples as S
from .dispatch import binary, elementwise, unary
from .eager_reduce import trig_out_of_domain
from .registry import BOOL, ELEMENTWISE, FLOAT, defop

__all__ = [
    "add", "sub", "rsub", "mul", "div", "true_divide", "neg", "abs", "exp", "log", "sqrt",
    "sin", "cos", "tanh", "sigmoid", "relu", "maximum", "minimum", "clamp", "clip", "where",
    "pow", "square", "reciprocal", "rsqrt", "sign", "eq", "ne", "lt", "le", "gt", "ge",
    "tanh_backward", "sigmoid_backward", "threshold_backward", "pow_backward",
    "clamp_backward", "log1p", "expm1", "masked_fill", "logical_and", "logical_or",
    "logical_xor", "logical_not",
]


def _ew(name, node, inputs, expr, ref, vjp=None, **kw):
    return defop(name=name, kind=ELEMENTWISE, node=node, inputs=inputs, expr=expr, ref=ref,
                 vjp=vjp, **kw)


# ------------------------------------------------------------------------ arithmetic
ADD = _ew("add", "AddBackward0", ("a", "b"), "a + b", np.add,
          lambda g, ins, out, p, n: (g, g), samples=S.binary)
SUB = _ew("sub", "SubBackward0", ("a", "b"), "a - b", np.subtract,
          lambda g, ins, out, p, n: (g, -g if n[1] else None), samples=S.binary)
RSUB = _ew("rsub", lambda p: "RsubBackward0" if p and p.get("tensor_other") else "RsubBackward1",
           ("a", "b"), "b - a", lambda a, b: np.subtract(b, a),
           lambda g, ins, out, p, n: (-g if n[0] else None, g), samples=S.binary)
MUL = _ew("mul", "MulBackward0", ("a", "b"), "a * b", np.multiply,
          lambda g, ins, out, p, n: (g * ins[1] if n[0] else None,
                                     g * ins[0] if n[1] else None),
          save=(0, 1), samples=S.binary)


def _div_vjp(g, ins, out, p, n):
    a, b = ins
    return (g / b if n[0] else None, -g * a / (b * b) if n[1] else None)


DIV = _ew("div", "DivBackward0", ("a", "b"), "a / b", np.true_divide, _div_vjp, save=(0, 1),
          dtype_rule=FLOAT, samples=S.binary_nonzero_b)
NEG = _ew("neg", "NegBackward0", ("a",), "-a", np.negative,
          lambda g, ins, out, p, n: (-g,), samples=S.unary)


# ---------------------------------------------------------------------- unary math
def _sign_ref(a):
    return np.sign(a)


SIGN = _ew("sign", "SignBackward0", ("a",), "1.0 if a > 0.0 else (-1.0 if a < 0.0 else a)",
           _sign_ref, lambda g, ins, out, p, n: (g * 0.0,), samples=S.unary)
ABS = _ew("abs", "AbsBackward0", ("a",), "abs(a)", np.abs,
          lambda g, ins, out, p, n: (g * sign(ins[0]),), save=(0,), samples=S.unary_away_from_0)
EXP = _ew("exp", "ExpBackward0", ("a",), "exp(a)", np.exp,
          lambda g, ins, out, p, n: (g * out,), save_out=True, dtype_rule=FLOAT,
          samples=S.unary)
EXPM1 = _ew("expm1", "Expm1Backward0", ("a",), "expm1(a)", np.expm1,
            lambda g, ins, out, p, n: (g * (out + 1.0),), save_out=True, dtype_rule=FLOAT,
            samples=S.unary)
LOG = _ew("log", "LogBackward0", ("a",), "log(a)", np.log,
          lambda g, ins, out, p, n: (g / ins[0],), save=(0,), dtype_rule=FLOAT,
          samples=S.unary_positive)
LOG1P = _ew("log1p", "Log1PBackward0", ("a",), "log1p(a)", np.log1p,
            lambda g, ins, out, p, n: (g / (ins[0] + 1.0),), save=(0,), dtype_rule=FLOAT,
            samples=S.unary_positive)
SQRT = _ew("sqrt", "SqrtBackward0", ("a",), "sqrt(a)", np.sqrt,
           lambda g, ins, out, p, n: (g / (out * 2.0),), save_out=True, dtype_rule=FLOAT,
           samples=S.unary_positive)
RSQRT = _ew("rsqrt", "RsqrtBackward0", ("a",), "rsqrt(a)", lambda a: 1.0 / np.sqrt(a),
            lambda g, ins, out, p, n: (g * (out * out * out) * -0.5,), save_out=True,
            dtype_rule=FLOAT, samples=S.unary_positive)
RECIPROCAL = _ew("reciprocal", "ReciprocalBackward0", ("a",), "1.0 / a", np.reciprocal,
                 lambda g, ins, out, p, n: (-g * out * out,), save_out=True, dtype_rule=FLOAT,
                 samples=S.unary_away_from_0)


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
SIN = _ew("sin", "SinBackward0", ("a",), "sin(a)", np.sin,
          lambda g, ins, out, p, n: (g * cos(ins[0]),), save=(0,), dtype_rule=FLOAT,
          fwd=_trig_fwd("sin"), fusable=False, samples=S.unary)
COS = _ew("cos", "CosBackward0", ("a",), "cos(a)", np.cos,
          lambda g, ins, out, p, n: (g * -sin(ins[0]),), save=(0,), dtype_rule=FLOAT,
          fwd=_trig_fwd("cos"), fusable=False, samples=S.unary)
TANH = _ew("tanh", "TanhBackward0", ("a",), "tanh(a)", np.tanh,
           lambda g, ins, out, p, n: (tanh_backward(g, out),), save_out=True, dtype_rule=FLOAT,
           samples=S.unary)


def _sigmoid_ref(a):
    return np.where(a >= 0, 1.0 / (1.0 + np.exp(-np.abs(a))),
                    np.exp(-np.abs(a)) / (1.0 + np.exp(-np.abs(a)))).astype(a.dtype)


SIGMOID = _ew("sigmoid", "SigmoidBackward0", ("a",), "sigmoid(a)", _sigmoid_ref,
              lambda g, ins, out, p, n: (sigmoid_backward(g, out),), save_out=True,
              dtype_rule=FLOAT, samples=S.unary)
RELU = _ew("relu", "ReluBackward0", ("a",), "a if (a > 0.0 or a != a) else 0.0",
           lambda a: np.where((a > 0) | np.isnan(a), a, np.zeros_like(a)) if a.dtype.kind == "f"
           else np.maximum(a, 0),
           lambda g, ins, out, p, n: (threshold_backward(g, out, 0.0),), save_out=True,
           samples=S.unary_away_from_0)


# --------------------------------------------------------------------------- powers
def _pow_scalar_ref(a, exponent):
    return np.power(a, np.asarray(exponent, dtype=a.dtype))


POW_SCALAR = _ew("pow_scalar", "PowBackward0", ("a",), "pow_scalar(a, exponent)",
                 _pow_scalar_ref,
                 lambda g, ins, out, p, n: (pow_backward(g, ins[0], p["exponent"]),),
                 params=("exponent",), save=(0,), samples=S.pow_scalar)


def _pow_vjp(g, ins, out, p, n):
    a, b = ins
    ga = g * b * pow(a, b - 1.0) if n[0] else None
    # PyTorch's order of operations (float32 results match it bit for bit)
    gb = g * where((a == 0.0) & (b >= 0.0), 0.0, out * log(a)) if n[1] else None
    return ga, gb


POW = _ew("pow", "PowBackward1", ("a", "b"), "pow(a, b)", np.power, _pow_vjp, save=(0, 1),
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


RPOW_SCALAR = _ew("rpow_scalar", "PowBackward2", ("a",), "pow(base, a)", _rpow_ref, _rpow_vjp,
                  params=("base",), save=(0,), save_out=True, dtype_rule=FLOAT,
                  samples=S.rpow_scalar)


# ----------------------------------------------------------------------- selection
def _maximum_vjp(g, ins, out, p, n):
    a, b = ins
    half = g * 0.5
    ga = where(a == b, half, where(a > b, g, 0.0)) if n[0] else None
    gb = where(a == b, half, where(b > a, g, 0.0)) if n[1] else None
    return ga, gb


def _minimum_vjp(g, ins, out, p, n):
    a, b = ins
    half = g * 0.5
    ga = where(a == b, half, where(a < b, g, 0.0)) if n[0] else None
    gb = where(a == b, half, where(b < a, g, 0.0)) if n[1] else None
    return ga, gb


MAXIMUM = _ew("maximum", "MaximumBackward0", ("a", "b"), "maximum(a, b)", np.maximum,
              _maximum_vjp, save=(0, 1), samples=S.binary)
MINIMUM = _ew("minimum", "MinimumBackward0", ("a", "b"), "minimum(a, b)", np.minimum,
              _minimum_vjp, save=(0, 1), samples=S.binary)


def _clamp_ref(a, min, max):  # noqa: A002 - PyTorch's parameter names
    return np.minimum(np.maximum(a, np.asarray(min, a.dtype)), np.asarray(max, a.dtype))


CLAMP = _ew("clamp", "ClampBackward1", ("a",), "minimum(maximum(a, min), max)", _clamp_ref,
            lambda g, ins, out, p, n: (clamp_backward(g, ins[0], p["min"], p["max"]),),
            params=("min", "max"), save=(0,), samples=S.clamp)


def _where_vjp(g, ins, out, p, n):
    c = ins[0]
    return (None, where(c, g, 0.0) if n[1] else None, where(c, 0.0, g) if n[2] else None)


WHERE = _ew("where", "WhereBackward0", ("cond", "a", "b"), "a if cond else b", np.where,
            _where_vjp, save=(0,), extra={"no_promote": (0,)}, samples=S.where)


MASKED_FILL = _ew("masked_fill", "MaskedFillBackward0", ("a", "mask"), "value if mask else a",
                  lambda a, mask, value: np.where(mask, np.asarray(value, a.dtype), a),
                  lambda g, ins, out, p, n: (where(ins[1], 0.0, g), None), params=("value",),
                  save=(1,), extra={"no_promote": (1,)}, samples=S.masked_fill)


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """``value`` where ``mask`` is true, else ``input``."""
    if not _t(mask):
        mask = _as_tensor(mask)
    if mask._data.dtype != np.bool_:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{mask.dtype.name}"
        )
    if _t(value):
        if value._data.ndim:
            raise RuntimeError(
                f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value._data.ndim} dimension(s)."
            )
        if value._requires_grad:
            return where(mask, value, input)
        value = value.item()
    return elementwise(MASKED_FILL, (input, mask), {"value": value})


# --------------------------------------------------------------------- comparisons
def _cmp(name, expr, ref):
    return _ew(name, None, ("a", "b"), expr, ref, dtype_rule=BOOL, samples=S.binary)


EQ = _cmp("eq", "a == b", np.equal)
NE = _cmp("ne", "a != b", np.not_equal)
LT = _cmp("lt", "a < b", np.less)
LE = _cmp("le", "a <= b", np.less_equal)
GT = _cmp("gt", "a > b", np.greater)
GE = _cmp("ge", "a >= b", np.greater_equal)
LOGICAL_AND = _ew("logical_and", None, ("a", "b"), None, np.logical_and, dtype_rule=BOOL)
LOGICAL_OR = _ew("logical_or", None, ("a", "b"), None, np.logical_or, dtype_rule=BOOL)
LOGICAL_XOR = _ew("logical_xor", None, ("a", "b"), None, np.logical_xor, dtype_rule=BOOL)
LOGICAL_NOT = _ew("logical_not", None, ("a",), None, np.logical_not, dtype_rule=BOOL)


# ------------------------------------------------------------- fused backward ops
def _tanh_bwd_vjp(g, ins, out, p, n):
    go, y = ins
    return (tanh_backward(g, y) if n[0] else None, g * go * y * -2.0 if n[1] else None)


def _sigmoid_bwd_vjp(g, ins, out, p, n):
    go, y = ins
    return (sigmoid_backward(g, y) if n[0] else None,
            g * go * (1.0 - 2.0 * y) if n[1] else None)


TANH_BACKWARD = _ew("tanh_backward", "TanhBackwardBackward0", ("g", "y"), "g * (1.0 - y * y)",
                    lambda g, y: g * (1 - y * y), _tanh_bwd_vjp, save=(0, 1),
                    samples=S.binary_same)
SIGMOID_BACKWARD = _ew("sigmoid_backward", "SigmoidBackwardBackward0", ("g", "y"),
                       "g * y * (1.0 - y)", lambda g, y: g * y * (1 - y), _sigmoid_bwd_vjp,
                       save=(0, 1), samples=S.binary_same)
THRESHOLD_BACKWARD = _ew(
    "threshold_backward", "ThresholdBackwardBackward0", ("g", "x"),
    "g if x > threshold else 0.0",
    lambda g, x, threshold: np.where(x > threshold, g, np.zeros_like(g)),
    lambda g, ins, out, p, n: (threshold_backward(g, ins[1], p["threshold"]) if n[0] else None,
                               ins[1] * 0.0 if n[1] else None),
    params=("threshold",), save=(1,), samples=S.binary_same_away_from_0)


def _pow_bwd_ref(g, a, exponent):
    if exponent == 0.0:
        return np.zeros_like(g)
    return g * (np.asarray(exponent, a.dtype) * np.power(a, np.asarray(exponent - 1.0, a.dtype)))


def _pow_bwd_vjp(g, ins, out, p, n):
    go, a = ins
    e = p["exponent"]
    return (pow_backward(g, a, e) if n[0] else None,
            pow_backward(g * go * e, a, e - 1.0) if n[1] and e != 0.0 else None)


POW_BACKWARD = _ew("pow_backward", "PowBackwardBackward0", ("g", "a"),
                   "0.0 if exponent == 0.0 else g * (exponent * pow_scalar(a, exponent - 1.0))",
                   _pow_bwd_ref, _pow_bwd_vjp, params=("exponent",), save=(0, 1),
                   samples=S.pow_backward)
CLAMP_BACKWARD = _ew(
    "clamp_backward", "ClampBackwardBackward0", ("g", "a"),
    "g if (a >= min and a <= max) else 0.0",
    lambda g, a, min, max: np.where((a >= min) & (a <= max), g, np.zeros_like(g)),
    lambda g, ins, out, p, n: (clamp_backward(g, ins[1], p["min"], p["max"]) if n[0] else None,
                               None),
    params=("min", "max"), save=(1,), samples=S.clamp_backward)


# ============================================================== public functions
def _t(x):
    return type(x) is Tensor


def add(input, other, *, alpha=None) -> Tensor:
    """``input + alpha * other`` with broadcasting."""
    if alpha is not None and alpha != 1:
        other = mul(other, alpha) if _t(other) else other * alpha
    if not _t(input):
        return binary(ADD, other, input)
    return binary(ADD, input, other)


def sub(input, other, *, alpha=None) -> Tensor:
    """``input - alpha * other``."""
    if alpha is not None and alpha != 1:
        other = mul(other, alpha) if _t(other) else other * alpha
    if not _t(input):
        return binary(RSUB, other, input)
    return binary(SUB, input, other)


def rsub(input, other, *, alpha=None) -> Tensor:
    """``other - input``."""
    if alpha is not None and alpha != 1:
        input = mul(input, alpha)
    return binary(RSUB, input, other, {"tensor_other": True} if _t(other) else None)


def mul(input, other) -> Tensor:
    """Element-wise product."""
    if not _t(input):
        return binary(MUL, other, input)
    return binary(MUL, input, other)


def div(input, other, *, rounding_mode=None) -> Tensor:
    """True division (``rounding_mode`` "trunc"/"floor" round the quotient, no gradient)."""
    if not _t(input):
        r = mul(reciprocal(other), input)
    else:
        r = binary(DIV, input, other)
    if rounding_mode is None:
        return r
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                         f"but found '{rounding_mode}'")
    from ..tensor import wrap

    f = np.trunc if rounding_mode == "trunc" else np.floor
    res = f(r._data)
    ints = [x for x in (input, other) if _t(x)]
    if all(x._data.dtype.kind in "iub" for x in ints):
        res = res.astype(np.result_type(*[x._data.dtype for x in ints]))
    return wrap(res)


true_divide = div


def neg(input: Tensor) -> Tensor:
    """``-input``."""
    if input._data.dtype == np.bool_:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return unary(NEG, input)


def abs(input: Tensor) -> Tensor:  # noqa: A001 - PyTorch's name
    """Absolute value."""
    return unary(ABS, input)


def sign(input: Tensor) -> Tensor:
    """-1, 0 or 1."""
    return unary(SIGN, input)


def exp(input: Tensor) -> Tensor:
    """``e ** input``."""
    return unary(EXP, input)


def expm1(input: Tensor) -> Tensor:
    """``exp(input) - 1``, accurate near 0."""
    return unary(EXPM1, input)


def log(input: Tensor) -> Tensor:
    """Natural logarithm."""
    return unary(LOG, input)


def log1p(input: Tensor) -> Tensor:
    """``log(1 + input)``, accurate near 0."""
    return unary(LOG1P, input)


def sqrt(input: Tensor) -> Tensor:
    """Square root."""
    return unary(SQRT, input)


def rsqrt(input: Tensor) -> Tensor:
    """``1 / sqrt(input)``."""
    return unary(RSQRT, input)


def reciprocal(input: Tensor) -> Tensor:
    """``1 / input``."""
    return unary(RECIPROCAL, input)


def _trig(op, input: Tensor) -> Tensor:
    # the vectorised sin/cos reduce arguments exactly only below ACCURATE_DOMAIN; beyond it
    # (|x| >= 6.6e6 in float32) NumPy's libm gives the right answer, so use it (integers are
    # checked as the float values the kernel would compute on)
    a = input._data
    if a.size:
        f = a if a.dtype.kind == "f" else a.astype(_default_float().np)
        if trig_out_of_domain(op.name, f):
            from ..tensor import wrap
            from .dispatch import record

            return record(op, wrap(_libm(op, f)), (input,), None)
    return unary(op, input)


def sin(input: Tensor) -> Tensor:
    """Sine."""
    return _trig(SIN, input)


def cos(input: Tensor) -> Tensor:
    """Cosine."""
    return _trig(COS, input)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return unary(TANH, input)


def sigmoid(input: Tensor) -> Tensor:
    """Logistic sigmoid ``1 / (1 + exp(-input))``."""
    return unary(SIGMOID, input)


def relu(input: Tensor) -> Tensor:
    """``max(input, 0)``."""
    return unary(RELU, input)


def pow(input, exponent) -> Tensor:  # noqa: A001 - PyTorch's name
    """``input ** exponent``; either may be a Python number (not both)."""
    if _t(input) and not _t(exponent):
        if isinstance(exponent, np.generic):
            exponent = exponent.item()
        if not isinstance(exponent, (int, float, bool)):
            exponent = _as_tensor(exponent)
            return binary(POW, input, exponent)
        if input._data.dtype.kind != "f" and (isinstance(exponent, float) or exponent < 0):
            if not isinstance(exponent, float):
                raise RuntimeError("Integers to negative integer powers are not allowed.")
            input = input.to(_default_float())
        return unary(POW_SCALAR, input, {"exponent": exponent})
    if not _t(input):
        if isinstance(input, np.generic):
            input = input.item()
        return unary(RPOW_SCALAR, exponent, {"base": input})
    return binary(POW, input, exponent)


def square(input: Tensor) -> Tensor:
    """``input ** 2``."""
    return pow(input, 2)


def _as_tensor(x):
    from .dispatch import as_tensor_arg

    return as_tensor_arg(x)


def _default_float():
    from ..dtypes import get_default_dtype

    return get_default_dtype()


def maximum(input: Tensor, other: Tensor) -> Tensor:
    """Element-wise maximum (NaN propagates)."""
    return binary(MAXIMUM, input, other)


def minimum(input: Tensor, other: Tensor) -> Tensor:
    """Element-wise minimum (NaN propagates)."""
    return binary(MINIMUM, input, other)


def clamp(input: Tensor, min=None, max=None) -> Tensor:  # noqa: A002 - PyTorch's names
    """Limit values to ``[min, max]``; bounds may be numbers or tensors."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if _t(min) or _t(max):
        r = input
        if min is not None:
            r = maximum(r, min if _t(min) else _as_tensor(min))
        if max is not None:
            r = minimum(r, max if _t(max) else _as_tensor(max))
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


def where(condition, input, other) -> Tensor:
    """``input`` where ``condition`` else ``other`` (either may be a number)."""
    if not _t(condition):
        condition = _as_tensor(condition)
    if condition._data.dtype != np.bool_:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{condition.dtype.name.capitalize()}"
        )
    return elementwise(WHERE, (condition, input, other))


def _compare(op, input, other):
    if not _t(input):
        input = _as_tensor(input)
    return binary(op, input, other)


def eq(input, other) -> Tensor:
    """``input == other`` element-wise (bool)."""
    return _compare(EQ, input, other)


def ne(input, other) -> Tensor:
    """``input != other`` element-wise (bool)."""
    return _compare(NE, input, other)


def lt(input, other) -> Tensor:
    """``input < other`` element-wise (bool)."""
    return _compare(LT, input, other)


def le(input, other) -> Tensor:
    """``input <= other`` element-wise (bool)."""
    return _compare(LE, input, other)


def gt(input, other) -> Tensor:
    """``input > other`` element-wise (bool)."""
    return _compare(GT, input, other)


def ge(input, other) -> Tensor:
    """``input >= other`` element-wise (bool)."""
    return _compare(GE, input, other)


def logical_and(input, other) -> Tensor:
    """Element-wise logical and (bool)."""
    return binary(LOGICAL_AND, input, other)


def logical_or(input, other) -> Tensor:
    """Element-wise logical or (bool)."""
    return binary(LOGICAL_OR, input, other)


def logical_xor(input, other) -> Tensor:
    """Element-wise logical xor (bool)."""
    return binary(LOGICAL_XOR, input, other)


def logical_not(input) -> Tensor:
    """Element-wise logical not (bool)."""
    return unary(LOGICAL_NOT, input)


def tanh_backward(grad: Tensor, output: Tensor) -> Tensor:
    """``grad * (1 - output ** 2)``: the gradient of tanh from its output."""
    return binary(TANH_BACKWARD, grad, output)


def sigmoid_backward(grad: Tensor, output: Tensor) -> Tensor:
    """``grad * output * (1 - output)``: the gradient of sigmoid from its output."""
    return binary(SIGMOID_BACKWARD, grad, output)


def threshold_backward(grad: Tensor, x: Tensor, threshold: float) -> Tensor:
    """``grad`` where ``x > threshold`` else 0."""
    return binary(THRESHOLD_BACKWARD, grad, x, {"threshold": threshold})


def pow_backward(grad: Tensor, a: Tensor, exponent: float) -> Tensor:
    """``grad * exponent * a ** (exponent - 1)`` (0 when ``exponent == 0``)."""
    return binary(POW_BACKWARD, grad, a, {"exponent": exponent})


def clamp_backward(grad: Tensor, a: Tensor, min: float, max: float) -> Tensor:  # noqa: A002
    """``grad`` where ``min <= a <= max`` else 0."""
    return binary(CLAMP_BACKWARD, grad, a, {"min": min, "max": max})
