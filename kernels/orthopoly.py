"""The classical orthogonal polynomials of ``torch.special`` on the CPU:
``chebyshev_polynomial_t/u/v/w``, their ``shifted_`` forms (at ``2x - 1``),
``hermite_polynomial_h`` (physicists') and ``_he`` (probabilists'),
``laguerre_polynomial_l`` and ``legendre_polynomial_p``, as ``f(x, n)``: one Numba loop
(:func:`polynomial_map`; :data:`POLYNOMIALS` numbers them).

PyTorch's definitions, evaluated in float64 (float32 inputs widened, results rounded once):
``n`` is truncated to an integer (a negative one, or one that is not finite, gives 0, as
PyTorch's cast does); the values at ``x = +-1`` (``0``, ``1`` for the shifted ones) are
exact; the Chebyshev kinds use their trigonometric forms inside (-1, 1) from degree 7 (T)
or 9 (U, V, W), as PyTorch's, ``T_n(cos t) = cos(n t)``, ``U_n = sin((n+1) t) / sin t``,
``V_n = cos((n+1/2) t) / cos(t/2)``, ``W_n = sin((n+1/2) t) / sin(t/2)`` (Mason & Handscomb
1.2), taken at ``|x|`` by their parity (``V_n(-x) = (-1)^n W_n(x)``), where the angle is
accurate (absolute error about ``n`` ulp; PyTorch's, at ``x`` itself, loses more near -1),
and every other case the three-term recurrence (Abramowitz & Stegun 22.7). The recurrence runs ``n``
steps, as PyTorch's: a very large degree costs its time (it stops once the value is NaN).
"""

from __future__ import annotations

import math

import numpy as np

from .cached import cached_njit

__all__ = ["POLYNOMIALS", "polynomial_map"]

#: function name -> the code :func:`polynomial_map` takes
POLYNOMIALS: dict[str, int] = {
    "chebyshev_polynomial_t": 0, "chebyshev_polynomial_u": 1, "chebyshev_polynomial_v": 2,
    "chebyshev_polynomial_w": 3, "shifted_chebyshev_polynomial_t": 4,
    "shifted_chebyshev_polynomial_u": 5, "shifted_chebyshev_polynomial_v": 6,
    "shifted_chebyshev_polynomial_w": 7, "hermite_polynomial_h": 8,
    "hermite_polynomial_he": 9, "laguerre_polynomial_l": 10, "legendre_polynomial_p": 11,
}

_I64_LIMIT = 9.223372036854775807e18


@cached_njit(nogil=True, error_model="numpy")
def _degree(n):
    """``n`` truncated to an integer as PyTorch's cast to int64 does it on x86 (NaN,
    infinities and out-of-range values become the smallest int64: negative), -1 for all of
    those; the polynomials are 0 at a negative degree."""
    if not (-_I64_LIMIT < n < _I64_LIMIT):
        return -1
    k = int(n)
    return k if k >= 0 else -1


@cached_njit(nogil=True, error_model="numpy")
def _chebyshev(kind, x, k):
    """Chebyshev polynomial of the first (0), second (1), third (2) or fourth (3) kind."""
    if k < 0:
        return 0.0
    if abs(x) == 1.0:
        if kind == 0:
            return 1.0 if (x > 0.0 or k % 2 == 0) else -1.0
        if kind == 1:
            return k + 1.0 if (x > 0.0 or k % 2 == 0) else -(k + 1.0)
        if kind == 2:
            if x > 0.0:
                return 1.0
            return 2.0 * k + 1.0 if k % 2 == 0 else -(2.0 * k + 1.0)
        if x > 0.0:
            return 2.0 * k + 1.0
        return 1.0 if k % 2 == 0 else -1.0
    if abs(x) < 1.0 and ((kind == 0 and k > 6) or (kind > 0 and k > 8)):
        # at |x| (T_n(-x) = (-1)^n T_n(x), U likewise, V_n(-x) = (-1)^n W_n(x)): acos of a
        # negative x near -1 would lose the small angle the quotients divide by
        sign = -1.0 if (x < 0.0 and k % 2 == 1) else 1.0
        if x < 0.0 and kind >= 2:
            kind = 5 - kind
        t = math.acos(abs(x))
        if kind == 0:
            return sign * math.cos(k * t)
        if kind == 1:
            return sign * math.sin((k + 1.0) * t) / math.sin(t)
        if kind == 2:
            return sign * math.cos((k + 0.5) * t) / math.cos(0.5 * t)
        return sign * math.sin((k + 0.5) * t) / math.sin(0.5 * t)
    if k == 0:
        return 1.0
    p = 1.0
    if kind == 0:
        q = x
    elif kind == 1:
        q = x + x
    elif kind == 2:
        q = x + x - 1.0
    else:
        q = x + x + 1.0
    for _ in range(2, k + 1):
        r = (x + x) * q - p
        p = q
        q = r
        if r != r:
            break
    return q


