"""The rest of ``torch.special``: ``zeta``, ``igamma`` / ``igammac`` (``gammainc`` /
``gammaincc``), the Bessel and Airy functions and the orthogonal polynomials
(ops/special_functions.py, ops/bessel_polynomials.py; kernels/special.py, kernels/bessel.py,
kernels/orthopoly.py).

Accuracy against mpmath in float64 (the bounds below are the ones the module docstrings
state: relative where the function does not oscillate, in ulp of the local amplitude near
the zeros of the ones that do, in ulp of the recurrence's largest term times the degree for
the polynomials); values at the ends, poles and NaN against PyTorch (with the known
differences); gradients, errors, dtypes, scalar overloads and methods against PyTorch;
compiled == eager. The registry-driven tests (reference, PyTorch oracle, gradcheck, CUDA)
cover each op's samples.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from jitgrad.kernels.bessel import BESSEL, bessel_map
from jitgrad.kernels.orthopoly import POLYNOMIALS, polynomial_map
from jitgrad.kernels.special import FUNCTIONS2, special_map2

import jitgrad
from jitgrad.autograd import gradcheck, gradgradcheck

mp = pytest.importorskip("mpmath")

_RNG = np.random.default_rng(20261130)
INF, NAN = math.inf, math.nan


def _u(lo, hi, n):
    return _RNG.uniform(lo, hi, n)


def _ulps(got: float, exact, scale=None) -> float:
    """``|got - exact|`` in ulp of ``max(|exact|, scale)`` (0 for an overflow to the right
    infinity)."""
    e = float(exact)
    if math.isinf(e):
        return 0.0 if got == e else math.inf
    s = max(abs(e), scale or 0.0)
    if s == 0.0:
        return 0.0 if got == 0.0 else math.inf
    return float(abs(mp.mpf(got) - exact)) / float(np.spacing(s))


def _two(name, x, y):
    x, y = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    out = np.empty(x.shape)
    special_map2(FUNCTIONS2[name], np.ascontiguousarray(x).ravel(),
                 np.ascontiguousarray(y).ravel(), out.reshape(-1))
    return out


def _bessel(name, x):
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty_like(x)
    bessel_map(BESSEL[name], x.reshape(-1), out.reshape(-1))
    return out


def _poly(name, x, n):
    x, n = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(n, np.float64))
    out = np.empty(x.shape)
    polynomial_map(POLYNOMIALS[name], np.ascontiguousarray(x).ravel(),
                   np.ascontiguousarray(n).ravel(), out.reshape(-1))
    return out


# ------------------------------------------------------------------------------ zeta
def _zeta_ref(x, q, terms=30):
    """Hurwitz zeta at mpmath's precision: the direct sum until ``q + N >= x + 60``, then
    Euler-Maclaurin (mpmath's own ``zeta(s, a)`` is wrong for some large ``s`` and ``a``,
    e.g. (33.75, 133.9), by 1e-11 relative)."""
    x, q = mp.mpf(x), mp.mpf(q)
    n = max(0, int(mp.ceil(x + 60 - q)))
    s = mp.fsum((q + k) ** -x for k in range(n))
    a = q + n
    t = a ** (1 - x) / (x - 1) + a ** -x / 2
    rising, power = x, a ** (-x - 1)
    for j in range(1, terms + 1):
        t += mp.bernoulli(2 * j) / mp.factorial(2 * j) * rising * power
        rising *= (x + 2 * j - 1) * (x + 2 * j)
        power /= a * a
    return s + t


ZETA_CASES = {
    # (x, q, bound in ulp)
    "general": (_u(1.001, 60, 120), np.exp(_u(-4, 5, 120)), 4),
    "near x=1": (1 + 10.0 ** -_u(1, 10, 30), np.exp(_u(-2, 3, 30)), 4),
    "large x": (_u(50, 2000, 30), _u(0.5, 3, 30), 2),
    "large q": (_u(1.5, 10, 30), 10.0 ** _u(5, 300, 30), 2),
    # q < 0 with an integer x: the terms cancel (as polygamma's at negative arguments)
    "negative q": (_RNG.integers(2, 12, 60).astype(float), -_u(0.01, 20, 60), 16),
}


@pytest.mark.parametrize("case", sorted(ZETA_CASES))
def test_zeta_accuracy_against_mpmath(case):
    xs, qs, bound = ZETA_CASES[case]
    got = _two("zeta", xs, qs)
    with mp.workdps(40):
        for x, q, g in zip(xs, qs, got):
            assert _ulps(g, _zeta_ref(x, q)) <= bound, (x, q, g)


# -------------------------------------------------------------------- igamma, igammac
def _p_ref(a, x):
    return mp.gammainc(mp.mpf(a), 0, mp.mpf(x), regularized=True)


def _q_ref(a, x):
    return mp.gammainc(mp.mpf(a), mp.mpf(x), mp.inf, regularized=True)


def _around(a, spread):
    """Points around ``a`` (the transition), and far below and above it."""
    return np.abs(np.r_[a * np.exp(_u(-3, 1.5, a.size)),
                        a * (1 + _RNG.normal(0, spread, a.size) / np.sqrt(a))])


IGAMMA_CASES = {
    # (a, x, bound in ulp): both functions, every region of DiDonato & Morris' map
    "a < 1": (np.exp(_u(math.log(1e-3), 0, 50)), None, 10),
    "1 <= a < 10": (_u(1, 10, 50), None, 8),
    "10 <= a < 170": (_u(10, 170, 40), None, 10),
    "small x": (np.exp(_u(math.log(1e-3), math.log(2), 40)), _u(0, 1.2, 40), 12),
}


@pytest.mark.parametrize("case", sorted(IGAMMA_CASES))
def test_incomplete_gamma_accuracy_against_mpmath(case):
    a, x, bound = IGAMMA_CASES[case]
    if x is None:
        x = _around(a, 1.0)
        a = np.r_[a, a]
    p, q = _two("igamma", a, x), _two("igammac", a, x)
    with mp.workdps(40):
        for ai, xi, pi, qi in zip(a, x, p, q):
            assert _ulps(pi, _p_ref(ai, xi)) <= bound, ("P", ai, xi, pi)
            assert _ulps(qi, _q_ref(ai, xi)) <= bound, ("Q", ai, xi, qi)


def test_incomplete_gamma_far_tails_of_large_a():
    """From ``a = 171`` (``Gamma(a)`` overflows) the prefactor ``x**a e**-x / Gamma(a)`` is
    the exponential of an exponent of size ``|log(result)|``: its rounding makes the relative
    error grow like ``|log(result)|`` ulp in the far tails (bound: 8 + 5 |log(result)| ulp;
    below 171 the power and the exponential are taken apart, a few ulp)."""
    a = _u(171, 400, 30)
    x = a * np.exp(_u(-1.5, 1.0, 30))
    p, q = _two("igamma", a, x), _two("igammac", a, x)
    with mp.workdps(40):
        for ai, xi, pi, qi in zip(a, x, p, q):
            for got, exact in ((pi, _p_ref(ai, xi)), (qi, _q_ref(ai, xi))):
                if exact > 1e-300:
                    assert _ulps(got, exact) <= 8 + 5 * abs(math.log(float(exact))), (ai, xi)


def _p_series_ref(a, x):
    """``P(a, x)`` at mpmath's precision by its series (mpmath's gammainc does not converge
    for ``a`` this large)."""
    a, x = mp.mpf(a), mp.mpf(x)
    term = total = 1 / a
    k = 0
    while term > total * mp.mpf(10) ** -30:
        k += 1
        term *= x / (a + k)
        total += term
    return total * mp.exp(a * mp.log(x) - x - mp.loggamma(a))


def test_incomplete_gamma_for_large_a():
    """From ``a = 3e5``: Temme's uniform expansion (two terms), within 16 ulp around the
    transition (|x - a| <= 2 sqrt(a)), where ``P`` and ``Q`` are not small; below, the series
    and the continued fraction (thousands of terms), within ``8 + 5 |log(result)|`` ulp."""
    a = np.array([3e5, 1e6, 2e6])
    x = a * (1 + np.array([-1.7, 0.4, 1.9]) / np.sqrt(a))
    p, q = _two("igamma", a, x), _two("igammac", a, x)
    with mp.workdps(40):
        for ai, xi, pi, qi in zip(a, x, p, q):
            exact = _p_series_ref(ai, xi)
            assert _ulps(pi, exact) <= 16, (ai, xi, pi)
            assert _ulps(qi, 1 - exact) <= 16, (ai, xi, qi)
    # between 171 and 3e5 (the series and the fraction, the prefactor by Stirling's series)
    a = np.array([2e3, 2e3, 5e4, 5e4])
    x = a * (1 + np.array([-2.5, 1.2, -0.8, 3.0]) / np.sqrt(a))
    p, q = _two("igamma", a, x), _two("igammac", a, x)
    with mp.workdps(40):
        for ai, xi, pi, qi in zip(a, x, p, q):
            exact = _p_series_ref(ai, xi)
            for got, want in ((pi, exact), (qi, 1 - exact)):
                assert _ulps(got, want) <= 8 + 5 * abs(math.log(float(want))), (ai, xi)
    # huge a: still in (0, 1), P + Q = 1, P(a, a) -> 1/2 + 1/(3 sqrt(2 pi a))
    huge = np.array([1e12, 1e20])
    got = _two("igamma", huge, huge)
    np.testing.assert_allclose(got, 0.5 + 1 / (3 * np.sqrt(2 * np.pi * huge)), rtol=1e-15)
    np.testing.assert_allclose(got + _two("igammac", huge, huge), 1.0, rtol=1e-15)


# ---------------------------------------------------------------------------- Bessel
def _amplitude(v):
    """The envelope ``sqrt(2 / (pi x))`` of J and Y beyond 2 (their errors are absolute
    there, near the zeros)."""
    return math.sqrt(2 / (math.pi * abs(v))) if abs(v) >= 2 else 0.0


def _ai_amplitude(v):
    return abs(v) ** -0.25 / math.sqrt(math.pi) if v < -1 else 0.0


_POS = np.r_[_u(1e-3, 2, 30), _u(2, 25, 50), _u(25, 400, 20), 10.0 ** _u(3, 15, 10),
             [1e-300, 1e-20, 0.5, 2.0, 25.0]]
_BOTH = np.r_[_POS, -_POS[::3]]
BESSEL_CASES = {
    # name: (mpmath reference, inputs, bound in ulp, scale of the absolute part)
    "bessel_j0": (lambda v: mp.besselj(0, v), _BOTH, 6, _amplitude),
    "bessel_j1": (lambda v: mp.besselj(1, v), _BOTH, 6, _amplitude),
    "bessel_y0": (lambda v: mp.bessely(0, v), _POS, 6,
                  lambda v: 0.5 if v < 2 else _amplitude(v)),  # (a zero at 0.89)
    "bessel_y1": (lambda v: mp.bessely(1, v), _POS, 6, _amplitude),
    "modified_bessel_k0": (lambda v: mp.besselk(0, v), np.r_[_POS[:90], _u(400, 700, 10)],
                           10, None),
    "modified_bessel_k1": (lambda v: mp.besselk(1, v), np.r_[_POS[:90], _u(400, 700, 10)],
                           10, None),
    "scaled_modified_bessel_k0": (lambda v: mp.exp(v) * mp.besselk(0, v), _POS, 10, None),
    "scaled_modified_bessel_k1": (lambda v: mp.exp(v) * mp.besselk(1, v), _POS, 10, None),
    "spherical_bessel_j0": (lambda v: mp.sin(v) / v, _BOTH, 2, None),
    "airy_ai": (mp.airyai, np.r_[_u(-2.5, 1, 40), _u(1, 100, 30), -_u(2.5, 12, 40),
                                 -10.0 ** _u(1.1, 6, 20), [0.0, -2.5, 1.0, 103.0]], 12,
                _ai_amplitude),
}


@pytest.mark.parametrize("name", sorted(BESSEL_CASES))
def test_bessel_accuracy_against_mpmath(name):
    ref, xs, bound, scale = BESSEL_CASES[name]
    got = _bessel(name, xs)
    with mp.workdps(40):
        for v, g in zip(xs, got):
            exact = ref(mp.mpf(v))
            assert _ulps(g, exact, scale(v) if scale else None) <= bound, (v, g, exact)


def test_modified_bessel_i_are_i0_and_i1_without_gradient():
    x = jitgrad.tensor(np.r_[_u(-30, 30, 50), 0.0, -0.0, 700.0], requires_grad=True)
    i0, i1 = jitgrad.special.modified_bessel_i0(x), jitgrad.special.modified_bessel_i1(x)
    assert not i0.requires_grad and not i1.requires_grad
    np.testing.assert_array_equal(i0.numpy(), jitgrad.i0(x).detach().numpy())
    np.testing.assert_array_equal(i1.numpy(), jitgrad.special.i1(x).detach().numpy())


# ----------------------------------------------------------------------- polynomials
def _sequence(name, x, n):
    """p_0(x) .. p_n(x) by the recurrence at mpmath's precision."""
    x = mp.mpf(x)
    if name.startswith("shifted_"):
        x, name = 2 * x - 1, name[8:]
    first = {"chebyshev_polynomial_t": x, "chebyshev_polynomial_u": 2 * x,
             "chebyshev_polynomial_v": 2 * x - 1, "chebyshev_polynomial_w": 2 * x + 1,
             "hermite_polynomial_h": 2 * x, "hermite_polynomial_he": x,
             "laguerre_polynomial_l": 1 - x, "legendre_polynomial_p": x}[name]
    out = [mp.mpf(1), first][:n + 1]
    for k in range(1, n):
        p, q = out[-2], out[-1]
        if name.startswith("chebyshev"):
            r = 2 * x * q - p
        elif name == "hermite_polynomial_h":
            r = 2 * x * q - 2 * k * p
        elif name == "hermite_polynomial_he":
            r = x * q - k * p
        elif name == "laguerre_polynomial_l":
            r = ((2 * k + 1 - x) * q - k * p) / (k + 1)
        else:
            r = ((2 * k + 1) * x * q - k * p) / (k + 1)
        out.append(r)
    return out


