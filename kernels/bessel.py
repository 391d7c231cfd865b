"""Bessel and Airy functions on the CPU: ``torch.special``'s ``bessel_j0``, ``bessel_j1``,
``bessel_y0``, ``bessel_y1``, ``modified_bessel_i0``, ``modified_bessel_i1``,
``modified_bessel_k0``, ``modified_bessel_k1``, ``scaled_modified_bessel_k0``,
``scaled_modified_bessel_k1``, ``spherical_bessel_j0`` and ``airy_ai``, one Numba loop over a
flat array (:func:`bessel_map`; :data:`BESSEL` numbers them).

Every function is evaluated in float64 (a float32 input is widened, its result rounded once)
with textbook methods, no coefficient tables:

* ``J0``, ``J1``, ``Y0``, ``Y1``: the ascending series (Abramowitz & Stegun 9.1.10, 9.1.11,
  with ``psi(k + 1) = H_k - gamma``) below 2; ``sqrt(2/(pi x)) (P cos chi - Q sin chi)``
  (A&S 9.2.5, 9.2.6) above, ``P + iQ`` from Hankel's integral by the trapezoidal rule up to
  25 and from its asymptotic expansion (A&S 9.2.9, 9.2.10) beyond, the phase ``chi`` from
  libm's ``cos x`` and ``sin x`` of the argument itself (so huge arguments keep it);
* ``K0``, ``K1`` and their scaled forms ``exp(x) K``: the ascending series (A&S 9.6.11,
  9.6.13) up to 1, the integral ``int exp(-x cosh t) cosh(nu t) dt`` (A&S 9.6.24) by the
  trapezoidal rule beyond; ``I0``, ``I1`` are :mod:`.special`'s;
* ``spherical_bessel_j0``: ``sin(x) / x``;
* ``airy_ai``: the Maclaurin series (A&S 10.4.2) for -2.5 < x < 1, ``sqrt(x/3) K_{1/3}(z) /
  pi`` (A&S 10.4.14, ``z = 2/3 x**1.5``) above, ``sqrt(-x)/2 (J_{1/3}(z) - Y_{1/3}(z)/sqrt3)``
  (A&S 10.4.15) below, ``J_{1/3}``, ``Y_{1/3}`` from Hankel's ``P + iQ`` as for order 0 and
  1 (his integral up to ``z = 25``, with ``u = s^6``; his expansion beyond);
  ``z`` is carried as a double-double (Dekker's exact products), so the phase of the
  oscillation and the exponent of the decay keep full accuracy however large ``|x|`` is.

Values off the real line's interior are the limits: 0 at +-inf for ``J``, ``Y``, the
spherical ``j0`` and ``Ai`` (PyTorch gives NaN for ``J``, ``Y`` and ``Ai`` there), NaN for
``Y`` and ``K`` below 0, -inf / inf at 0. Accuracy against mpmath (float64;
tests/ops/test_special_extended.py asserts it): ``J``, ``Y`` within 6 ulp of the larger of the
value and the envelope ``sqrt(2 / (pi x))`` (so absolute near their zeros), ``K`` within 10
ulp, ``Ai`` within 12 ulp (of its envelope for ``x < -1``), the spherical ``j0`` within 2.
"""

from __future__ import annotations

import cmath
import math

import numpy as np

from .cached import cached_njit
from .special import _bessel

__all__ = ["BESSEL", "bessel_map"]

#: function name -> the code :func:`bessel_map` takes
BESSEL: dict[str, int] = {
    "bessel_j0": 0, "bessel_j1": 1, "bessel_y0": 2, "bessel_y1": 3,
    "modified_bessel_i0": 4, "modified_bessel_i1": 5, "modified_bessel_k0": 6,
    "modified_bessel_k1": 7, "scaled_modified_bessel_k0": 8,
    "scaled_modified_bessel_k1": 9, "spherical_bessel_j0": 10, "airy_ai": 11,
}