@cached_njit(nogil=True, error_model="numpy")
def _shifted_chebyshev(kind, x, k):
    """Chebyshev polynomial of ``kind`` (0 to 3) at ``2x - 1``, with PyTorch's exact values at
    ``x = 0`` and ``x = 1``."""
    if k < 0:
        return 0.0
    if x == 1.0 or x == 0.0:
        return _chebyshev(kind, 2.0 * x - 1.0, k)
    return _chebyshev(kind, x + x - 1.0, k)


@cached_njit(nogil=True, error_model="numpy")
def _hermite(x, k, physicists):
    """``H_k(x)`` (``H_(k+1) = 2x H_k - 2k H_(k-1)``) or ``He_k(x)``
    (``He_(k+1) = x He_k - k He_(k-1)``)."""
    if k < 0:
        return 0.0
    if k == 0:
        return 1.0
    c = 2.0 if physicists else 1.0
    p = 1.0
    q = c * x
    for j in range(1, k):
        r = c * x * q - c * j * p
        p = q
        q = r
        if r != r:
            break
    return q


@cached_njit(nogil=True, error_model="numpy")
def _laguerre(x, k):
    """``L_k(x)``: ``(j + 1) L_(j+1) = (2j + 1 - x) L_j - j L_(j-1)``."""
    if k < 0:
        return 0.0
    if x == 0.0 or k == 0:
        return 1.0
    p = 1.0
    q = 1.0 - x
    for j in range(1, k):
        r = ((2.0 * j + (1.0 - x)) * q - j * p) / (j + 1.0)
        p = q
        q = r
        if r != r:
            break
    return q


@cached_njit(nogil=True, error_model="numpy")
def _legendre(x, k):
    """``P_k(x)``: ``(j + 1) P_(j+1) = (2j + 1) x P_j - j P_(j-1)``."""
    if k < 0:
        return 0.0
    if abs(x) == 1.0:
        return 1.0 if (x > 0.0 or k % 2 == 0) else -1.0
    if k == 0:
        return 1.0
    p = 1.0
    q = x
    for j in range(1, k):
        r = ((2.0 * j + 1.0) * x * q - j * p) / (j + 1.0)
        p = q
        q = r
        if r != r:
            break
    return q


@cached_njit(nogil=True, error_model="numpy")
def _one(which, x, n):
    k = _degree(n)
    if which < 4:
        return _chebyshev(which, x, k)
    if which < 8:
        return _shifted_chebyshev(which - 4, x, k)
    if which < 10:
        return _hermite(x, k, which == 8)
    if which == 10:
        return _laguerre(x, k)
    return _legendre(x, k)


@cached_njit(nogil=True, error_model="numpy")
def polynomial_map(which, x, n, out):
    """``out[i] = p_n[i](x[i])`` for the polynomial numbered ``which`` (:data:`POLYNOMIALS`),
    over flat arrays of one length; computed in float64, stored in ``out``'s dtype."""
    for i in range(out.size):
        out[i] = _one(which, np.float64(x[i]), np.float64(n[i]))