@pytest.mark.parametrize("name", sorted(POLYNOMIALS))
def test_polynomial_accuracy_against_mpmath(name):
    """Within ``4 n`` ulp of the largest ``|p_k(x)|``, ``k <= n`` (and 1): the forward error
    of the recurrence, and of the trigonometric forms."""
    lo, hi = (0.0, 1.0) if name.startswith("shifted") else (-1.0, 1.0)
    if name.startswith("hermite"):
        lo, hi = -5.0, 5.0
    elif name.startswith("laguerre"):
        lo, hi = 0.0, 20.0
    xs = np.r_[_u(lo, hi, 40), _u(hi, hi + 1, 10), [lo, hi, 0.5 * (lo + hi)]]
    ns = np.r_[_RNG.integers(0, 40, 40), _RNG.integers(0, 15, 10), [12, 12, 9]]
    got = _poly(name, xs, ns)
    with mp.workdps(50):
        for x, n, g in zip(xs, ns, got):
            seq = _sequence(name, x, int(n))
            size = max([1.0] + [abs(float(v)) for v in seq])
            assert _ulps(g, seq[-1], size) <= 4 * max(n, 1), (x, n, g, float(seq[-1]))


def test_polynomial_trigonometric_forms_match_the_recurrence():
    """Inside (-1, 1) from degree 7 (T) or 9 (U, V, W) the trigonometric forms take over,
    at |x| by parity: continuous with the recurrence (within n ulp of 1)."""
    x = np.r_[np.linspace(-0.999, 0.999, 41), -1 + 1e-9, 1 - 1e-9]
    for name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u",
                 "chebyshev_polynomial_v", "chebyshev_polynomial_w"):
        for n in (7, 9, 25):
            got = _poly(name, x, n)
            with mp.workdps(40):
                want = [float(_sequence(name, v, n)[-1]) for v in x]
            np.testing.assert_allclose(got, want, rtol=0, atol=4 * n * 2.3e-16 * max(
                1, np.max(np.abs(want))), err_msg=f"{name} n={n}")


