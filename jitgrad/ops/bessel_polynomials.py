"""``torch.special``'s Bessel and Airy functions (``bessel_j0``, ``bessel_j1``, ``bessel_y0``,
``bessel_y1``, ``modified_bessel_i0``, ``modified_bessel_i1``, ``modified_bessel_k0``,
``modified_bessel_k1``, ``scaled_modified_bessel_k0``, ``scaled_modified_bessel_k1``,
``spherical_bessel_j0``, ``airy_ai``) and its classical orthogonal polynomials
(``chebyshev_polynomial_t/u/v/w``, ``shifted_chebyshev_polynomial_t/u/v/w``,
``hermite_polynomial_h/he``, ``laguerre_polynomial_l``, ``legendre_polynomial_p``), as
element-wise ops with PyTorch's dtype rules.

None is differentiable in PyTorch (their results never require grad; derivatives.yaml
lists them with ``output_differentiability: [False]``), and none here: the ops have no VJP.
They compute on the CPU with :mod:`jitgrad.kernels.bessel` and
:mod:`jitgrad.kernels.orthopoly` (float64 inside, one rounding to float32; float16 is
refused, as PyTorch's CPU kernels refuse it); on a GPU the Bessel functions CuPy has go
through ``cupyx.scipy.special`` (``j0``, ``j1``, ``y0``, ``y1``, ``i0``, ``i1``, ``k0``,
``k1``, ``k0e``, ``k1e``), the others through a host round trip (see
:func:`jitgrad.ops.special_functions.special_ref`). Accuracy (float64, against mpmath:
tests/ops/test_special_functions.py asserts the bounds): a few ulp, in absolute terms (of
the local amplitude) near the zeros of the oscillating ones.
"""

from __future__ import annotations

from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, binary, unary
from .elementwise_base import ew
from .registry import FLOAT
from .special_functions import check_not_half, special_ref

__all__ = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
           "airy_ai", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
           "chebyshev_polynomial_v", "chebyshev_polynomial_w",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
           "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w",
           "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
           "legendre_polynomial_p"]


def _unary_op(name: str, samples):
    return ew(name, None, ("a",), None, special_ref(name), None, dtype_rule=FLOAT,
              samples=samples)


def _poly_op(name: str):
    return ew(name, None, ("a", "b"), None, special_ref(name), None, dtype_rule=FLOAT,
              samples=S.polynomial)


BESSEL_J0 = _unary_op("bessel_j0", S.bessel)
BESSEL_J1 = _unary_op("bessel_j1", S.bessel)
BESSEL_Y0 = _unary_op("bessel_y0", S.bessel_positive)
BESSEL_Y1 = _unary_op("bessel_y1", S.bessel_positive)
MODIFIED_BESSEL_I0 = _unary_op("modified_bessel_i0", S.bessel)
MODIFIED_BESSEL_I1 = _unary_op("modified_bessel_i1", S.bessel)
MODIFIED_BESSEL_K0 = _unary_op("modified_bessel_k0", S.bessel_positive)
MODIFIED_BESSEL_K1 = _unary_op("modified_bessel_k1", S.bessel_positive)
SCALED_MODIFIED_BESSEL_K0 = _unary_op("scaled_modified_bessel_k0", S.bessel_positive)
SCALED_MODIFIED_BESSEL_K1 = _unary_op("scaled_modified_bessel_k1", S.bessel_positive)
SPHERICAL_BESSEL_J0 = _unary_op("spherical_bessel_j0", S.bessel)
AIRY_AI = _unary_op("airy_ai", S.bessel)

