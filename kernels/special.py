"""Special functions on the CPU: one Numba loop over a flat array for each of ``lgamma``,
``digamma``, ``polygamma``, ``erfc``, ``erfinv``, ``erfcx``, ``i0``, ``i0e``, ``i1``,
``i1e``, ``ndtri`` and ``log_ndtr`` (:func:`special_map`; :data:`FUNCTIONS` numbers them).

Every function is evaluated in float64 (a float32 input is widened, its result rounded once)
with textbook methods, no coefficient tables:

* ``lgamma``, ``erfc``: C's ``lgamma`` / ``erfc`` (what PyTorch calls on the CPU);
* ``digamma``: the recurrence ``psi(x) = psi(x + 1) - 1/x`` up to ``x >= 10``, then the
  asymptotic series in the Bernoulli numbers; reflection ``psi(1 - x) - pi / tan(pi x)`` for
  negative ``x``;
* ``polygamma(n, x)``, ``n >= 1``: ``(-1)**(n + 1) n! zeta(n + 1, x)``, the Hurwitz zeta a
  direct sum up to ``q + k >= 12 + s`` and the Euler-Maclaurin tail (12 Bernoulli terms);
* ``erfinv``, ``ndtri``: an initial guess (Winitzki's; Abramowitz & Stegun 26.2.23), then
  Halley steps on ``erf`` / ``erfc`` (``erfc`` in the tails, where ``1 - |y|`` is exact;
  ``ndtri`` is ``sqrt2 erfinv(2p - 1)`` on [0.25, 0.75]);
* ``erfcx``: ``exp(x*x) erfc(x)`` with ``x*x`` split exactly (Dekker), the asymptotic series
  from ``x >= 12``, ``2 exp(x*x) - erfcx(-x)`` below 0; ``log_ndtr`` is
  ``log(erfcx(-x/sqrt2) / 2) - x*x/2`` below -1, ``log1p(-erfc(x/sqrt2) / 2)`` up to 1 and
  ``log1p(-erfcx(x/sqrt2) exp(-x*x/2) / 2)`` beyond;
* ``i0``, ``i1`` (and their exponentially scaled ``e`` forms): the power series up to
  ``|x| <= 20``, the large-argument asymptotic series beyond.

tests/ops/test_special_functions.py measures them against mpmath (the bounds it asserts are
in its table) and against PyTorch.
"""

from __future__ import annotations

import math

import numpy as np

from .cached import cached_njit

__all__ = ["FUNCTIONS", "special_map"]

#: function name -> the code :func:`special_map` takes
FUNCTIONS: dict[str, int] = {
    "lgamma": 0, "digamma": 1, "polygamma": 2, "erfc": 3, "erfinv": 4, "erfcx": 5,
    "i0": 6, "i0e": 7, "i1": 8, "i1e": 9, "ndtri": 10, "log_ndtr": 11,
}

