"""Element-wise ops, declared by job in four modules: :mod:`.arithmetic` (add, sub, mul, div,
neg, pow...), :mod:`.math_functions` (exp, log, sqrt, sin, tanh, relu...), :mod:`.selection`
(maximum, clamp, where, masked_fill, comparisons, logical ops) and :mod:`.fused_backward`
(``tanh_backward``...). Each op is declared once with its scalar expression (compiled into
kernels by the compiler's generator), NumPy reference and VJP rule.

This module gathers them under the import path code has always used
(``from jitgrad.ops.elementwise import tanh``, ``elementwise.ADD``).
"""

from __future__ import annotations

from .arithmetic import (
    ADD,
    DIV,
    MUL,
    NEG,
    POW,
    POW_SCALAR,
    RPOW_SCALAR,
    RSUB,
    SUB,
    add,
    div,
    mul,
    neg,
    pow,
    rsub,
    square,
    sub,
    true_divide,
)
from .dispatch import binary, unary
from .fused_backward import (
    CLAMP_BACKWARD,
    POW_BACKWARD,
    SIGMOID_BACKWARD,
    TANH_BACKWARD,
    THRESHOLD_BACKWARD,
    clamp_backward,
    pow_backward,
    sigmoid_backward,
    tanh_backward,
    threshold_backward,
)
from .math_functions import (
    ABS,
    COS,
    EXP,
    EXPM1,
    LOG,
    LOG1P,
    RECIPROCAL,
    RELU,
    RSQRT,
    SIGMOID,
    SIGN,
    SIN,
    SQRT,
    TANH,
    abs,
    cos,
    exp,
    expm1,
    log,
    log1p,
    reciprocal,
    relu,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    tanh,
)
from .selection import (
    CLAMP,
    EQ,
    GE,
    GT,
    LE,
    LOGICAL_AND,
    LOGICAL_NOT,
    LOGICAL_OR,
    LOGICAL_XOR,
    LT,
    MASKED_FILL,
    MAXIMUM,
    MINIMUM,
    NE,
    WHERE,
    clamp,
    clip,
    eq,
    ge,
    gt,
    le,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    masked_fill,
    maximum,
    minimum,
    ne,
    where,
)

__all__ = [
    "add", "sub", "rsub", "mul", "div", "true_divide", "neg", "abs", "exp", "log", "sqrt",
    "sin", "cos", "tanh", "sigmoid", "relu", "maximum", "minimum", "clamp", "clip", "where",
    "pow", "square", "reciprocal", "rsqrt", "sign", "eq", "ne", "lt", "le", "gt", "ge",
    "tanh_backward", "sigmoid_backward", "threshold_backward", "pow_backward",
    "clamp_backward", "log1p", "expm1", "masked_fill", "logical_and", "logical_or",
    "logical_xor", "logical_not",
    # the op declarations and the dispatch entry points, for code that used them from here
    "ADD", "SUB", "RSUB", "MUL", "DIV", "NEG", "POW", "POW_SCALAR", "RPOW_SCALAR", "ABS",
    "SIGN", "EXP", "EXPM1", "LOG", "LOG1P", "SQRT", "RSQRT", "RECIPROCAL", "SIN", "COS",
    "TANH", "SIGMOID", "RELU", "MAXIMUM", "MINIMUM", "CLAMP", "WHERE", "MASKED_FILL", "EQ",
    "NE", "LT", "LE", "GT", "GE", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR", "LOGICAL_NOT",
    "TANH_BACKWARD", "SIGMOID_BACKWARD", "THRESHOLD_BACKWARD", "POW_BACKWARD",
    "CLAMP_BACKWARD", "binary", "unary",
]