# ------------------------------------------------------------ edges against PyTorch
@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _compare_exact_pattern(got, want, rtol):
    """Same NaN, infinities and signs; finite values within ``rtol``."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol, atol=1e-300)
    num = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[num] * (got[num] != 0)),
                                  np.signbit(want[num] * (want[num] != 0)))


def test_incomplete_gamma_edges_match_torch(torch):
    """Every pair of ends, poles, NaN and ordinary values: PyTorch's order of checks
    (igamma(nan, 0) is 0, igamma(inf, nan) is 0...), its values elsewhere (within 1e-8:
    PyTorch's asymptotic series near ``x = a`` is off by ~5e-10 at ``a = 50``)."""
    v = [-1.0, -0.0, 0.0, 1e-300, 0.5, 1.0, 5.0, 50.0, 1e20, INF, NAN]
    a, x = np.meshgrid(v, v, indexing="ij")
    for name in ("igamma", "igammac"):
        got = getattr(jitgrad, name)(jitgrad.tensor(a), jitgrad.tensor(x)).numpy()
        want = getattr(torch, name)(torch.tensor(a), torch.tensor(x)).numpy()
        _compare_exact_pattern(got, want, rtol=1e-8)


def test_zeta_edges_match_torch(torch):
    """PyTorch's domain: inf at x = 1 and at the poles q = 0, -1, ...; NaN below x = 1 and
    for q < 0 with a non-integer x."""
    xs = [-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 2.5, 40.0, NAN]
    qs = [-2.0, -1.5, -0.0, 0.0, 0.5, 1.0, 2.0, 1e20, NAN]
    x, q = np.meshgrid(xs, qs, indexing="ij")
    got = jitgrad.special.zeta(jitgrad.tensor(x), jitgrad.tensor(q)).numpy()
    want = torch.special.zeta(torch.tensor(x), torch.tensor(q)).numpy()
    _compare_exact_pattern(got, want, rtol=1e-13)


def test_zeta_limits_where_torch_gives_nan():
    """KNOWN DIFFERENCE: PyTorch gives NaN for zeta(inf, q > 1) and zeta(x, inf); jitgrad
    the limits, 0 (and zeta(inf, 1) = 1, zeta(inf, q < 1) = inf, as PyTorch)."""
    got = jitgrad.special.zeta(jitgrad.tensor([INF, INF, INF, 2.0, 7.5]),
                               jitgrad.tensor([2.0, 1.0, 0.5, INF, INF])).tolist()
    assert got == [0.0, 1.0, INF, 0.0, 0.0]


EDGE_VALUES = [0.0, -0.0, 1e-300, -1e-300, 1e-20, -1.0, -2.5, 1.0, 30.0, 1e3, NAN]


@pytest.mark.parametrize("name", sorted(BESSEL))
def test_bessel_edges_match_torch(torch, name):
    """Zeros, tiny, negative and large arguments and NaN: PyTorch's values (its float64 J, Y
    and Ai are accurate to ~1e-6 only, hence the tolerance; the pattern of NaN, infinities
    and signs must be exact)."""
    x = np.array(EDGE_VALUES)
    got = getattr(jitgrad.special, name)(jitgrad.tensor(x)).numpy()
    want = getattr(torch.special, name)(torch.tensor(x)).numpy()
    _compare_exact_pattern(got, want, rtol=1e-5)


def test_bessel_limits_at_infinity_where_torch_gives_nan():
    """KNOWN DIFFERENCE: PyTorch's bessel_j0/j1/y0/y1 and airy_ai give NaN at +-inf (its
    trigonometric phase of inf), its modified_bessel_i0/i1 NaN at +-inf (as its i0); jitgrad
    gives the limits: 0 for J, Y (NaN at -inf: below its domain), Ai and the spherical j0, inf
    (+-inf for the odd I1) for I."""
    x = jitgrad.tensor([INF, -INF], dtype=jitgrad.float64)
    s = jitgrad.special
    for fn in (s.bessel_j0, s.bessel_j1, s.airy_ai, s.spherical_bessel_j0):
        assert fn(x).tolist() == [0.0, 0.0]
    for fn in (s.bessel_y0, s.bessel_y1):
        out = fn(x).tolist()
        assert out[0] == 0.0 and math.isnan(out[1])
    assert s.modified_bessel_i0(x).tolist() == [INF, INF]
    assert s.modified_bessel_i1(x).tolist() == [INF, -INF]


def test_large_arguments_keep_their_phase(torch):
    """J and Y at huge arguments take cos and sin of the argument itself (PyTorch subtracts
    pi/4 first and loses the phase: at 1e10 its J0 is off in the 6th digit)."""
    x = np.array([1e10, 3.7e14, 1e300])
    got = jitgrad.special.bessel_j0(jitgrad.tensor(x)).numpy()
    with mp.workdps(40):
        want = [float(mp.besselj(0, mp.mpf(v))) for v in x]
    np.testing.assert_allclose(got, want, rtol=1e-13)


# --------------------------------------------------------------------- polynomials
def test_polynomial_edges_match_torch(torch):
    """Degrees truncated toward 0; negative, NaN and infinite degrees give 0; the exact
    values at +-1 (0 and 1 for the shifted ones); PyTorch's recurrence at +-inf and NaN."""
    xs = [-1.0, -0.5, 0.0, 0.3, 1.0, 1.5, -2.0, INF, -INF, NAN, 0.999, -0.9999]
    ns = [-1.0, 0.0, 1.0, 2.0, 2.7, 3.0, 7.0, 8.0, 9.0, 10.0, 15.0, NAN, INF, -INF, 1e30]
    x, n = np.meshgrid(xs, ns, indexing="ij")
    for name in POLYNOMIALS:
        got = getattr(jitgrad.special, name)(jitgrad.tensor(x), jitgrad.tensor(n)).numpy()
        want = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True,
                                   err_msg=name)


