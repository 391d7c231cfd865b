"""Special functions on the CPU: one Numba loop over a flat array for each of ``lgamma``,
``digamma``, ``polygamma``, ``erfc``, ``erfinv``, ``erfcx``, ``i0``, ``i0e``, ``i1``,
``i1e``, ``ndtri`` and ``log_ndtr`` (:func:`special_map`; :data:`FUNCTIONS` numbers them),
and one over two flat arrays for ``zeta``, ``igamma`` and ``igammac`` (:func:`special_map2`;
:data:`FUNCTIONS2`). (The Bessel and Airy functions are in :mod:`.bessel`, the orthogonal
polynomials in :mod:`.orthopoly`: separate loops, compiled only when used.)

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
  ``|x| <= 20``, the large-argument asymptotic series beyond;
* ``zeta(x, q)``: the direct sum (each ``(q + k)**-x`` corrected for the rounding of
  ``q + k``, added from the smallest) and the Euler-Maclaurin tail, PyTorch's domain;
* ``igamma(a, x)``, ``igammac(a, x)`` (``P``, ``Q``): the power series for ``P``, Legendre's
  continued fraction for ``Q`` (its depth found by Lentz's method, then evaluated bottom-up)
  and Gautschi's series for ``Q`` at small ``a`` and ``x``, in the regions of DiDonato &
  Morris (1986) / Cephes; the prefactor ``x**a e**-x / Gamma(a)`` as written (split into
  ``2**j`` equal factors against over- and underflow) or by Stirling's series; Temme's uniform
  expansion (two terms) from ``a = 3e5``; PyTorch's values off the interior.

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


# ------------------------------------------------------------ two-argument functions
# zeta(x, q), igamma(a, x) and igammac(a, x), by special_map2 (FUNCTIONS2 numbers them)

#: two-argument function name -> the code :func:`special_map2` takes
FUNCTIONS2: dict[str, int] = {"zeta": 0, "igamma": 1, "igammac": 2}

_EULER = 0.5772156649015329  # Euler's constant


def _zeta_minus_one(kmax: int) -> np.ndarray:
    """``zeta(k) - 1`` for k = 2 .. kmax (index k): the direct sum to 9, Euler-Maclaurin
    beyond (as :func:`hurwitz_zeta`), in Python floats: microseconds, once."""
    out = np.zeros(kmax + 1)
    for k in range(2, kmax + 1):
        total = sum(n ** -k for n in range(2, 10))
        tail = 10.0 ** (1 - k) / (k - 1) + 0.5 * 10.0 ** -k
        rising, power = float(k), 10.0 ** (-k - 1)
        for j in range(_BERNOULLI.size):
            tail += _BERNOULLI[j] / _FACT_2K[j] * rising * power
            rising *= (k + 2 * j + 1.0) * (k + 2 * j + 2.0)
            power *= 0.01
        out[k] = total + tail
    return out


_ZETA_M1 = _zeta_minus_one(60)


@cached_njit(nogil=True, error_model="numpy")
def zeta(x, q):
    """The Hurwitz zeta function ``sum((q + k) ** -x for k >= 0)`` with PyTorch's domain:
    inf at ``x == 1`` and at the poles ``q = 0, -1, ...``, NaN for ``x < 1`` and for
    ``q < 0`` with a non-integer ``x``. The direct sum up to ``q + k >= 12 + x``, then the
    Euler-Maclaurin tail (:func:`hurwitz_zeta`'s), added from the smallest term."""
    if x == 1.0:
        return _INF
    if x < 1.0:
        return _NAN
    if q <= 0.0:
        if q == math.floor(q):
            return _INF
        if x != math.floor(x):
            return _NAN
    if x != x or q != q:
        return _NAN
    if q == _INF:
        return 0.0
    if x == _INF:  # the limit: only terms with |q + k| <= 1 count
        if q > 1.0:
            return 0.0
        return 1.0 if q == 1.0 else _INF
    n = int(math.ceil(12.0 + x - q)) if q < 12.0 + x else 0
    if n > 64:  # a large exponent: the terms fall off at once, stop when the rest is
        total = 0.0  # negligible (at most (q + k)**(1 - x) / (x - 1))
        for k in range(n):
            a = q + k
            term = _shifted_power(q, k, x)
            total += term
            if a > 0.0 and term * a <= 1e-17 * (x - 1.0) * total:
                return total
        return total + _zeta_tail(x, q, n)
    # the tail first, then the terms from the smallest: each addition rounds less
    total = _zeta_tail(x, q, n)
    for k in range(n - 1, -1, -1):
        total += _shifted_power(q, k, x)
    return total


@cached_njit(nogil=True, error_model="numpy")
def _two_sum(q, k):
    """``q + k`` as ``hi + lo`` exactly (Knuth's two-sum)."""
    hi = q + k
    b = hi - q
    return hi, (q - (hi - b)) + (k - b)


@cached_njit(nogil=True, error_model="numpy")
def _shifted_power(q, k, x):
    """``(q + k) ** -x`` with the rounding of ``q + k`` corrected to first order (``x``
    times it would show)."""
    hi, lo = _two_sum(q, float(k))
    return hi ** -x * (1.0 - x * (lo / hi))


@cached_njit(nogil=True, error_model="numpy")
def _zeta_tail(x, q, n):
    """``sum((a + k) ** -x for k >= 0)``, ``a = q + n >= 12 + x``, by Euler-Maclaurin:
    ``a**(1-x)/(x-1) + a**-x/2 + sum B_2k/(2k)! x(x+1)...(x+2k-2) a**(-x-2k+1)`` (the
    rounding of ``a`` corrected to first order)."""
    a, lo = _two_sum(q, float(n))
    tail = a ** (1.0 - x) / (x - 1.0) + 0.5 * a ** -x
    rising = x
    power = a ** (-x - 1.0)
    inv_a2 = 1.0 / (a * a)
    for k in range(_BERNOULLI.size):
        term = _BERNOULLI[k] / _FACT_2K[k] * rising * power
        tail += term
        if abs(term) <= 1e-17 * abs(tail):
            break
        rising *= (x + 2 * k + 1.0) * (x + 2 * k + 2.0)
        power *= inv_a2
    return tail * (1.0 - (x - 1.0) * (lo / a))


@cached_njit(nogil=True, error_model="numpy")
def log1pmx(t):
    """``log(1 + t) - t`` without cancellation: ``-t*t/(2 + t) + 2 (u**3/3 + u**5/5 + ...)``
    with ``u = t / (2 + t)`` (``log1p(t) = 2 atanh(u)``) for -0.6 < t < 1."""
    if t <= -0.6 or t >= 1.0:
        return math.log1p(t) - t
    u = t / (2.0 + t)
    u2 = u * u
    p = u * u2
    s = 0.0
    k = 3.0
    while True:
        term = p / k
        s += term
        if abs(term) <= 1e-17 * abs(s):
            break
        p *= u2
        k += 2.0
    return 2.0 * s - t * t / (2.0 + t)


@cached_njit(nogil=True, error_model="numpy")
def _stirling_mu(a):
    """``lgamma(a) - ((a - 1/2) log(a) - a + log(2 pi)/2)``, ``a >= 10``: Stirling's series
    ``sum B_2k / (2k (2k - 1) a**(2k - 1))``."""
    z = 1.0 / (a * a)
    power = 1.0 / a
    s = 0.0
    for k in range(1, _BERNOULLI.size + 1):
        term = _BERNOULLI[k - 1] / (2.0 * k * (2.0 * k - 1.0)) * power
        s += term
        if abs(term) <= 1e-17 * s:
            break
        power *= z
    return s


@cached_njit(nogil=True, error_model="numpy")
def lgamma1p(a):
    """``lgamma(1 + a)``, accurate for small ``a`` (where ``1 + a`` would round): for
    ``|a| <= 1/2`` the series ``-gamma a + a - log1p(a) + sum (-1)^k (zeta(k) - 1) a^k / k``
    (Abramowitz & Stegun 6.1.33, with ``sum (-1)^k a^k / k = a - log1p(a)`` split off)."""
    if abs(a) > 0.5:
        return math.lgamma(1.0 + a)
    s = 0.0
    p = -a
    for k in range(2, _ZETA_M1.size):
        p *= -a  # (-a)**k
        term = _ZETA_M1[k] * p / k
        s += term
        if abs(term) <= 1e-17 * abs(s):
            break
    return (a - _EULER * a) - math.log1p(a) + s


@cached_njit(nogil=True, error_model="numpy")
def _igam_prefix(a, x):
    """``x**a exp(-x) / Gamma(a)``. Stirling's ``Gamma(a)`` (``a >= 10``):
    ``sqrt(a / 2 pi) exp(E)``, ``E = a log1pmx((x - a) / a) - mu(a)``, where ``|E|`` is
    small (near the transition, ``x - a`` exact) or ``Gamma(a)`` overflows (from 171: the
    rounding of ``E`` then costs a few ``|E|`` ulp); else as written, in ``2**j`` equal factors
    ``(x**(a/2**j) exp(-x/2**j))**(2**j)`` (exact exponents) where one would over- or
    underflow (``j`` ulp more)."""
    if a >= 10.0:
        e = a * log1pmx((x - a) / a) - _stirling_mu(a)
        if a >= 171.0 or (abs(e) < 8.0 and 0.5 * a <= x <= 2.0 * a):  # (x - a exact)
            return math.sqrt(a / (2.0 * _PI)) * math.exp(e)
    big = abs(a * math.log(x))
    m = 1.0
    while big > 700.0 * m or x > 700.0 * m:
        m *= 2.0
    t = math.pow(x, a / m) * math.exp(-x / m)
    while m > 1.0:
        t *= t
        m *= 0.5
    return t / math.gamma(a)


@cached_njit(nogil=True, error_model="numpy")
def _igam_series(a, x):
    """``P(a, x) = x**a e**-x / Gamma(a) * sum x**n / (a (a + 1) ... (a + n))``: the terms
    counted forward, then the sum nested from its last term back (``1/a (1 + x/(a + 1)
    (1 + x/(a + 2) (...)))``: each level's rounding damped, where the forward products'
    would add up)."""
    term = 1.0 / a
    s = term
    ap = a
    n = 0
    while True:
        ap += 1.0
        n += 1
        term *= x / ap
        s += term
        if term <= 1e-17 * s or n >= 100_000_000:  # (a < 3e5 takes ~5000 at most)
            break
    t = 1.0
    for k in range(n, 0, -1):
        t = 1.0 + x / (a + k) * t
    return _igam_prefix(a, x) * (t / a)


@cached_njit(nogil=True, error_model="numpy")
def _igamc_fraction(a, x):
    """``Q(a, x) = x**a e**-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...))``,
    Legendre's continued fraction (its even part; converges for ``x > 1``, ``x > a``): its
    depth found with Lentz's method (Numerical Recipes' ``gcf``), then evaluated from the
    bottom up, which rounds far less (a few ulp where Lentz's product gathers tens)."""
    fpmin = 1e-300
    b = x + 1.0 - a
    c = 1.0 / fpmin
    d = 1.0 / b
    i = 1
    while True:
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < fpmin:
            d = fpmin
        c = b + an / c
        if abs(c) < fpmin:
            c = fpmin
        d = 1.0 / d
        if not abs(d * c - 1.0) > 1e-16 or i >= 100_000_000:
            break
        i += 1
    t = 0.0
    for k in range(i + i // 4 + 2, 0, -1):
        t = (-k * (k - a)) / ((x + 1.0 - a + 2.0 * k) + t)
    return _igam_prefix(a, x) / ((x + 1.0 - a) + t)


@cached_njit(nogil=True, error_model="numpy")
def _igamc_small(a, x):
    """``Q(a, x)`` for ``x <= 1.1`` and small ``a``, where ``1 - P`` would cancel:
    ``1 - x**a / Gamma(1 + a) - x**a / Gamma(a) sum_{n >= 1} (-x)**n / (n! (a + n))``, the
    first part as ``-expm1(a log(x) - lgamma1p(a))`` (Gautschi's form)."""
    fac = 1.0
    s = 0.0
    n = 1.0
    while True:
        fac *= -x / n
        term = fac / (a + n)
        s += term
        if abs(term) <= 1e-17 * abs(s):
            break
        n += 1.0
    e = a * math.log(x) - lgamma1p(a)
    return -math.expm1(e) - a * math.exp(e) * s


@cached_njit(nogil=True, error_model="numpy")
def _igam_temme(a, x, lower):
    """``Q(a, x)`` (``P`` if ``lower``) for very large ``a``: Temme's uniform expansion
    ``Q = erfc(eta sqrt(a/2)) / 2 + R``, ``P = erfc(-eta sqrt(a/2)) / 2 - R``,
    ``R = exp(-a eta**2 / 2) / sqrt(2 pi a) (C0(eta) + C1(eta) / a)``,
    ``eta**2 / 2 = lambda - 1 - log(lambda)``, ``lambda = x / a`` (Temme 1979; the next
    term, ``C2 / a**2``, costs a few ulp at ``a = 3e5``, less beyond, where the series and
    the fraction take thousands of terms and gather more); ``C0``, ``C1`` in closed form, by
    their Taylor series (derived from that definition) for ``|eta| < 0.01``."""
    mu = (x - a) / a
    eta = math.sqrt(-2.0 * log1pmx(mu))
    if mu < 0.0:
        eta = -eta
    if abs(eta) < 0.01:
        c0 = -1.0 / 3.0 + eta * (1.0 / 12.0 + eta * (-2.0 / 135.0 + eta * (
            1.0 / 864.0 + eta * (1.0 / 2835.0))))
        c1 = -1.0 / 540.0 + eta * (-1.0 / 288.0 + eta * (1.0 / 378.0))
    else:
        c0 = 1.0 / mu - 1.0 / eta
        c1 = 1.0 / eta ** 3 - 1.0 / mu ** 3 - 1.0 / mu ** 2 - 1.0 / (12.0 * mu)
    r = math.exp(-0.5 * a * eta * eta) / math.sqrt(2.0 * _PI * a) * (c0 + c1 / a)
    if lower:
        return 0.5 * math.erfc(-eta * math.sqrt(0.5 * a)) - r
    return 0.5 * math.erfc(eta * math.sqrt(0.5 * a)) + r


@cached_njit(nogil=True, error_model="numpy")
def _igam_edge(a, x, lower):
    """PyTorch's values off the interior (its order of checks, NaN for negative arguments),
    or -1.0 for an interior point."""
    if x < 0.0 or a < 0.0:
        return _NAN
    if a == 0.0:
        if x > 0.0:
            return 1.0 if lower else 0.0
        return _NAN
    if x == 0.0:
        return 0.0 if lower else 1.0
    if a == _INF:
        if x == _INF:
            return _NAN
        return 0.0 if lower else 1.0
    if x == _INF:
        return 1.0 if lower else 0.0
    if a != a or x != x:
        return _NAN
    return -1.0


@cached_njit(nogil=True, error_model="numpy")
def igammac(a, x):
    """The regularized upper incomplete gamma function ``Q(a, x) = Gamma(a, x) / Gamma(a)``.
    ``1 - P`` (series) where ``Q`` is not small, the continued fraction for ``x > 1.1``,
    ``x >= a``, Gautschi's series for small ``a`` and ``x <= 1.1`` (the regions of DiDonato &
    Morris / Cephes); Temme's expansion for ``a >= 3e5``."""
    e = _igam_edge(a, x, False)
    if e != -1.0:
        return e
    if a >= 3e5:
        return _igam_temme(a, x, False)
    if x > 1.1:
        if x < a:
            return 1.0 - _igam_series(a, x)
        return _igamc_fraction(a, x)
    if x <= 0.5:
        if -0.4 / math.log(x) < a:
            return 1.0 - _igam_series(a, x)
        return _igamc_small(a, x)
    if x * 1.1 < a:
        return 1.0 - _igam_series(a, x)
    return _igamc_small(a, x)


@cached_njit(nogil=True, error_model="numpy")
def igamma(a, x):
    """The regularized lower incomplete gamma function ``P(a, x) = gamma(a, x) / Gamma(a)``:
    the power series, or ``1 - Q`` for ``x > 1``, ``x > a`` (:func:`igammac`)."""
    e = _igam_edge(a, x, True)
    if e != -1.0:
        return e
    if a >= 3e5:
        return _igam_temme(a, x, True)
    if x > 1.0 and x > a:
        return 1.0 - igammac(a, x)
    return _igam_series(a, x)


@cached_njit(nogil=True, error_model="numpy")
def _two(which, x, y):
    if which == 0:
        return zeta(x, y)
    if which == 1:
        return igamma(x, y)
    return igammac(x, y)


@cached_njit(nogil=True, error_model="numpy")
def special_map2(which, x, y, out):
    """``out[i] = f(x[i], y[i])`` for the two-argument function numbered ``which``
    (:data:`FUNCTIONS2`), over flat arrays of one length; computed in float64, stored in
    ``out``'s dtype."""
    for i in range(out.size):
        out[i] = _two(which, np.float64(x[i]), np.float64(y[i]))