_PI = math.pi
_EULER = 0.5772156649015329
_INF = math.inf
_NAN = math.nan
_SQRT3 = math.sqrt(3.0)
_GAMMA_5_6 = math.gamma(5.0 / 6.0)
# Ai(0) = 3**(-2/3) / Gamma(2/3) and -Ai'(0) = 3**(-1/3) / Gamma(1/3)
_AI0 = 3.0 ** (-2.0 / 3.0) / math.gamma(2.0 / 3.0)
_AIP0 = 3.0 ** (-1.0 / 3.0) / math.gamma(1.0 / 3.0)
# cos and sin of 5 pi / 12 (the phase shift of order 1/3: pi/4 + pi/6)
_C512 = math.cos(5.0 * math.pi / 12.0)
_S512 = math.sin(5.0 * math.pi / 12.0)


# ------------------------------------------------------------------------ J and Y
@cached_njit(nogil=True, error_model="numpy")
def _jy_series(x):
    """``(J0, J1, Y0, Y1)`` at ``0 < x < 2`` by their ascending series:
    ``J0 = sum (-x^2/4)^k / k!^2``, ``J1 = x/2 sum (-x^2/4)^k / (k! (k+1)!)``,
    ``Y0 = 2/pi ((log(x/2) + gamma) J0 - sum H_k (-x^2/4)^k / k!^2)``,
    ``Y1 = -2/(pi x) + 2/pi (log(x/2) + gamma) J1 - x/(2 pi) sum (H_k + H_(k+1))
    (-x^2/4)^k / (k! (k+1)!)``."""
    z = -0.25 * x * x
    t0 = 1.0  # (-x^2/4)^k / k!^2
    t1 = 1.0  # (-x^2/4)^k / (k! (k+1)!)
    j0 = 1.0
    j1 = 1.0
    s0 = 0.0
    s1 = 1.0  # H_0 + H_1
    h = 0.0
    k = 1
    while True:
        hk1 = h + 1.0 / k  # H_k
        t0 *= z / (k * k)
        t1 *= z / (k * (k + 1.0))
        j0 += t0
        j1 += t1
        s0 += hk1 * t0
        s1 += (2.0 * hk1 + 1.0 / (k + 1.0)) * t1
        h = hk1
        if abs(t0) <= 1e-17 * abs(j0) and abs(t1) <= 1e-17 * abs(j1):
            break
        k += 1
    j1 *= 0.5 * x
    lg = math.log(0.5 * x) + _EULER
    y0 = 2.0 / _PI * (lg * j0 - s0)
    y1 = -2.0 / (_PI * x) + 2.0 / _PI * lg * j1 - x / (2.0 * _PI) * s1
    return j0, j1, y0, y1


@cached_njit(nogil=True, error_model="numpy")
def _hankel_pq(nu, x):
    """Hankel's ``P_nu(x)``, ``Q_nu(x)`` (A&S 9.2.9, 9.2.10): ``t_k = t_(k-1)
    (4 nu^2 - (2k - 1)^2) / (8 k x)``, ``P = t0 - t2 + t4 ...``, ``Q = t1 - t3 ...``,
    summed until the terms stop shrinking or fall below the rounding."""
    mu = 4.0 * nu * nu
    t = 1.0
    p = 1.0
    q = 0.0
    sign_p = 1.0
    sign_q = 1.0
    k = 1
    while k < 200:
        nt = t * (mu - (2.0 * k - 1.0) ** 2) / (8.0 * k * x)
        if abs(nt) >= abs(t):
            break
        t = nt
        if k % 2 == 1:
            q += sign_q * t
            sign_q = -sign_q
        else:
            sign_p = -sign_p
            p += sign_p * t
        if abs(t) <= 1e-17:
            break
        k += 1
    return p, q