# ------------------------------------------------------------------------ gradients
def test_zeta_gradient_in_q_matches_torch(torch):
    q = np.array([0.3, 1.2, 4.5, 30.0])
    for x in (np.array([2.0, 3.5, 6.0, 1.5]), 2.5):
        jq, tq = jitgrad.tensor(q, requires_grad=True), torch.tensor(q, requires_grad=True)
        jx = jitgrad.tensor(x) if isinstance(x, np.ndarray) else x
        tx = torch.tensor(x) if isinstance(x, np.ndarray) else x
        jy, ty = jitgrad.special.zeta(jx, jq), torch.special.zeta(tx, tq)
        assert type(jy.grad_fn).__name__ == type(ty.grad_fn).__name__
        (jy * jitgrad.tensor([1.0, -2.0, 0.5, 3.0])).sum().backward()
        (ty * torch.tensor([1.0, -2.0, 0.5, 3.0])).sum().backward()
        np.testing.assert_allclose(jq.grad.numpy(), tq.grad.numpy(), rtol=1e-12)


def test_zeta_and_incomplete_gamma_gradcheck():
    q = jitgrad.tensor([0.4, 1.3, 2.2], dtype=jitgrad.float64, requires_grad=True)
    x = jitgrad.tensor([2.5, 3.25, 4.0], dtype=jitgrad.float64)
    assert gradcheck(lambda t: jitgrad.special.zeta(x, t), (q,))
    assert gradgradcheck(lambda t: jitgrad.special.zeta(x, t), (q,))
    a = jitgrad.tensor([0.35, 2.7, 11.5], dtype=jitgrad.float64)
    z = jitgrad.tensor([0.8, 2.1, 9.0], dtype=jitgrad.float64, requires_grad=True)
    for fn in (jitgrad.igamma, jitgrad.igammac):
        assert gradcheck(lambda t, fn=fn: fn(a, t), (z,))
        assert gradgradcheck(lambda t, fn=fn: fn(a, t), (z,))