CHEBYSHEV_POLYNOMIAL_T = _poly_op("chebyshev_polynomial_t")
CHEBYSHEV_POLYNOMIAL_U = _poly_op("chebyshev_polynomial_u")
CHEBYSHEV_POLYNOMIAL_V = _poly_op("chebyshev_polynomial_v")
CHEBYSHEV_POLYNOMIAL_W = _poly_op("chebyshev_polynomial_w")
SHIFTED_CHEBYSHEV_POLYNOMIAL_T = _poly_op("shifted_chebyshev_polynomial_t")
SHIFTED_CHEBYSHEV_POLYNOMIAL_U = _poly_op("shifted_chebyshev_polynomial_u")
SHIFTED_CHEBYSHEV_POLYNOMIAL_V = _poly_op("shifted_chebyshev_polynomial_v")
SHIFTED_CHEBYSHEV_POLYNOMIAL_W = _poly_op("shifted_chebyshev_polynomial_w")
HERMITE_POLYNOMIAL_H = _poly_op("hermite_polynomial_h")
HERMITE_POLYNOMIAL_HE = _poly_op("hermite_polynomial_he")
LAGUERRE_POLYNOMIAL_L = _poly_op("laguerre_polynomial_l")
LEGENDRE_POLYNOMIAL_P = _poly_op("legendre_polynomial_p")


def _unary(op, input) -> Tensor:
    x = as_tensor_arg(input)
    check_not_half(op.name, x)
    return unary(op, x)


@api(BESSEL_J0)
def bessel_j0(input: Tensor) -> Tensor:
    """The Bessel function of the first kind of order 0, ``J0(input)``."""
    return _unary(BESSEL_J0, input)


@api(BESSEL_J1)
def bessel_j1(input: Tensor) -> Tensor:
    """The Bessel function of the first kind of order 1, ``J1(input)``."""
    return _unary(BESSEL_J1, input)


@api(BESSEL_Y0)
def bessel_y0(input: Tensor) -> Tensor:
    """The Bessel function of the second kind of order 0, ``Y0(input)`` (NaN below 0)."""
    return _unary(BESSEL_Y0, input)


@api(BESSEL_Y1)
def bessel_y1(input: Tensor) -> Tensor:
    """The Bessel function of the second kind of order 1, ``Y1(input)`` (NaN below 0)."""
    return _unary(BESSEL_Y1, input)


