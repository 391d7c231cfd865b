"""The kernel-math table: every function an op's scalar expression (``OpDef.expr``) may call.

The one list that the code generators, the kernel-math package and its tests read (importing
it loads neither Numba nor the math itself):

* ``FUNCTIONS``: the vectorisable transcendentals of :mod:`jitgrad.kernels.vmath`, generic
  (``tanh``) and per dtype (``tanh_f32``, ``tanh_f64``: what generated kernels call);
* ``SCALAR_HELPERS``: the NaN-propagating selections and the loop-invariant power of
  :mod:`jitgrad.kernels.scalar`, generic over the dtype.
"""

from __future__ import annotations

__all__ = ["FUNCTIONS", "SCALAR_HELPERS", "DTYPE_SUFFIXES", "EXPR_NAMES"]

FUNCTIONS: tuple[str, ...] = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "softplus",
                              "erf", "sin", "cos", "pow", "sqrt", "rsqrt")
SCALAR_HELPERS: tuple[str, ...] = ("maximum", "minimum", "pow_scalar")
#: NumPy dtype name -> the suffix of its implementations (``tanh_f32``)
DTYPE_SUFFIXES: dict[str, str] = {"float32": "f32", "float64": "f64"}
#: what an op's ``expr`` may call by name (besides ``abs``)
EXPR_NAMES: frozenset[str] = frozenset(FUNCTIONS + SCALAR_HELPERS)
