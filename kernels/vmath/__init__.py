"""Branch-free, vectorisable transcendental functions for Numba kernels.

Numba lowers ``np.exp``/``math.tanh`` to scalar libm calls, which stop LLVM from
vectorising the loop around them. These functions are plain arithmetic, selects and bit
manipulation, so a loop calling them compiles to packed AVX code::

    from numba import njit
    from jitgrad.kernels.vmath import KERNEL_FASTMATH, tanh

    @njit(fastmath=KERNEL_FASTMATH)
    def tanh_all(x, out):
        for i in range(x.size):
            out[i] = tanh(x[i])

Each public function dispatches at compile time on its argument type (float32 -> the
float32 implementation, every other real type -> float64; ``pow`` is float32 when both
operands are float32, or one is float32 and the other an integer). The per-dtype
implementations are exported too (``exp_f32``, ``exp_f64``, ...). From plain Python the
same implementations run on NumPy/Python scalars (compiled on first use). Importing this
package compiles nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba.core import types
from numba.extending import overload

from . import f32 as _f32
from . import f64 as _f64
from .bounds import ACCURATE_DOMAIN, FUNCTIONS, ULP_BOUNDS, describe

#: ``exp_f32``, ``exp_f64``, ...: every function of the kernel-math table, per dtype
_IMPLS = {f"{name}_{tag}": getattr(mod, f"{name}_{tag}")
          for name in FUNCTIONS for tag, mod in (("f32", _f32), ("f64", _f64))}
globals().update(_IMPLS)
_pow_f32, _pow_f64 = _IMPLS["pow_f32"], _IMPLS["pow_f64"]

# Fastmath flags for the hand-written kernels that call these functions (softmax, layer norm,
# losses, convolution: generated kernels use none, see jitgrad/compiler/render_cpu.py).
# "contract" lets LLVM fuse a*b + c into FMAs, "reassoc" lets it vectorise float reductions.
# No nnan/ninf/nsz: NaN, inf and -0 must keep NumPy semantics. The flags apply only to the
# caller's own instructions; the functions here are compiled separately without fastmath
# and keep their exact rounding after LLVM inlines them.
KERNEL_FASTMATH: set[str] = {"contract", "reassoc"}

_REAL = (types.Float, types.Integer, types.Boolean)

_UNARY_DOCS = {
    "exp": ("e**x", "exp(np.float32(1.0))", "2.7182817"),
    "expm1": ("e**x - 1, accurate near 0", 'f"{expm1(1e-10):.10e}"', "1.0000000001e-10"),
    "log": ("Natural logarithm", "log(np.float32(2.0))", "0.6931472"),
    "log1p": ("log(1 + x), accurate near 0", 'f"{log1p(1e-10):.10e}"', "9.9999999995e-11"),
    "tanh": ("Hyperbolic tangent", 'f"{tanh(np.float32(0.5)):.6f}"', "0.462117"),
    "sigmoid": ("Logistic function 1/(1 + e**-x)", "sigmoid(0.0)", "0.5"),
    "softplus": ("log(1 + e**x), without overflow", "softplus(0.0)", "0.6931471805599453"),
    "erf": ("Error function", 'f"{erf(np.float32(0.5)):.6f}"', "0.520500"),
    "sin": ("Sine", 'f"{sin(np.float32(1.0)):.6f}"', "0.841471"),
    "cos": ("Cosine", "cos(0.0)", "1.0"),
    "sqrt": ("Square root (correctly rounded)", "sqrt(np.float32(2.0))", "1.4142135"),
    "rsqrt": ("1/sqrt(x)", "rsqrt(4.0)", "0.5"),
}


def _doc(name: str, summary: str, call: str, shown: str) -> str:
    return (f"{summary}, for float32 or float64 scalars, in jitted or plain Python code.\n\n"
            f"{describe(name)}\n\n"
            f">>> import numpy as np\n>>> from jitgrad.kernels.vmath import {name}\n"
            f">>> print({call})\n{shown}\n")


def _is_f32(value) -> bool:
    return isinstance(value, np.float32) or getattr(value, "dtype", None) == np.float32


def _unary(name: str, impl32: Callable, impl64: Callable) -> Callable:
    def stub(x):
        return np.float32(impl32(x)) if _is_f32(x) else impl64(x)

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = _doc(name, *_UNARY_DOCS[name])

    @overload(stub, inline="always")
    def _typed(x):
        if x == types.float32:
            return lambda x: impl32(x)
        if isinstance(x, _REAL):
            return lambda x: impl64(x)
        return None

    return stub


for _name in FUNCTIONS:  # the generic functions (pow: below, it has two operands)
    if _name != "pow":
        globals()[_name] = _unary(_name, _IMPLS[f"{_name}_f32"], _IMPLS[f"{_name}_f64"])


def _is_weak(value) -> bool:
    """A Python int/float, which NumPy 2 lets adopt the other operand's dtype."""
    return isinstance(value, int | float) and not isinstance(value, np.generic)


def pow(x, y):  # noqa: A001 - mirrors the operator's name
    if (_is_f32(x) and (_is_f32(y) or _is_weak(y))) or (_is_f32(y) and _is_weak(x)):
        return np.float32(_pow_f32(x, y))
    return _pow_f64(x, y)


pow.__doc__ = (
    "x**y with NumPy's (C99) special cases, for float32 or float64 scalars.\n\n"
    "float32 when both operands are float32, or one is and the other is a Python/integer\n"
    f"scalar; float64 otherwise. {describe('pow')}\n\n"
    ">>> import numpy as np\n>>> from jitgrad.kernels.vmath import pow\n"
    ">>> print(pow(np.float32(2.0), np.float32(10.0)), pow(-8.0, 3.0), pow(-8.0, 1 / 3))\n"
    "1024.0 -512.0 nan\n"
)


@overload(pow, inline="always")
def _pow_typed(x, y):
    if not (isinstance(x, _REAL) and isinstance(y, _REAL)):
        return None
    if (x == types.float32 and (y == types.float32 or isinstance(y, types.Integer))) or (
        y == types.float32 and isinstance(x, types.Integer)
    ):
        return lambda x, y: _pow_f32(x, y)
    return lambda x, y: _pow_f64(x, y)


__all__ = [*FUNCTIONS, "KERNEL_FASTMATH", "FUNCTIONS", "ULP_BOUNDS", "ACCURATE_DOMAIN",
           *(f"{n}_{s}" for n in FUNCTIONS for s in ("f32", "f64"))]
