"""The kernel math of generated CUDA kernels: every name of ``kernels/mathtable.py``
(``tanh_f32``, ``maximum``...) as a CUDA device function.

Transcendentals are libdevice's, through ``math.*`` (jitgrad's vectorised ``vmath`` is CPU
code: NVVM rejects it), each result cast to the argument's dtype: under the simulator
``math.tanh`` of a float32 returns a Python float, and the cast keeps the simulated kernel in
float32 as the compiled one is. ``sigmoid`` and ``softplus`` are written as vmath writes them
(no overflow for any input; NaN passes through). Their accuracy on a GPU is libdevice's
(documented in ``docs/kernel_math.md``: at most 2 ulp for the float32 functions used here,
1-2 ulp in float64), not vmath's, so CUDA results are not bit-identical to CPU ones for
transcendental ops; arithmetic, comparisons, selections and sums are.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ..kernels.mathtable import DTYPE_SUFFIXES, FUNCTIONS

__all__ = sorted(f"{f}_{s}" for f in FUNCTIONS + ("pow_scalar", "mul")
                 for s in DTYPE_SUFFIXES.values()) + ["maximum", "minimum"]

_device = cuda.jit(device=True, inline=True)
_SIMULATED = "simulator" in cuda.jit.__module__
if _SIMULATED:
    # the simulator runs kernels as Python: NumPy's scalar functions keep the dtype and
    # give IEEE results (inf, NaN) where ``math`` raises
    from numpy import cos as _cos
    from numpy import exp as _exp
    from numpy import expm1 as _expm1
    from numpy import log as _log
    from numpy import log1p as _log1p
    from numpy import power as _pow
    from numpy import sin as _sin
    from numpy import sqrt as _sqrt
    from numpy import tanh as _tanh

    def _erf(x):
        return math.erf(x)

    def _fmul_rn(a, b):
        return np.float32(np.float32(a) * np.float32(b))

    def _dmul_rn(a, b):
        return np.float64(np.float64(a) * np.float64(b))
else:  # libdevice, through Numba's math lowering
    from math import cos as _cos
    from math import erf as _erf
    from math import exp as _exp
    from math import expm1 as _expm1
    from math import log as _log
    from math import log1p as _log1p
    from math import pow as _pow
    from math import sin as _sin
    from math import sqrt as _sqrt
    from math import tanh as _tanh

    from numba.cuda.libdevice import dmul_rn as _dmul_rn
    from numba.cuda.libdevice import fmul_rn as _fmul_rn


@_device
def maximum(a, b):
    """Larger of ``a`` and ``b``; NaN if either is NaN."""
    return a if (a > b or a != a) else b


@_device
def minimum(a, b):
    """Smaller of ``a`` and ``b``; NaN if either is NaN."""
    return a if (a < b or a != a) else b


def _family(F):
    """The math functions of one float type ``F`` (np.float32 or np.float64)."""
    one = F(1.0)
    zero = F(0.0)
    _mul_rn = _fmul_rn if F is np.float32 else _dmul_rn

    def mul(a, b):
        """``a * b`` rounded once and never contracted into an FMA with a later add
        (libdevice's ``__nv_fmul_rn``/``__nv_dmul_rn``): the CPU's rounding of ``a * b + c``."""
        return _mul_rn(a, b)
    if not _SIMULATED:  # (the simulator calls it as plain Python: a device function's
        mul = _device(mul)  # call there swaps modules, per element, per product)

    @_device
    def exp(x):
        return F(_exp(x))

    @_device
    def expm1(x):
        return F(_expm1(x))

    @_device
    def log(x):
        return F(_log(x))

    @_device
    def log1p(x):
        return F(_log1p(x))

    @_device
    def tanh(x):
        return F(_tanh(x))

    @_device
    def sigmoid(x):
        e = F(_exp(-abs(x)))
        return (one if x >= zero else e) / (one + e)

    @_device
    def softplus(x):
        if x != x:
            return x
        return (x if x > zero else zero) + F(_log1p(F(_exp(-abs(x)))))

    @_device
    def erf(x):
        return F(_erf(x))

    @_device
    def sin(x):
        return F(_sin(x))

    @_device
    def cos(x):
        return F(_cos(x))

    @_device
    def pow_(a, b):
        return F(_pow(a, b))

    @_device
    def sqrt(x):
        return F(_sqrt(x))

    @_device
    def rsqrt(x):
        return one / F(_sqrt(x))

    @_device
    def pow_scalar(a, e):
        """``a ** e`` for a loop-invariant exponent, with the fast paths of the CPU's
        ``kernels/scalar.pow_scalar`` (2, 3 -> products, +-0.5 -> (r)sqrt, -1, -2 ->
        reciprocals), so CPU and CUDA agree where those apply."""
        if e == 2.0:
            return mul(a, a)
        if e == 3.0:
            return mul(mul(a, a), a)
        if e == 1.0:
            return a
        if e == 0.5:
            return F(_sqrt(a))
        if e == -0.5:
            return one / F(_sqrt(a))
        if e == -1.0:
            return one / a
        if e == -2.0:
            return one / mul(a, a)
        return F(_pow(a, e))

    return {"exp": exp, "expm1": expm1, "log": log, "log1p": log1p, "tanh": tanh,
            "sigmoid": sigmoid, "softplus": softplus, "erf": erf, "sin": sin, "cos": cos,
            "pow": pow_, "sqrt": sqrt, "rsqrt": rsqrt, "pow_scalar": pow_scalar, "mul": mul}


for _suffix, _F in (("f32", np.float32), ("f64", np.float64)):
    for _name, _fn in _family(_F).items():
        globals()[f"{_name}_{_suffix}"] = _fn
