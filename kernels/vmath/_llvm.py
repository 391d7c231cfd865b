"""LLVM-level building blocks that Numba does not expose: FMA, select, bit casts.

Each is a Numba ``@intrinsic``, so it is emitted in place as one LLVM instruction (or
intrinsic call) that the loop vectoriser widens: ``fma`` -> ``llvm.fma`` (vfmadd),
``select`` -> ``select`` (a blend; a Python conditional expression would go through
branches and rely on SimplifyCFG), ``as_int``/``as_float`` -> ``bitcast``. They are usable
only from jitted code.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import types
from numba.core.extending import intrinsic

_INT_OF = {types.float32: types.int32, types.float64: types.int64}


def _call_intrinsic(builder, name, args):
    fnty = ir.FunctionType(args[0].type, [a.type for a in args])
    fn = builder.module.declare_intrinsic(name, [args[0].type], fnty)
    return builder.call(fn, args)


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` with a single rounding (``llvm.fma``)."""
    if not (a == b == c and a in _INT_OF):
        return None

    def codegen(context, builder, sig, args):
        return _call_intrinsic(builder, "llvm.fma", list(args))

    return a(a, b, c), codegen


@intrinsic
def select(typingctx, cond, a, b):
    """``a if cond else b`` as one branch-free LLVM ``select``."""
    if not (isinstance(cond, types.Boolean) and a == b):
        return None

    def codegen(context, builder, sig, args):
        return builder.select(args[0], args[1], args[2])

    return a(cond, a, b), codegen


@intrinsic
def fabs(typingctx, x):
    """``|x|`` (``llvm.fabs``: clears the sign bit, NaN stays NaN)."""
    if x not in _INT_OF:
        return None

    def codegen(context, builder, sig, args):
        return _call_intrinsic(builder, "llvm.fabs", list(args))

    return x(x), codegen


@intrinsic
def copysign(typingctx, x, y):
    """``|x|`` with the sign bit of ``y`` (``llvm.copysign``)."""
    if not (x == y and x in _INT_OF):
        return None

    def codegen(context, builder, sig, args):
        return _call_intrinsic(builder, "llvm.copysign", list(args))

    return x(x, y), codegen


@intrinsic
def sqrt(typingctx, x):
    """Correctly rounded hardware square root (``llvm.sqrt`` -> vsqrtps/pd)."""
    if x not in _INT_OF:
        return None

    def codegen(context, builder, sig, args):
        return _call_intrinsic(builder, "llvm.sqrt", list(args))

    return x(x), codegen


@intrinsic
def rint(typingctx, x):
    """Round to the nearest integer, ties to even (``llvm.rint`` -> vroundps/pd)."""
    if x not in _INT_OF:
        return None

    def codegen(context, builder, sig, args):
        return _call_intrinsic(builder, "llvm.rint", list(args))

    return x(x), codegen


@intrinsic
def small_int_to_float(typingctx, i, like):
    """``i`` (|i| < 2**31) as a float of ``like``'s type, converted from 32 bits.

    AVX2 has no packed int64 -> float conversion; truncating first keeps it one vcvtdq2ps/pd.
    """
    if not (isinstance(i, types.Integer) and like in _INT_OF):
        return None

    def codegen(context, builder, sig, args):
        value = args[0]
        if value.type.width != 32:
            value = builder.trunc(value, ir.IntType(32)) if value.type.width > 32 \
                else builder.sext(value, ir.IntType(32))
        return builder.sitofp(value, context.get_value_type(like))

    return like(i, like), codegen


@intrinsic
def as_int(typingctx, x):
    """The IEEE bits of ``x`` as a signed integer of the same width."""
    if x not in _INT_OF:
        return None
    ity = _INT_OF[x]

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(ity.bitwidth))

    return ity(x), codegen


@intrinsic
def as_float(typingctx, bits, like):
    """The float of ``like``'s type whose IEEE bits are ``bits`` (truncated or extended).

    Numba widens int32 arithmetic to int64; truncating here lets LLVM narrow the whole
    integer chain back to 32-bit lanes.
    """
    if not (isinstance(bits, types.Integer) and like in _INT_OF):
        return None

    def codegen(context, builder, sig, args):
        width = _INT_OF[like].bitwidth
        value = args[0]
        if value.type.width > width:
            value = builder.trunc(value, ir.IntType(width))
        elif value.type.width < width:
            value = builder.sext(value, ir.IntType(width))
        return builder.bitcast(value, context.get_value_type(like))

    return like(bits, like), codegen


def _int_binop(op):
    """An intrinsic ``f(a, b)`` computing ``a op b`` at the width of integer ``a`` (``b``
    truncated or extended to it). Numba widens int32 arithmetic to int64; these keep the
    exponent/quadrant arithmetic of float32 code in 32-bit lanes (vpaddd, vpsrad, ...)."""

    @intrinsic
    def binop(typingctx, a, b):
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            lhs, rhs = args
            if rhs.type.width > lhs.type.width:
                rhs = builder.trunc(rhs, lhs.type)
            elif rhs.type.width < lhs.type.width:
                rhs = builder.sext(rhs, lhs.type)
            return getattr(builder, op)(lhs, rhs)

        return a(a, b), codegen

    return binop


iadd = _int_binop("add")
isub = _int_binop("sub")
iand = _int_binop("and_")
ixor = _int_binop("xor")
ishl = _int_binop("shl")
isar = _int_binop("ashr")  # arithmetic (sign-propagating) shift right