def test_incomplete_gamma_gradient_in_x_matches_torch(torch):
    a = np.array([[0.35], [2.7], [11.5]])
    x = np.array([0.8, 2.1, 9.0, 30.0])
    for name in ("igamma", "igammac"):
        jx, tx = jitgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        jy = getattr(jitgrad, name)(jitgrad.tensor(a), jx)
        ty = getattr(torch, name)(torch.tensor(a), tx)
        assert type(jy.grad_fn).__name__ == type(ty.grad_fn).__name__
        np.testing.assert_allclose(jy.detach().numpy(), ty.detach().numpy(), rtol=1e-13)
        jy.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_integer_a_gradient_is_accurate_where_torchs_is_not(torch):
    """KNOWN DIFFERENCE: with an integer ``a`` PyTorch's gradient takes ``lgamma(a)`` in
    float32 (its default dtype), ~1e-7 relative off in float64; jitgrad's takes it in the
    gradient's dtype: the same as with a float ``a``."""
    x = np.array([0.5, 2.0, 7.0])
    a = np.array([5, 7, 9])
    grads = []
    for av in (jitgrad.tensor(a), jitgrad.tensor(a, dtype=jitgrad.float64)):
        jx = jitgrad.tensor(x, requires_grad=True)
        jitgrad.igamma(av, jx).sum().backward()
        grads.append(jx.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    tx = torch.tensor(x, requires_grad=True)
    torch.igamma(torch.tensor(a), tx).sum().backward()
    np.testing.assert_allclose(grads[0], tx.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda M: M.special.zeta(M.tensor([2.5, 3.0], requires_grad=True), M.tensor([1.0, 2.0])),
    lambda M: M.special.zeta(M.tensor([2.5, 3.0], requires_grad=True), 1.5),
    lambda M: M.igamma(M.tensor([2.5], requires_grad=True), M.tensor([1.0])),
    lambda M: M.special.gammaincc(M.tensor([2.5], requires_grad=True),
                                  M.tensor([1.0], requires_grad=True)),
], ids=["zeta", "zeta scalar q", "igamma", "gammaincc"])
def test_derivative_not_implemented_matches_torch(torch, call):
    """PyTorch records the node, and its backward raises for the first argument."""
    t_out, j_out = call(torch), call(jitgrad)
    assert j_out.requires_grad and type(j_out.grad_fn).__name__ == type(t_out.grad_fn).__name__
    with pytest.raises(NotImplementedError) as t_err:
        t_out.sum().backward()
    with pytest.raises(NotImplementedError) as j_err:
        j_out.sum().backward()
    assert str(j_err.value) == str(t_err.value)