@cached_njit(nogil=True, error_model="numpy")
def _hankel_integral(order, x):
    """Hankel's ``P + iQ`` for order 0 or 1 exactly, from his integral ``H1_nu(x) =
    sqrt(2/(pi x)) exp(i chi) / Gamma(nu + 1/2) int_0^inf exp(-u) u^(nu - 1/2)
    (1 + iu / (2x))^(nu - 1/2) du`` (Hankel's integral; Watson's Treatise, 7.2): with
    ``u = s^2`` a Gaussian
    times a function analytic in a strip of half-width ``sqrt(x)``, by the trapezoidal rule
    (step 1/4, geometric convergence; ``x >= 2``)."""
    h = 0.25
    inv2x = 0.5 / x
    total = 0.5 + 0.0j if order == 0 else 0.0j
    k = 1
    while True:
        s2 = (k * h) ** 2
        e = math.exp(-s2)
        w = cmath.sqrt(1.0 + 1j * (s2 * inv2x))
        total += e / w if order == 0 else s2 * e * w
        if e < 1e-18:
            break
        k += 1
    total *= h * (2.0 if order == 0 else 4.0) / math.sqrt(_PI)
    return total.real, total.imag


@cached_njit(nogil=True, error_model="numpy")
def _hankel_integral_third(x):
    """Hankel's ``P + iQ`` of order 1/3 (``x >= 2``), from the same integral with
    ``u = s^6``: ``int_0^inf 6 s^4 exp(-s^6) (1 + i s^6 / (2x))^(-1/6) ds / Gamma(5/6)`` (no
    fractional power at 0: analytic, so the trapezoidal rule converges geometrically; step
    1/25, the strip being ~0.3 wide at ``x = 2``)."""
    h = 0.04
    p = 0.0
    q = 0.0
    k = 1
    while True:
        s = k * h
        s6 = s ** 6
        e = 6.0 * s ** 4 * math.exp(-s6)
        t = s6 / (2.0 * x)
        r = e * (1.0 + t * t) ** (-1.0 / 12.0)  # |1 + it|^(-1/6)
        phi = math.atan(t) / 6.0  # -arg((1 + it)^(-1/6))
        p += r * math.cos(phi)
        q -= r * math.sin(phi)
        if s6 > 42.0:
            break
        k += 1
    return p * h / _GAMMA_5_6, q * h / _GAMMA_5_6


@cached_njit(nogil=True, error_model="numpy")
def _jy(order, x):
    """``(J_order(x), Y_order(x))`` for ``x > 0``, order 0 or 1."""
    if x < 2.0:
        j0, j1, y0, y1 = _jy_series(x)
        return (j0, y0) if order == 0 else (j1, y1)
    if x < 25.0:
        p, q = _hankel_integral(order, x)
    else:
        p, q = _hankel_pq(float(order), x)
    c = math.cos(x)
    s = math.sin(x)
    amp = math.sqrt(2.0 / (_PI * x))
    # cos and sin of x - pi/4 (order 0) or x - 3 pi/4 (order 1), times sqrt 2
    if order == 0:
        cc = c + s
        ss = s - c
    else:
        cc = s - c
        ss = -(s + c)
    r = amp * math.sqrt(0.5)
    return r * (p * cc - q * ss), r * (p * ss + q * cc)


@cached_njit(nogil=True, error_model="numpy")
def bessel_j(order, x):
    """``J_order(x)``, order 0 or 1 (even / odd in ``x``; 0 at +-inf)."""
    a = abs(x)
    if a != a:
        return _NAN
    if a == 0.0:
        return 1.0 if order == 0 else x
    if a == _INF:
        return 0.0
    j = _jy(order, a)[0]
    return -j if (order == 1 and x < 0.0) else j


@cached_njit(nogil=True, error_model="numpy")
def bessel_y(order, x):
    """``Y_order(x)``, order 0 or 1: NaN below 0, -inf at 0, 0 at inf."""
    if x != x or x < 0.0:
        return _NAN
    if x == 0.0:
        return -_INF
    if x == _INF:
        return 0.0
    return _jy(order, x)[1]