_PI = math.pi
_SQRT2 = math.sqrt(2.0)
_SQRT_PI = math.sqrt(math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_INF = math.inf
_NAN = math.nan

# B_2k / (2k) for digamma's series, B_2k for the zeta tail (k = 1, 2, ...)
_DIGAMMA_SERIES = np.array([1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760,
                            1 / 12])
_BERNOULLI = np.array([1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6,
                       -3617 / 510, 43867 / 798, -174611 / 330, 854513 / 138,
                       -236364091 / 2730])
_FACT_2K = np.array([float(math.factorial(2 * k)) for k in range(1, 13)])


@cached_njit(nogil=True, error_model="numpy")
def _digamma_positive(x):
    r = 0.0
    while x < 10.0:
        r -= 1.0 / x
        x += 1.0
    z = 1.0 / (x * x)
    s = 0.0
    for k in range(_DIGAMMA_SERIES.size - 1, -1, -1):
        s = s * z + _DIGAMMA_SERIES[k]
    return r + math.log(x) - 0.5 / x - s * z


@cached_njit(nogil=True, error_model="numpy")
def digamma(x):
    """The digamma function (PyTorch's values at the poles: -inf at +0, +inf at -0, NaN at
    the negative integers)."""
    if x != x:
        return _NAN
    if x == 0.0:
        return math.copysign(_INF, -x)
    if x < 0.0:
        fl = math.floor(x)
        if x == fl:
            return _NAN
        if x == -_INF:
            return _NAN
        # x minus its nearest integer, exactly (tan has period pi; pi * r stays accurate
        # near the poles)
        r = x - fl
        if r > 0.5:
            r = x - (fl + 1.0)
        return _digamma_positive(1.0 - x) - _PI / math.tan(_PI * r)
    if x == _INF:
        return _INF
    return _digamma_positive(x)


@cached_njit(nogil=True, error_model="numpy")
def hurwitz_zeta(s, q):
    """``sum((q + k) ** -s for k >= 0)`` for an integer-valued ``s > 1`` (inf at the poles
    ``q`` = 0, -1, ...)."""
    if q != q or s != s:
        return _NAN
    if q <= 0.0 and q == math.floor(q):
        return _INF
    if q == _INF:
        return 0.0
    total = 0.0
    a = q
    while a < 12.0 + s:
        total += a ** -s
        a += 1.0
    # Euler-Maclaurin at a: a^(1-s)/(s-1) + a^-s/2 + sum B2k/(2k)! s(s+1)..(s+2k-2) a^(-s-2k+1)
    tail = a ** (1.0 - s) / (s - 1.0) + 0.5 * a ** -s
    rising = s  # s (s+1) ... (s+2k-2)
    power = a ** (-s - 1.0)
    inv_a2 = 1.0 / (a * a)
    for k in range(_BERNOULLI.size):
        term = _BERNOULLI[k] / _FACT_2K[k] * rising * power
        tail += term
        if abs(term) <= 1e-17 * abs(total + tail):
            break
        rising *= (s + 2 * k + 1.0) * (s + 2 * k + 2.0)
        power *= inv_a2
    return total + tail


@cached_njit(nogil=True, error_model="numpy")
def polygamma(n, x):
    """The ``n``-th derivative of digamma (``n >= 0`` an integer)."""
    if n == 0:
        return digamma(x)
    s = n + 1.0
    z = hurwitz_zeta(s, x)
    fact = 1.0  # n! (exact up to 22!)
    for k in range(2, n + 1):
        fact *= k
    return fact * z if n % 2 == 1 else -fact * z


@cached_njit(nogil=True, error_model="numpy")
def erfinv(y):
    """The inverse error function: NaN outside [-1, 1], +-inf at +-1."""
    a = abs(y)
    if not a <= 1.0:
        return _NAN
    if a == 1.0:
        return math.copysign(_INF, y)
    if a == 0.0:
        return y
    # Winitzki's guess (relative error < 2e-3), then Halley steps on erf (erfc past 0.5,
    # where 1 - a is exact and erf(x) - a would cancel); f''/(2 f') = -x for both
    ln = math.log1p(-a * a)
    c = 2.0 / (_PI * 0.147) + 0.5 * ln
    x = math.sqrt(math.sqrt(c * c - ln / 0.147) - c)
    tail = a > 0.5
    rest = 1.0 - a
    for _ in range(4):
        d = _TWO_OVER_SQRT_PI * math.exp(-x * x)
        if tail:
            u = (rest - math.erfc(x)) / d
        else:
            u = (math.erf(x) - a) / d
        x -= u / (1.0 + x * u)
        if abs(u) <= 1e-15 * x:  # the step was cubically smaller than the last: converged
            break
    return math.copysign(x, y)


@cached_njit(nogil=True, error_model="numpy")
def _square_split(x):
    """``x * x`` as ``hi + lo`` exactly (Dekker's product)."""
    hi = x * x
    c = 134217729.0 * x
    xh = c - (c - x)
    xl = x - xh
    return hi, ((xh * xh - hi) + 2.0 * xh * xl) + xl * xl


@cached_njit(nogil=True, error_model="numpy")
def _exp_square(x, scale):
    """``exp(scale * x * x)`` for ``scale`` 1 or -1/2, with ``x * x`` exact."""
    hi, lo = _square_split(x)
    return math.exp(scale * hi) * (1.0 + scale * lo)


@cached_njit(nogil=True, error_model="numpy")
def erfcx(x):
    """The scaled complementary error function ``exp(x**2) erfc(x)``."""
    if x != x:
        return _NAN
    if x < 0.0:
        if x < -26.7:
            return _INF
        return 2.0 * _exp_square(x, 1.0) - erfcx(-x)
    if x < 12.0:
        return _exp_square(x, 1.0) * math.erfc(x)
    if x == _INF:
        return 0.0
    # 1/(x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k
    t2 = 1.0 / (2.0 * x * x)
    term = 1.0
    s = 1.0
    for k in range(1, 30):
        term *= -(2.0 * k - 1.0) * t2
        s += term
        if abs(term) < 1e-17:
            break
    return s / (x * _SQRT_PI)


@cached_njit(nogil=True, error_model="numpy")
def log_ndtr(x):
    """``log`` of the standard normal CDF, accurate in both tails."""
    if x != x:
        return _NAN
    if x < -1.0:
        t = -x / _SQRT2
        return math.log(0.5 * erfcx(t)) - 0.5 * x * x
    if x <= 1.0:
        return math.log1p(-0.5 * math.erfc(x / _SQRT2))
    if x == _INF:
        return -0.0
    # 1 - Phi(x) without erfc's loss to the rounding of x / sqrt2 in the far tail
    return math.log1p(-0.5 * erfcx(x / _SQRT2) * _exp_square(x, -0.5))


@cached_njit(nogil=True, error_model="numpy")
def ndtri(p):
    """The inverse of the standard normal CDF: NaN outside [0, 1], -inf at 0, inf at 1."""
    if not (0.0 <= p <= 1.0):
        return _NAN
    if p == 0.0:
        return -_INF
    if p == 1.0:
        return _INF
    if 0.25 <= p <= 0.75:  # 2p - 1 is exact, and erfinv is accurate near 0
        return _SQRT2 * erfinv(2.0 * p - 1.0)
    q = p if p < 0.5 else 1.0 - p  # exact for p >= 0.5
    # Abramowitz & Stegun 26.2.23 (error < 4.5e-4), then Halley steps on Phi(x) = q, x <= 0
    t = math.sqrt(-2.0 * math.log(q))
    x = -(t - (2.515517 + t * (0.802853 + t * 0.010328))
          / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))))
    for _ in range(4):
        phi = _INV_SQRT_2PI * math.exp(-0.5 * x * x)
        if phi == 0.0:
            break
        u = (0.5 * math.erfc(-x / _SQRT2) - q) / phi
        x -= u / (1.0 + 0.5 * x * u)
        if abs(u) <= -1e-15 * x:  # converged (x < 0 here)
            break
    return x if p < 0.5 else -x


