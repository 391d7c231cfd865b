"""Special functions (``torch.special``'s differentiable part): ``lgamma``, ``digamma``,
``polygamma``, ``erfc``, ``erfinv``, ``erfcx``, ``i0``, ``i0e``, ``i1``, ``i1e``, ``ndtri``
and ``log_ndtr`` as element-wise ops, the two-argument ``zeta`` (Hurwitz's) and ``igamma`` /
``igammac`` (``special.gammainc`` / ``gammaincc``, differentiable in their second argument
only, as PyTorch's: the first raises PyTorch's "derivative ... is not implemented"), and
composites: ``mvlgamma`` (PyTorch's ``special.multigammaln``), ``ndtr``, ``entr``,
``xlog1py``. (The Bessel and Airy functions and the polynomials, which PyTorch does not
differentiate, are in :mod:`.bessel_polynomials`.)

The ops compute on the CPU with :mod:`jitgrad.kernels.special` (float64 inside, one rounding
to float32; float16 through float32) and on a GPU with CuPy's ``cupyx.scipy.special``; their
gradients are PyTorch's formulas (derivatives.yaml), written with these same ops, so they are
differentiable again. Accuracy (float64, against mpmath; tests/ops/test_special_functions.py
asserts it): within a few ulp, except near ``digamma``'s zeros (an absolute error of a few
1e-16 times the size of the terms: the recurrence's near 1.46, the reflection's below 0) and
``polygamma`` at negative arguments, where the Hurwitz zeta's terms cancel (tens of ulp);
``zeta`` within 4 ulp (16 for ``q < 0``, where its terms cancel), ``igamma`` / ``igammac``
within 12 ulp for ``a < 171`` and from ``a = 3e5`` (Temme's expansion), and between those
within ``8 + 5 |log(result)|`` ulp (the exponent of ``x**a e**-x / Gamma(a)`` rounds:
tests/ops/test_special_extended.py asserts these).
"""

from __future__ import annotations

import math

import numpy as np

from ..devices import array_namespace
from ..dtypes import float16, result_type
from ..tensor import Tensor
from . import samples as S
from .api import api
from .arithmetic import MUL
from .dispatch import as_tensor_arg, binary, unary
from .elementwise_base import default_float, ew, unary_public
from .integer_ops import require_tensor
from .math_functions import ERF, exp, log, sign
from .registry import FLOAT
from .selection import where
from .transcendental import float_operands, zero_times_log_op

__all__ = ["lgamma", "digamma", "polygamma", "erfc", "erfinv", "erfcx", "i0", "i0e", "i1",
           "i1e", "ndtri", "log_ndtr", "ndtr", "mvlgamma", "entr", "xlog1py", "zeta", "igamma",
           "igammac", "gammainc", "gammaincc"]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT1_2 = math.sqrt(0.5)

#: op name -> the cupyx.scipy.special function computing it on a GPU (ops missing here, or
#: missing from the installed CuPy, take a host round trip there: see :func:`special_ref`)
_CUPY_NAMES = {"lgamma": "gammaln", "digamma": "digamma", "polygamma": "polygamma",
               "erfc": "erfc", "erfinv": "erfinv", "erfcx": "erfcx", "i0": "i0", "i0e": "i0e",
               "i1": "i1", "i1e": "i1e", "ndtri": "ndtri", "log_ndtr": "log_ndtr",
               "zeta": "zeta", "igamma": "gammainc", "igammac": "gammaincc",
               "bessel_j0": "j0", "bessel_j1": "j1", "bessel_y0": "y0", "bessel_y1": "y1",
               "modified_bessel_i0": "i0", "modified_bessel_i1": "i1",
               "modified_bessel_k0": "k0", "modified_bessel_k1": "k1",
               "scaled_modified_bessel_k0": "k0e", "scaled_modified_bessel_k1": "k1e"}


def special_ref(name: str):
    """The forward of special function ``name`` (one or two operands: arrays of any dtype,
    or numbers, broadcast together; the result has their float dtype, or float32): the CPU
    kernels of :mod:`jitgrad.kernels.special`, :mod:`~jitgrad.kernels.bessel` and
    :mod:`~jitgrad.kernels.orthopoly` on host arrays (and on the CUDA simulator's, which are
    host memory); ``cupyx.scipy.special`` on a GPU where CuPy has the function
    (:data:`_CUPY_NAMES`), else a host round trip: the operands copied to the host, the CPU
    kernel, the result copied back (``spherical_bessel_j0``, ``airy_ai`` and the orthogonal
    polynomials, whose PyTorch definitions CuPy does not have)."""
    def ref(*operands, n=0):
        if any(not isinstance(o, np.ndarray | np.generic | int | float) for o in operands):
            return _on_gpu(name, operands, n)
        return _on_host(name, operands, n)
    ref.__name__ = f"_{name}_ref"
    return ref