# ------------------------------------------------------------------------------- K
@cached_njit(nogil=True, error_model="numpy")
def _k_series(x):
    """``(K0, K1)`` at ``0 < x <= 1`` by their ascending series:
    ``K0 = -(log(x/2) + gamma) I0 + sum H_k (x^2/4)^k / k!^2``,
    ``K1 = 1/x + (log(x/2) + gamma) I1 - x/4 sum (H_k + H_(k+1)) (x^2/4)^k / (k! (k+1)!)``."""
    z = 0.25 * x * x
    t0 = 1.0
    t1 = 1.0
    i0 = 1.0
    i1 = 1.0
    s0 = 0.0
    s1 = 1.0
    h = 0.0
    k = 1
    while True:
        hk1 = h + 1.0 / k
        t0 *= z / (k * k)
        t1 *= z / (k * (k + 1.0))
        i0 += t0
        i1 += t1
        s0 += hk1 * t0
        s1 += (2.0 * hk1 + 1.0 / (k + 1.0)) * t1
        h = hk1
        if t0 <= 1e-17 * i0 and t1 <= 1e-17 * i1:
            break
        k += 1
    i1 *= 0.5 * x
    lg = math.log(0.5 * x) + _EULER
    return s0 - lg * i0, 1.0 / x + lg * i1 - 0.25 * x * s1


@cached_njit(nogil=True, error_model="numpy")
def _k_integral(nu, x):
    """``exp(x) K_nu(x)`` for ``x >= 1/2`` (nu 0, 1 or 1/3): ``K_nu(x) = int_0^inf
    exp(-x cosh t) cosh(nu t) dt`` (A&S 9.6.24) with ``s = 2 sqrt(x) sinh(t/2)``,
    ``exp(x) K_nu(x) = x**-1/2 int_0^inf exp(-s^2/2) cosh(nu t) / cosh(t/2) ds``, by the
    trapezoidal rule (step 1/4: for a Gaussian times a function analytic in a strip it
    converges geometrically, below the rounding here); every term positive, so a few ulp."""
    rx = 0.5 / math.sqrt(x)
    h = 0.25
    total = 0.5  # the term at s = 0, halved
    k = 1
    while True:
        s = k * h
        e = math.exp(-0.5 * s * s)
        u = s * rx  # sinh(t / 2)
        c = math.sqrt(1.0 + u * u)  # cosh(t / 2)
        if nu == 0.0:
            total += e / c
        elif nu == 1.0:
            total += e * (1.0 + 2.0 * u * u) / c
        else:
            total += e * math.cosh(2.0 * nu * math.asinh(u)) / c
        if e < 1e-18:
            break
        k += 1
    return total * h / math.sqrt(x)


@cached_njit(nogil=True, error_model="numpy")
def bessel_k(order, x, scaled):
    """``K_order(x)`` (``exp(x) K_order(x)`` if ``scaled``), order 0 or 1: NaN below 0, inf
    at 0, 0 at inf."""
    if x != x or x < 0.0:
        return _NAN
    if x == 0.0:
        return _INF
    if x == _INF:
        return 0.0
    if x <= 1.0:
        k0, k1 = _k_series(x)
        k = k0 if order == 0 else k1
        return k * math.exp(x) if scaled else k
    k = _k_integral(float(order), x)
    if scaled:
        return k
    if x > 700.0:  # exp(-x) is subnormal there: halves keep the product's bits
        h = math.exp(-0.5 * x)
        return k * h * h
    return k * math.exp(-x)