@api(MODIFIED_BESSEL_I0)
def modified_bessel_i0(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 0 (:func:`jitgrad.i0`'s
    values, with no gradient, as PyTorch's)."""
    return _unary(MODIFIED_BESSEL_I0, input)


@api(MODIFIED_BESSEL_I1)
def modified_bessel_i1(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 1."""
    return _unary(MODIFIED_BESSEL_I1, input)


@api(MODIFIED_BESSEL_K0)
def modified_bessel_k0(input: Tensor) -> Tensor:
    """The modified Bessel function of the second kind of order 0 (NaN below 0)."""
    return _unary(MODIFIED_BESSEL_K0, input)


@api(MODIFIED_BESSEL_K1)
def modified_bessel_k1(input: Tensor) -> Tensor:
    """The modified Bessel function of the second kind of order 1 (NaN below 0)."""
    return _unary(MODIFIED_BESSEL_K1, input)


@api(SCALED_MODIFIED_BESSEL_K0)
def scaled_modified_bessel_k0(input: Tensor) -> Tensor:
    """``exp(input) K0(input)``, without underflow."""
    return _unary(SCALED_MODIFIED_BESSEL_K0, input)


@api(SCALED_MODIFIED_BESSEL_K1)
def scaled_modified_bessel_k1(input: Tensor) -> Tensor:
    """``exp(input) K1(input)``, without underflow."""
    return _unary(SCALED_MODIFIED_BESSEL_K1, input)


@api(SPHERICAL_BESSEL_J0)
def spherical_bessel_j0(input: Tensor) -> Tensor:
    """The spherical Bessel function of the first kind of order 0, ``sin(x) / x``."""
    return _unary(SPHERICAL_BESSEL_J0, input)


@api(AIRY_AI)
def airy_ai(input: Tensor) -> Tensor:
    """The Airy function ``Ai(input)``."""
    return _unary(AIRY_AI, input)


def _polynomial(op, x, n) -> Tensor:
    """``op`` at ``x`` of degree ``n`` (either may be a number, not both)."""
    if not isinstance(x, Tensor) and not isinstance(n, Tensor):
        raise TypeError(f"special_{op.name}() received an invalid combination of arguments - "
                        f"got ({type(x).__name__}, {type(n).__name__}), but expected one of:")
    if not isinstance(x, Tensor | bool | int | float):
        x = as_tensor_arg(x, "x")
    if not isinstance(n, Tensor | bool | int | float):
        n = as_tensor_arg(n, "n")
    check_not_half(op.name, x, n)
    return binary(op, x, n)


@api(CHEBYSHEV_POLYNOMIAL_T)
def chebyshev_polynomial_t(x, n) -> Tensor:
    """The Chebyshev polynomial of the first kind ``T_n(x)`` (``n`` truncated to an integer;
    0 for a negative one)."""
    return _polynomial(CHEBYSHEV_POLYNOMIAL_T, x, n)


@api(CHEBYSHEV_POLYNOMIAL_U)
def chebyshev_polynomial_u(x, n) -> Tensor:
    """The Chebyshev polynomial of the second kind ``U_n(x)``."""
    return _polynomial(CHEBYSHEV_POLYNOMIAL_U, x, n)


@api(CHEBYSHEV_POLYNOMIAL_V)
def chebyshev_polynomial_v(x, n) -> Tensor:
    """The Chebyshev polynomial of the third kind ``V_n(x)``."""
    return _polynomial(CHEBYSHEV_POLYNOMIAL_V, x, n)


@api(CHEBYSHEV_POLYNOMIAL_W)
def chebyshev_polynomial_w(x, n) -> Tensor:
    """The Chebyshev polynomial of the fourth kind ``W_n(x)``."""
    return _polynomial(CHEBYSHEV_POLYNOMIAL_W, x, n)


@api(SHIFTED_CHEBYSHEV_POLYNOMIAL_T)
def shifted_chebyshev_polynomial_t(x, n) -> Tensor:
    """The shifted Chebyshev polynomial of the first kind ``T_n(2x - 1)``."""
    return _polynomial(SHIFTED_CHEBYSHEV_POLYNOMIAL_T, x, n)


@api(SHIFTED_CHEBYSHEV_POLYNOMIAL_U)
def shifted_chebyshev_polynomial_u(x, n) -> Tensor:
    """The shifted Chebyshev polynomial of the second kind ``U_n(2x - 1)``."""
    return _polynomial(SHIFTED_CHEBYSHEV_POLYNOMIAL_U, x, n)


@api(SHIFTED_CHEBYSHEV_POLYNOMIAL_V)
def shifted_chebyshev_polynomial_v(x, n) -> Tensor:
    """The shifted Chebyshev polynomial of the third kind ``V_n(2x - 1)``."""
    return _polynomial(SHIFTED_CHEBYSHEV_POLYNOMIAL_V, x, n)


@api(SHIFTED_CHEBYSHEV_POLYNOMIAL_W)
def shifted_chebyshev_polynomial_w(x, n) -> Tensor:
    """The shifted Chebyshev polynomial of the fourth kind ``W_n(2x - 1)``."""
    return _polynomial(SHIFTED_CHEBYSHEV_POLYNOMIAL_W, x, n)


@api(HERMITE_POLYNOMIAL_H)
def hermite_polynomial_h(x, n) -> Tensor:
    """The physicists' Hermite polynomial ``H_n(x)``."""
    return _polynomial(HERMITE_POLYNOMIAL_H, x, n)


@api(HERMITE_POLYNOMIAL_HE)
def hermite_polynomial_he(x, n) -> Tensor:
    """The probabilists' Hermite polynomial ``He_n(x)``."""
    return _polynomial(HERMITE_POLYNOMIAL_HE, x, n)


@api(LAGUERRE_POLYNOMIAL_L)
def laguerre_polynomial_l(x, n) -> Tensor:
    """The Laguerre polynomial ``L_n(x)``."""
    return _polynomial(LAGUERRE_POLYNOMIAL_L, x, n)


@api(LEGENDRE_POLYNOMIAL_P)
def legendre_polynomial_p(x, n) -> Tensor:
    """The Legendre polynomial ``P_n(x)``."""
    return _polynomial(LEGENDRE_POLYNOMIAL_P, x, n)