@pytest.mark.parametrize("name", sorted([*BESSEL, *POLYNOMIALS]))
def test_no_gradient_as_torch(torch, name):
    """PyTorch's Bessel functions and polynomials are not differentiable: their results do
    not require grad."""
    args = [np.array([0.5, 1.5])] + ([np.array([3.0, 4.0])] if name in POLYNOMIALS else [])
    jy = getattr(jitgrad.special, name)(*[jitgrad.tensor(a, requires_grad=True)
                                          for a in args])
    ty = getattr(torch.special, name)(*[torch.tensor(a, requires_grad=True) for a in args])
    assert jy.requires_grad is ty.requires_grad is False
    assert jy.grad_fn is None


# ---------------------------------------------------- dtypes, overloads, errors, methods
def test_dtypes_and_scalar_overloads_match_torch(torch):
    s_j, s_t = jitgrad.special, torch.special
    cases = [
        lambda s, M: s.zeta(2, M.tensor([1.5, 2.5])),
        lambda s, M: s.zeta(M.tensor([2.0, 3.0]), 2.5),
        lambda s, M: s.zeta(M.tensor([2, 3]), M.tensor([1, 2])),
        lambda s, M: s.zeta(M.tensor([2.0, 3.0], dtype=M.float64), M.tensor([1.5, 2.5])),
        lambda s, M: s.zeta(True, M.tensor([1.5, 2.5])),
        lambda s, M: s.gammainc(M.tensor([1, 2]), M.tensor([0.5, 1.5])),
        lambda s, M: s.gammaincc(M.tensor([1, 2]), M.tensor([1.0, 3.0], dtype=M.float64)),
        lambda s, M: s.gammainc(M.tensor([1.5, 2.0], dtype=M.float16),
                                M.tensor([0.5, 1.0], dtype=M.float16)),
        lambda s, M: s.bessel_j0(M.tensor([1, 2])),
        lambda s, M: s.airy_ai(M.tensor([-1.0, 1.0], dtype=M.float64)),
        lambda s, M: s.chebyshev_polynomial_t(M.tensor([0.3, 0.7]), 3),
        lambda s, M: s.chebyshev_polynomial_u(0.5, M.tensor([2, 3])),
        lambda s, M: s.hermite_polynomial_h(M.tensor([2, 3]), 2),
        lambda s, M: s.legendre_polynomial_p(M.tensor([0.25]), M.tensor([2.9])),
        lambda s, M: s.laguerre_polynomial_l(M.tensor([0.5], dtype=M.float64), M.tensor([4])),
    ]
    for i, case in enumerate(cases):
        got, want = case(s_j, jitgrad), case(s_t, torch)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], i
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2e-3,
                                   err_msg=str(i))


