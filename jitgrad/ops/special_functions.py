"""Special functions (``torch.special``'s differentiable part): ``lgamma``, ``digamma``,
``polygamma``, ``erfc``, ``erfinv``, ``erfcx``, ``i0``, ``i0e``, ``i1``, ``i1e``, ``ndtri``
and ``log_ndtr`` as element-wise ops, and composites of them: ``mvlgamma`` (PyTorch's
``special.multigammaln``), ``ndtr``, ``entr``, ``xlog1py``.

The ops compute on the CPU with :mod:`jitgrad.kernels.special` (float64 inside, one rounding
to float32; float16 through float32) and on a GPU with CuPy's ``cupyx.scipy.special``; their
gradients are PyTorch's formulas (derivatives.yaml), written with these same ops, so they are
differentiable again. Accuracy (float64, against mpmath; tests/ops/test_special_functions.py
asserts it): within a few ulp, except near ``digamma``'s zeros (an absolute error of a few
1e-16 times the size of the terms: the recurrence's near 1.46, the reflection's below 0) and
``polygamma`` at negative arguments, where the Hurwitz zeta's terms cancel (tens of ulp).
"""

from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from . import samples as S
from .api import api
from .arithmetic import MUL
from .dispatch import as_tensor_arg, unary
from .elementwise_base import default_float, ew, unary_public
from .math_functions import ERF, LOG, LOG1P, exp, log, log1p, sign
from .registry import FLOAT
from .selection import WHERE, where
from .transcendental import zero_times_log

__all__ = ["lgamma", "digamma", "polygamma", "erfc", "erfinv", "erfcx", "i0", "i0e", "i1",
           "i1e", "ndtri", "log_ndtr", "ndtr", "mvlgamma", "entr", "xlog1py"]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT1_2 = math.sqrt(0.5)

#: op name -> the cupyx.scipy.special function computing it on a GPU
_CUPY_NAMES = {"lgamma": "gammaln", "digamma": "digamma", "polygamma": "polygamma",
               "erfc": "erfc", "erfinv": "erfinv", "erfcx": "erfcx", "i0": "i0", "i0e": "i0e",
               "i1": "i1", "i1e": "i1e", "ndtri": "ndtri", "log_ndtr": "log_ndtr"}


def _special_ref(name: str):
    """The forward of special function ``name`` on an array of any float dtype."""
    def ref(a, n=0):
        if not isinstance(a, np.ndarray | np.generic):  # a CuPy array
            from cupyx.scipy import special as cupy_special

            fn = getattr(cupy_special, _CUPY_NAMES[name])
            return fn(n, a) if name == "polygamma" else fn(a)
        from ..kernels.special import FUNCTIONS, special_map

        host = np.asarray(a)
        dt = host.dtype if host.dtype in (np.float32, np.float64) else np.dtype(np.float32)
        flat = np.ascontiguousarray(host, dtype=dt).reshape(-1)
        out = np.empty_like(flat)
        special_map(FUNCTIONS[name], int(n), flat, out)
        out = out.reshape(host.shape).astype(host.dtype, copy=False)
        # the simulator's device arrays are an ndarray subclass: the result is one too
        return out if type(a) is np.ndarray or not isinstance(a, np.ndarray) else \
            out.view(type(a))
    ref.__name__ = f"_{name}_ref"
    return ref


def _op(name: str, node: str, vjp, samples, *, save=(0,), save_out=False, params=()):
    return ew(name, node, ("a",), None, _special_ref(name), vjp, save=save,
              save_out=save_out, params=params, dtype_rule=FLOAT, samples=samples)


LGAMMA = _op("lgamma", "LgammaBackward0",
             lambda g, ins, out, p, n: (g * digamma(ins[0]),), S.unary_gamma)
DIGAMMA = _op("digamma", "DigammaBackward0",
              lambda g, ins, out, p, n: (g * polygamma(1, ins[0]),), S.unary_gamma)
POLYGAMMA = _op("polygamma", "PolygammaBackward0",
                lambda g, ins, out, p, n: (g * polygamma(p["n"] + 1, ins[0]),),
                S.polygamma, params=("n",))
ERFC = _op("erfc", "ErfcBackward0",
           lambda g, ins, out, p, n: (g * exp(-(ins[0] * ins[0])) * -_TWO_OVER_SQRT_PI,),
           S.unary)
ERFINV = _op("erfinv", "ErfinvBackward0",
             lambda g, ins, out, p, n: (g * exp(out * out) * _SQRT_PI_OVER_2,),
             S.unary_inside_1, save=(), save_out=True)
ERFCX = _op("erfcx", "SpecialErfcxBackward0",
            lambda g, ins, out, p, n: (g * (ins[0] * out * 2.0 - _TWO_OVER_SQRT_PI),),
            S.unary, save_out=True)
I0 = _op("i0", "I0Backward0", lambda g, ins, out, p, n: (g * i1(ins[0]),), S.unary)
I0E = _op("i0e", "SpecialI0EBackward0",
          lambda g, ins, out, p, n: (g * (i1e(ins[0]) - sign(ins[0]) * out),), S.unary,
          save_out=True)
I1 = _op("i1", "SpecialI1Backward0",
         lambda g, ins, out, p, n: (g * _at_zero(ins[0], i0(ins[0]) - out / ins[0]),),
         S.unary, save_out=True)