# --------------------------------------------------------------------------- Airy
@cached_njit(nogil=True, error_model="numpy")
def _two_prod(a, b):
    """``a * b`` as ``hi + lo`` exactly (Dekker's product)."""
    p = a * b
    c = 134217729.0 * a
    ah = c - (c - a)
    al = a - ah
    c = 134217729.0 * b
    bh = c - (c - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@cached_njit(nogil=True, error_model="numpy")
def _zeta_airy(t):
    """``2/3 t**1.5`` for ``t > 0`` as ``hi + lo`` (error ~1e-32 relative): ``sqrt t`` and
    its residual, ``t sqrt t`` and the division by 3 in Dekker's exact products."""
    s = math.sqrt(t)
    hi, lo = _two_prod(s, s)
    s_lo = ((t - hi) - lo) / (2.0 * s)  # t = (s + s_lo)^2 to second order
    p, p_lo = _two_prod(t, s)
    p_lo += t * s_lo
    p2 = 2.0 * p  # exact
    z = p2 / 3.0
    m, m_lo = _two_prod(z, 3.0)
    z_lo = ((p2 - m) - m_lo + 2.0 * p_lo) / 3.0
    return z, z_lo


@cached_njit(nogil=True, error_model="numpy")
def _airy_series(x):
    """``Ai(x) = Ai(0) f(x) + Ai'(0) g(x)``, ``f = sum x^3k / ((2 3)(5 6)...((3k-1) 3k))``,
    ``g = sum x^(3k+1) / ((3 4)(6 7)...(3k (3k+1)))`` (A&S 10.4.2-10.4.3)."""
    x3 = x * x * x
    f = 1.0
    g = x
    tf = 1.0
    tg = x
    k = 1
    while True:
        tf *= x3 / ((3.0 * k - 1.0) * (3.0 * k))
        tg *= x3 / ((3.0 * k) * (3.0 * k + 1.0))
        f += tf
        g += tg
        if abs(tf) <= 1e-17 * abs(f) and abs(tg) <= 1e-17 * abs(g):
            break
        k += 1
    return _AI0 * f - _AIP0 * g


@cached_njit(nogil=True, error_model="numpy")
def airy_ai(x):
    """The Airy function ``Ai(x)`` (0 at +-inf, its limits)."""
    if x != x:
        return _NAN
    if x == _INF or x == -_INF:
        return 0.0
    if -2.5 < x < 1.0:
        return _airy_series(x)
    if x > 0.0:
        z, z_lo = _zeta_airy(x)
        if z > 745.0:
            return 0.0
        k = _k_integral(1.0 / 3.0, z)  # exp(z) K_1/3(z)
        return math.sqrt(x / 3.0) / _PI * k * math.exp(-z) * (1.0 - z_lo)
    t = -x
    z, z_lo = _zeta_airy(t)
    if z < 25.0:
        p, q = _hankel_integral_third(z)
    else:
        p, q = _hankel_pq(1.0 / 3.0, z)
    c = math.cos(z)
    s = math.sin(z)
    c, s = c - z_lo * s, s + z_lo * c  # cos and sin of z + z_lo
    # chi = z - 5 pi / 12: J = amp (P cos chi - Q sin chi), Y = amp (P sin chi + Q cos chi)
    cc = c * _C512 + s * _S512
    ss = s * _C512 - c * _S512
    amp = math.sqrt(2.0 / (_PI * z))
    j = amp * (p * cc - q * ss)
    y = amp * (p * ss + q * cc)
    return 0.5 * math.sqrt(t) * (j - y / _SQRT3)


# ---------------------------------------------------------------------------- loop
@cached_njit(nogil=True, error_model="numpy")
def _one(which, v):
    if which == 0:
        return bessel_j(0, v)
    if which == 1:
        return bessel_j(1, v)
    if which == 2:
        return bessel_y(0, v)
    if which == 3:
        return bessel_y(1, v)
    if which == 4:
        return _bessel(0, v)
    if which == 5:
        return _bessel(1, v)
    if which == 6:
        return bessel_k(0, v, False)
    if which == 7:
        return bessel_k(1, v, False)
    if which == 8:
        return bessel_k(0, v, True)
    if which == 9:
        return bessel_k(1, v, True)
    if which == 10:
        if v == 0.0:
            return 1.0
        if v == _INF or v == -_INF:
            return 0.0
        return math.sin(v) / v
    return airy_ai(v)


@cached_njit(nogil=True, error_model="numpy")
def bessel_map(which, x, out):
    """``out[i] = f(x[i])`` for the function numbered ``which`` (:data:`BESSEL`), over flat
    arrays; computed in float64, stored in ``out``'s dtype."""
    for i in range(x.size):
        out[i] = _one(which, np.float64(x[i]))