def _on_gpu(name: str, operands: tuple, n: int):
    """``name`` on CuPy arrays (and numbers)."""
    from cupyx.scipy import special as cupy_special

    fn = getattr(cupy_special, _CUPY_NAMES.get(name, ""), None)
    if fn is not None:
        return fn(n, *operands) if name == "polygamma" else fn(*operands)
    from ..cuda.runtime import to_device
    from ..devices import to_host

    return to_device(_on_host(name, tuple(to_host(o) for o in operands), n))


def _on_host(name: str, operands: tuple, n: int) -> np.ndarray:
    """``name`` on host arrays and numbers, by its CPU kernel (float64 inside)."""
    from ..kernels import bessel, orthopoly, special

    arrays = [np.asarray(o) for o in operands]
    # (a Python number has no say in the dtype, as in PyTorch's promotion)
    floats = [a.dtype for a, o in zip(arrays, operands)
              if a.dtype.kind == "f" and isinstance(o, np.ndarray | np.generic)]
    out_dt = np.result_type(*floats) if floats else np.dtype(np.float32)
    dt = out_dt if out_dt in (np.float32, np.float64) else np.dtype(np.float32)
    if len(arrays) > 1:
        arrays = np.broadcast_arrays(*arrays)
    flat = [np.ascontiguousarray(a, dtype=dt).reshape(-1) for a in arrays]
    out = np.empty(arrays[0].shape, dt)
    res = out.reshape(-1)
    if name in special.FUNCTIONS:
        special.special_map(special.FUNCTIONS[name], int(n), flat[0], res)
    elif name in special.FUNCTIONS2:
        special.special_map2(special.FUNCTIONS2[name], flat[0], flat[1], res)
    elif name in bessel.BESSEL:
        bessel.bessel_map(bessel.BESSEL[name], flat[0], res)
    else:
        orthopoly.polynomial_map(orthopoly.POLYNOMIALS[name], flat[0], flat[1], res)
    out = out.astype(out_dt, copy=False)
    # the simulator's device arrays are an ndarray subclass: the result is one too
    for o in operands:
        if isinstance(o, np.ndarray) and type(o) is not np.ndarray:
            return out.view(type(o))
    return out


def _op(name: str, node: str, vjp, samples, *, save=(0,), save_out=False, params=()):
    return ew(name, node, ("a",), None, special_ref(name), vjp, save=save,
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


# ------------------------------------------------------------ two-argument functions
def _zeta_node(p) -> str:
    """PyTorch's node of ``special_zeta``'s overloads: (Tensor, Tensor) is 0, (Scalar,
    Tensor) 1, (Tensor, Scalar) 2."""
    return f"SpecialZetaBackward{p.get('overload', 0) if p else 0}"


def _zeta_vjp(g, ins, out, p, n):
    """``d/dq zeta(x, q) = -x zeta(x + 1, q)``; none in ``x``, as PyTorch's
    (``not_implemented("zeta")``)."""
    x, q = ins
    if n[0]:
        raise NotImplementedError("the derivative for 'zeta' is not implemented.")
    return (None, g * -x * zeta(x + 1.0, q))


def _incomplete_gamma_vjp(sign: float, name: str):
    """``d/dx P(a, x) = -d/dx Q(a, x) = exp((a - 1) log(x) - x - lgamma(a))``; none in
    ``a``, as PyTorch's. An integer ``a`` enters ``lgamma`` in the gradient's dtype
    (PyTorch's takes it in float32, its default: ~1e-7 relative in a float64 gradient)."""
    def vjp(g, ins, out, p, n):
        a, x = ins
        if n[0]:
            raise NotImplementedError(f"the derivative for '{name}: input' is not "
                                      f"implemented.")
        if not a.dtype.is_floating_point:
            a = a.to(g.dtype)
        density = exp((a - 1.0) * log(x) - x - lgamma(a))
        return (None, g * density if sign > 0 else -(g * density))
    return vjp


def _binary(name: str, node, vjp, samples):
    return ew(name, node, ("a", "b"), None, special_ref(name), vjp, save=(0, 1),
              dtype_rule=FLOAT, samples=samples)


ZETA = _binary("zeta", _zeta_node, _zeta_vjp, S.zeta)
IGAMMA = _binary("igamma", "IgammaBackward0", _incomplete_gamma_vjp(1.0, "igamma"),
                 S.incomplete_gamma)
IGAMMAC = _binary("igammac", "IgammacBackward0", _incomplete_gamma_vjp(-1.0, "igammac"),
                  S.incomplete_gamma)


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


def _entr_ref(a):
    xp = array_namespace(a)
    with np.errstate(all="ignore"):
        body = -a * xp.log(a)
    return xp.where(a > 0, body, xp.where(a < 0, -xp.inf, a * 0 + 0)).astype(a.dtype,
                                                                          copy=False)


# (-inf below 0 as log(-0.0): an expr has no inf literal; a * 0.0 + 0.0: 0 at +-0, NaN at NaN)
ENTR = ew("entr", "SpecialEntrBackward0", ("a",),
          "-a * log(a) if a > 0.0 else "
          "(log(maximum(a, -1.0) * 0.0) if a < 0.0 else a * 0.0 + 0.0)", _entr_ref,
          lambda g, ins, out, p, n: (g * -(log(ins[0]) + 1.0),), save=(0,),
          dtype_rule=FLOAT, samples=S.unary_positive)


@api(ENTR)
def entr(input: Tensor) -> Tensor:
    """Element-wise entropy ``-input * log(input)``: 0 at 0, -inf below 0; the gradient is
    PyTorch's ``-(1 + log(input))`` everywhere (inf at 0, NaN below)."""
    return unary(ENTR, _floating(as_tensor_arg(input)))


XLOG1PY = zero_times_log_op("xlog1py", "SpecialXlog1PyBackward0", "log1p", -1.0)


@api(XLOG1PY)
def xlog1py(input, other) -> Tensor:
    """``input * log1p(other)``, and 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    return binary(XLOG1PY, *float_operands(input, other, "xlog1py_cpu"))


@api(ZETA)
def zeta(input, other) -> Tensor:
    """The Hurwitz zeta function ``sum((other + k) ** -input for k >= 0)`` (``input`` the
    exponent ``x``, ``other`` the shift ``q``; either may be a number): inf at ``x = 1`` and
    at ``q = 0, -1, ...``, NaN for ``x < 1`` and for ``q < 0`` with a non-integer ``x``.
    Differentiable in ``q`` only (PyTorch has no derivative in ``x``)."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"special_zeta() received an invalid combination of arguments - got "
                        f"({type(input).__name__}, {type(other).__name__}), but expected one "
                        f"of:")
    x = input if isinstance(input, Tensor) or _is_number(input) else as_tensor_arg(input)
    q = other if isinstance(other, Tensor) or _is_number(other) else \
        as_tensor_arg(other, "other")
    check_not_half("zeta", x, q)
    overload = 1 if not isinstance(x, Tensor) else 2 if not isinstance(q, Tensor) else 0
    return binary(ZETA, x, q, {"overload": overload} if overload else None)