I1E = _op("i1e", "SpecialI1EBackward0",
          lambda g, ins, out, p, n: (g * _at_zero(
              ins[0], i0e(ins[0]) - out * (sign(ins[0]) + 1.0 / ins[0])),), S.unary,
          save_out=True)
NDTRI = _op("ndtri", "SpecialNdtriBackward0",
            lambda g, ins, out, p, n: (g * exp(out * out * 0.5) * _SQRT_2PI,),
            S.unary_probability, save=(), save_out=True)
LOG_NDTR = _op("log_ndtr", "SpecialLogNdtrBackward0",
               lambda g, ins, out, p, n: (
                   g * exp(ins[0] * ins[0] * -0.5 - out) * (1.0 / _SQRT_2PI),),
               S.unary_wide, save_out=True)


def _at_zero(x: Tensor, value: Tensor) -> Tensor:
    """``value``, and 1/2 where ``x`` is 0 (the limit of i1's and i1e's derivatives)."""
    return where(x == 0.0, 0.5, value)


# ---------------------------------------------------------------------- public functions
lgamma = unary_public(LGAMMA, ("lgamma",), "``log(|Gamma(input)|)`` (inf at the poles).")
digamma = unary_public(DIGAMMA, ("digamma",),
                       "The logarithmic derivative of Gamma, ``psi(input)``.")
erfc = unary_public(ERFC, ("erfc",), "The complementary error function ``1 - erf(input)``.")
erfinv = unary_public(ERFINV, ("erfinv",),
                      "The inverse error function (NaN outside [-1, 1], +-inf at +-1).")
i0 = unary_public(I0, ("i0",),
                  "The modified Bessel function of the first kind of order 0.")


@api(ERFCX)
def erfcx(input: Tensor) -> Tensor:
    """The scaled complementary error function ``exp(input**2) * erfc(input)``."""
    return unary(ERFCX, as_tensor_arg(input))


@api(I0E)
def i0e(input: Tensor) -> Tensor:
    """``exp(-|input|) * i0(input)``, without overflow."""
    return unary(I0E, as_tensor_arg(input))


@api(I1)
def i1(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 1."""
    return unary(I1, as_tensor_arg(input))


@api(I1E)
def i1e(input: Tensor) -> Tensor:
    """``exp(-|input|) * i1(input)``, without overflow."""
    return unary(I1E, as_tensor_arg(input))


@api(NDTRI)
def ndtri(input: Tensor) -> Tensor:
    """The inverse of the standard normal CDF (the argument ``x`` with ``ndtr(x) = input``;
    NaN outside [0, 1])."""
    return unary(NDTRI, as_tensor_arg(input))


@api(LOG_NDTR)
def log_ndtr(input: Tensor) -> Tensor:
    """The log of the standard normal CDF, accurate far into both tails."""
    return unary(LOG_NDTR, as_tensor_arg(input))


@api(POLYGAMMA, DIGAMMA, method="polygamma", inplace="polygamma_", export="polygamma")
def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of :func:`digamma` (``n = 0`` is digamma itself)."""
    if isinstance(n, Tensor) or not isinstance(input, Tensor):
        # Tensor.polygamma(n) and torch's argument order: polygamma(n, input)
        n, input = (input, n) if isinstance(n, Tensor) else (n, input)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not "
                        f"{type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = as_tensor_arg(input)
    if n == 0:
        return unary(DIGAMMA, x)
    return unary(POLYGAMMA, x, {"n": int(n)})


@api(ERF, MUL)
def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF, ``(1 + erf(input / sqrt(2))) / 2``."""
    x = _floating(as_tensor_arg(input))
    return (x * _SQRT1_2).erf() * 0.5 + 0.5


@api(LGAMMA, method="mvlgamma", inplace="mvlgamma_", export="mvlgamma")
def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma function of dimension ``p``:
    ``p (p - 1) / 4 log(pi) + sum_i lgamma(input - i / 2)``, ``i = 0 .. p - 1`` (defined
    for elements greater than ``(p - 1) / 2``; like PyTorch, others are not checked)."""
    x = _floating(as_tensor_arg(input))
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"mvlgamma(): argument 'p' (position 2) must be int, not "
                        f"{type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    from .movement import stack

    shifts = [x - (i / 2.0) for i in range(int(p))]
    terms = lgamma(stack(shifts, -1)).sum(-1)
    return terms + p * (p - 1) / 4.0 * math.log(math.pi)


@api(LOG, WHERE)
def entr(input: Tensor) -> Tensor:
    """Element-wise entropy ``-input * log(input)``: 0 at 0, -inf below 0 (the gradient is
    0 there; PyTorch's is inf at 0 and NaN below: a known difference)."""
    x = _floating(as_tensor_arg(input))
    safe = where(x > 0.0, x, 1.0)
    body = -x * log(safe)
    return where(x > 0.0, body, where(x == 0.0, 0.0, where(x < 0.0, float("-inf"), x)))


@api(LOG1P, MUL, WHERE)
def xlog1py(input, other) -> Tensor:
    """``input * log1p(other)``, and 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    x = input if isinstance(input, Tensor) else as_tensor_arg(input)
    y = other if isinstance(other, Tensor) else as_tensor_arg(other)
    if not y.dtype.is_floating_point:
        y = y.to(x.dtype if x.dtype.is_floating_point else default_float())
    return zero_times_log(x, y, log1p, lower=-1.0, neutral=0.0)


def _floating(t: Tensor) -> Tensor:
    return t if t.dtype.is_floating_point else t.to(default_float())