@cached_njit(nogil=True, error_model="numpy")
def bessel_scaled(order, x):
    """``exp(-|x|) I_order(x)`` for ``order`` 0 or 1."""
    a = abs(x)
    if a != a:
        return _NAN
    if a <= 20.0:
        # I_v(x) = (x/2)^v sum (x^2/4)^k / (k! (k+v)!)
        z = 0.25 * a * a
        term = 1.0 if order == 0 else 0.5 * a
        s = term
        k = 1
        while term > 1e-17 * s:
            term *= z / (k * (k + order))
            s += term
            k += 1
        s *= math.exp(-a)
    elif a == _INF:
        s = 0.0
    else:
        # 1/sqrt(2 pi a) sum_k prod_{j<=k} ((2j-1)^2 - 4 v^2) / (8 j a)
        mu = 4.0 * order * order
        term = 1.0
        s = 1.0
        for k in range(1, 40):
            term *= ((2.0 * k - 1.0) ** 2 - mu) / (8.0 * k * a)
            s += term
            if abs(term) < 1e-17 * abs(s):
                break
        s /= math.sqrt(2.0 * _PI * a)
    return -s if (order == 1 and x < 0.0) else s


@cached_njit(nogil=True, error_model="numpy")
def _bessel(order, x):
    """``I_order(x)`` (inf beyond float64's range)."""
    a = abs(x)
    if a == _INF:
        return _INF if (order == 0 or x > 0.0) else -_INF
    s = bessel_scaled(order, x)
    if a > 700.0:  # exp(a) overflows; I(a) overflows at ~713 too
        h = math.exp(0.5 * a)
        return s * h * h
    return s * math.exp(a)


@cached_njit(nogil=True, error_model="numpy")
def _one(which, v, n):
    if which == 0:
        return math.lgamma(v)
    if which == 1:
        return digamma(v)
    if which == 2:
        return polygamma(n, v)
    if which == 3:
        return math.erfc(v)
    if which == 4:
        return erfinv(v)
    if which == 5:
        return erfcx(v)
    if which == 6:
        return _bessel(0, v)
    if which == 7:
        return bessel_scaled(0, v)
    if which == 8:
        return _bessel(1, v)
    if which == 9:
        return bessel_scaled(1, v)
    if which == 10:
        return ndtri(v)
    return log_ndtr(v)


@cached_njit(nogil=True, error_model="numpy")
def special_map(which, n, x, out):
    """``out[i] = f(x[i])`` for the function numbered ``which`` (:data:`FUNCTIONS`; ``n`` is
    polygamma's order), over flat arrays; computed in float64, stored in ``out``'s dtype."""
    for i in range(x.size):
        out[i] = _one(which, np.float64(x[i]), n)