@api(IGAMMA, method="igamma", inplace="igamma_", export="igamma")
def igamma(input: Tensor, other: Tensor) -> Tensor:
    """The regularized lower incomplete gamma function ``P(input, other)`` (``a``, ``x``):
    ``gamma(a, x) / Gamma(a)`` (``torch.special.gammainc``). Differentiable in ``x`` only
    (PyTorch has no derivative in ``a``)."""
    return _incomplete_gamma(IGAMMA, "igamma", input, other)


@api(IGAMMAC, method="igammac", inplace="igammac_", export="igammac")
def igammac(input: Tensor, other: Tensor) -> Tensor:
    """The regularized upper incomplete gamma function ``Q(input, other) = 1 - P``
    (``torch.special.gammaincc``). Differentiable in ``x`` (``other``) only."""
    return _incomplete_gamma(IGAMMAC, "igammac", input, other)


@api(IGAMMA)
def gammainc(input: Tensor, other: Tensor) -> Tensor:
    """``torch.special.gammainc``: :func:`igamma`."""
    return _incomplete_gamma(IGAMMA, "special_gammainc", input, other)


@api(IGAMMAC)
def gammaincc(input: Tensor, other: Tensor) -> Tensor:
    """``torch.special.gammaincc``: :func:`igammac`."""
    return _incomplete_gamma(IGAMMAC, "special_gammaincc", input, other)


def _incomplete_gamma(op, fn: str, input, other) -> Tensor:
    """``op`` of two tensors (PyTorch's errors for a number, and for two integer tensors:
    its kernels take floating dtypes only)."""
    require_tensor(fn, "input", 1, input)
    require_tensor(fn, "other", 2, other)
    dt = result_type(input, other)
    if not dt.is_floating_point:
        where = "cpu" if input.device.type == "cpu" else "cuda"
        raise NotImplementedError(f"\"{op.name}_{where}\" not implemented for "
                                  f"'{dt.tensor_type[:-len('Tensor')]}'")
    return binary(op, input, other)


def check_not_half(name: str, *args) -> None:
    """PyTorch's error for a special function its kernels do not compute in half precision
    (zeta, the Bessel functions, the polynomials): the operands' result dtype float16."""
    if result_type(*args) == float16:
        t = next(a for a in args if isinstance(a, Tensor))
        where = "cpu" if t.device.type == "cpu" else "cuda"
        raise NotImplementedError(f"\"{name}_{where}\" not implemented for 'Half'")


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float, np.integer, np.floating))


def _floating(t: Tensor) -> Tensor:
    if t.dtype.is_floating_point or t.dtype.is_complex:  # (complex: each op says if it can)
        return t
    return t.to(default_float())