@pytest.mark.parametrize("call", [
    lambda M: M.special.zeta(2.0, 3.0),
    lambda M: M.special.chebyshev_polynomial_t(0.5, 3),
    lambda M: M.igamma(M.tensor([1.0]), 2.0),
    lambda M: M.special.gammaincc(1.0, M.tensor([1.0])),
    lambda M: M.special.zeta(M.tensor([2.0], dtype=M.float16), 1.0),
    lambda M: M.special.bessel_y1(M.tensor([2.0], dtype=M.float16)),
    lambda M: M.special.hermite_polynomial_he(M.tensor([2.0], dtype=M.float16), 3),
    lambda M: M.tensor([1, 2]).igamma_(M.tensor([0.5, 1.5])),
    lambda M: M.special.gammaincc(M.tensor([1, 2]), M.tensor([1, 3])),
    lambda M: M.igamma(M.tensor([True]), M.tensor([1], dtype=M.int32)),
], ids=["zeta numbers", "polynomial numbers", "igamma number", "gammaincc number",
        "zeta half", "bessel half", "polynomial half", "igamma_ integer", "gammaincc integers",
        "igamma int and bool"])
def test_errors_match_torch(torch, call):
    with pytest.raises(Exception) as t_err:
        call(torch)
    with pytest.raises(type(t_err.value)) as j_err:
        call(jitgrad)
    assert str(j_err.value) == str(t_err.value).split("\n")[0]


def test_methods_in_place_and_aliases(torch):
    a, x = [0.5, 2.0, 7.5], [1.0, 0.3, 9.0]
    for alias, name in (("gammainc", "igamma"), ("gammaincc", "igammac")):
        args = [jitgrad.tensor(a, dtype=jitgrad.float64), jitgrad.tensor(x, dtype=jitgrad.float64)]
        np.testing.assert_array_equal(getattr(jitgrad.special, alias)(*args).numpy(),
                                      getattr(jitgrad, name)(*args).numpy())
    for name in ("igamma", "igammac"):
        j, t = jitgrad.tensor(a, dtype=jitgrad.float64), torch.tensor(a, dtype=torch.float64)
        jo, to = jitgrad.tensor(x, dtype=jitgrad.float64), torch.tensor(x, dtype=torch.float64)
        np.testing.assert_allclose(getattr(j, name)(jo).numpy(), getattr(t, name)(to).numpy(),
                                   rtol=1e-14)
        assert getattr(j, name + "_")(jo) is j
        getattr(t, name + "_")(to)
        np.testing.assert_allclose(j.numpy(), t.numpy(), rtol=1e-14)


def test_float32_is_the_float64_result_rounded_once():
    rng = np.random.default_rng(4)
    x = rng.uniform(0.1, 9.0, 200).astype(np.float32)
    y = rng.uniform(0.1, 9.0, 200).astype(np.float32)
    s = jitgrad.special
    for name, call, xv, yv in [("zeta", s.zeta, x + 1, y), ("igamma", jitgrad.igamma, x, y),
                               ("bessel_y1", lambda a, b: s.bessel_y1(a), x, y),
                               ("airy_ai", lambda a, b: s.airy_ai(a), -x, y),
                               ("legendre", s.legendre_polynomial_p, x / 9, y * 2)]:
        f32 = call(jitgrad.tensor(xv), jitgrad.tensor(yv)).numpy()
        f64 = call(jitgrad.tensor(xv.astype(np.float64)),
                   jitgrad.tensor(yv.astype(np.float64))).numpy()
        assert f32.dtype == np.float32
        np.testing.assert_array_equal(f32, f64.astype(np.float32), err_msg=name)


def test_compiled_equals_eager_with_gradients():
    """zeta's and igamma's gradients, a Bessel function and a polynomial in one compiled
    function: the same values and gradients as eager, twice (the cached plan)."""
    def loss(q, x, a):
        y = jitgrad.special.zeta(3.0, q) + jitgrad.igammac(a, x) * jitgrad.special.bessel_j0(x)
        return (y + jitgrad.special.chebyshev_polynomial_t(x * 0.1, 5) + jitgrad.special.zeta(
            jitgrad.tensor([2.0, 4.0, 3.0, 2.0, 5.0, 2.0], dtype=jitgrad.float64), q)).sum()

    compiled = jitgrad.compile(loss)
    rng = np.random.default_rng(1)
    for _ in range(2):
        vals = [rng.uniform(0.3, 3.0, 6), rng.uniform(0.2, 8.0, 6), rng.uniform(0.5, 4.0, 6)]
        results = []
        for fn in (loss, compiled):
            q, x = (jitgrad.tensor(v, requires_grad=True) for v in vals[:2])
            out = fn(q, x, jitgrad.tensor(vals[2]))
            out.backward()
            results.append((out.item(), q.grad.numpy(), x.grad.numpy()))
        (e_out, *e_grads), (c_out, *c_grads) = results
        assert c_out == e_out
        for e, c in zip(e_grads, c_grads):
            np.testing.assert_array_equal(c, e)


# ------------------------------------------------------------------ the GPU dispatch
def test_gpu_path_uses_cupy_where_it_has_the_function_else_a_host_round_trip(monkeypatch):
    """On a GPU (CuPy arrays) the ops call ``cupyx.scipy.special`` by name, and the CPU
    kernel through a host round trip where CuPy lacks the function: checked with a stand-in
    CuPy array type and ``cupyx`` module (the simulator's device arrays are host memory, so
    the registry's CUDA tests take the host path)."""
    import sys
    import types

    from jitgrad.ops import special_functions as sf

    class FakeDeviceArray:
        def __init__(self, a):
            self.a = np.asarray(a)

    calls = []
    fake = types.ModuleType("cupyx.scipy.special")
    fake.zeta = lambda x, q: calls.append("zeta") or "device zeta"
    fake.k1e = lambda x: calls.append("k1e") or "device k1e"
    monkeypatch.setitem(sys.modules, "cupyx", types.ModuleType("cupyx"))
    monkeypatch.setitem(sys.modules, "cupyx.scipy", types.ModuleType("cupyx.scipy"))
    monkeypatch.setitem(sys.modules, "cupyx.scipy.special", fake)
    sys.modules["cupyx"].scipy = sys.modules["cupyx.scipy"]
    sys.modules["cupyx.scipy"].special = fake
    moved = []
    monkeypatch.setattr("jitgrad.devices.to_host",
                        lambda o: moved.append("host") or (o.a if isinstance(
                            o, FakeDeviceArray) else o))
    monkeypatch.setattr("jitgrad.cuda.runtime.to_device",
                        lambda a: moved.append("device") or FakeDeviceArray(a))
    d = FakeDeviceArray([2.0, 3.0])
    assert sf.special_ref("zeta")(d, np.float64(1.5)) == "device zeta"
    assert sf.special_ref("scaled_modified_bessel_k1")(d) == "device k1e"
    out = sf.special_ref("airy_ai")(d)  # not in CuPy: the host kernel, and back
    assert isinstance(out, FakeDeviceArray) and moved == ["host", "device"]
    np.testing.assert_array_equal(out.a, _bessel("airy_ai", [2.0, 3.0]))
    out = sf.special_ref("igamma")(d, np.float64(1.0))  # (the stand-in has no gammainc)
    np.testing.assert_array_equal(out.a, _two("igamma", [2.0, 3.0], 1.0))
    assert calls == ["zeta", "k1e"]
