"""Special inputs give what NumPy gives: signed zeros, infinities, NaN, subnormals,
overflow/underflow thresholds, pow's C99 rules; and dtype dispatch works from jitted and
plain Python code."""

import math

import numpy as np
import pytest
from jitgrad.kernels import vmath
from jitgrad.kernels.vmath import FUNCTIONS, ULP_BOUNDS
from jitgrad.kernels.vmath import testing as T
from numba import njit, types

UNARY = [name for name in FUNCTIONS if name != "pow"]
DTYPES = [np.float32, np.float64]


def numpy_value(name, *cols):
    """What NumPy (or the stable textbook formula where NumPy has none) returns."""
    x = cols[0]
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            wide = x.astype(np.float64)
            e = np.exp(-np.abs(wide))
            return (np.where(wide >= 0, 1, e) / (1 + e)).astype(x.dtype)
        if name == "softplus":
            return np.logaddexp(x.dtype.type(0), x)
        if name == "erf":
            return np.array([math.erf(float(v)) for v in x]).astype(x.dtype)
        if name == "rsqrt":
            return (1 / np.sqrt(x)).astype(x.dtype)
        if name == "pow":
            return np.power(x, cols[1])
        return getattr(np, name)(x)


def assert_like_numpy(name, *cols):
    """Same NaN-ness, same infinities, same zeros with the same sign; other values within
    the documented bound of the exact result."""
    ours, ref = T.evaluate(name, *cols), numpy_value(name, *cols)
    exact = T.reference(name, *cols)
    err = T.ulp_error(ours, exact, cols[0].dtype)
    bound = ULP_BOUNDS[(name, np.dtype(cols[0].dtype).name)]
    for i in range(ours.size):
        a, b = ours[i], ref[i]
        at = tuple(c[i] for c in cols)
        if np.isnan(b):
            assert np.isnan(a), f"{name}{at} = {a}, NumPy gives nan"
        elif np.isinf(b) or b == 0:
            assert a == b and np.signbit(a) == np.signbit(b), f"{name}{at} = {a}, NumPy {b}"
        else:
            assert np.isfinite(a) and a != 0 and err[i] <= bound, f"{name}{at} = {a} vs {b}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_special_inputs(name, dtype):
    values = T.special_values(dtype)
    domain = vmath.ACCURATE_DOMAIN.get((name, np.dtype(dtype).name))
    if domain is not None:  # sin/cos of huge finite x: see ACCURATE_DOMAIN
        values = values[~(np.abs(values) >= domain) | ~np.isfinite(values)]
    assert_like_numpy(name, values)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pow_special_grid(dtype):
    """All pairs of special values, negative bases and (non-)integer exponents."""
    bases = np.concatenate([T.special_values(dtype), np.array([-8, -2, -1, -0.5, 0.5], dtype)])
    exps = np.concatenate([T.special_values(dtype),
                           np.array([-3, -2, -1, -0.5, 0.5, 1, 2, 3, 0.3, -0.3], dtype)])
    x, y = (a.ravel() for a in np.meshgrid(bases, exps))
    assert_like_numpy("pow", x, y)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pow_integer_and_simple_exponents_are_exact(dtype):
    rng = np.random.default_rng(1)
    x = rng.uniform(-100, 100, 10_000).astype(dtype)
    for y, expect in [(2, x * x), (1, x), (-1, 1 / x), (0, np.ones_like(x))]:
        got = T.evaluate("pow", x, np.full_like(x, y))
        np.testing.assert_array_equal(got, expect)
    pos = np.abs(x)
    np.testing.assert_array_equal(T.evaluate("pow", pos, np.full_like(x, 0.5)), np.sqrt(pos))
    ints = np.array([-8, -3, -2, 2, 3, 5, 10], dtype)
    for k in (3, 5, 7):
        got = T.evaluate("pow", ints, np.full_like(ints, k))
        np.testing.assert_array_equal(got, ints.astype(np.float64) ** k)  # exact in dtype
    assert np.isnan(T.evaluate("pow", np.array([-8.0], dtype), np.array([1 / 3], dtype))[0])


def _threshold(fn, dtype, lo, hi, *, above):
    """Smallest x in [lo, hi] (as float bits) where fn(x) is `above`-true, by bisection."""
    ibits = np.int32 if dtype == np.float32 else np.int64
    a, b = (int(v) for v in np.array([lo, hi], dtype=dtype).view(ibits))  # lo, hi > 0
    while b - a > 1:
        mid = (a + b) // 2
        x = np.array([mid], dtype=ibits).view(dtype)
        if above(fn(x)[0]):
            b = mid
        else:
            a = mid
    return b


def _sign_flipped(fn):
    return lambda x: fn(-x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["exp", "expm1"])
def test_overflow_threshold_matches_numpy(name, dtype):
    ours = _threshold(lambda x: T.evaluate(name, x), dtype, 1.0, 1000.0, above=np.isinf)
    with np.errstate(over="ignore"):
        ref = _threshold(getattr(np, name), dtype, 1.0, 1000.0, above=np.isinf)
    assert abs(int(ours) - int(ref)) <= 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["exp", "sigmoid", "softplus"])
def test_underflow_threshold_matches_numpy(name, dtype):
    """The most negative x with a nonzero result (subnormals included)."""
    def is_zero(v):
        return v == 0

    ours = _threshold(_sign_flipped(lambda x: T.evaluate(name, x)), dtype, 1.0, 1000.0,
                      above=is_zero)
    with np.errstate(under="ignore"):
        ref = _threshold(_sign_flipped(lambda x: numpy_value(name, x)), dtype, 1.0, 1000.0,
                         above=is_zero)
    assert abs(int(ours) - int(ref)) <= 1


def test_documented_examples():
    f32 = np.float32
    assert vmath.sigmoid(f32(-100.0)) == f32(3.7200760e-44)  # subnormal, not 0
    assert 0 < vmath.sigmoid(-700.0) < 1e-300
    assert vmath.sigmoid(f32(100.0)) == 1 and vmath.sigmoid(1e300) == 1
    assert vmath.softplus(f32(1e30)) == f32(1e30)
    assert vmath.softplus(-50.0) == pytest.approx(math.exp(-50.0), rel=1e-15)
    for zero in (f32(-0.0), -0.0):
        for name in ("tanh", "expm1", "log1p", "sin", "erf", "sqrt"):
            value = getattr(vmath, name)(zero)
            assert value == 0 and np.signbit(value), name
    assert vmath.log(0.0) == -np.inf and np.isnan(vmath.log(-1.0))
    assert vmath.log1p(f32(-1.0)) == -np.inf and vmath.rsqrt(0.0) == np.inf


def test_dtype_dispatch_in_jitted_code():
    @njit
    def call(x):
        return vmath.exp(x), vmath.pow(x, 2), vmath.pow(x, x)

    assert call.nopython_signatures == []
    call(np.float32(1.0))
    call(1.0)
    call(3)
    returns = {sig.args[0]: sig.return_type for sig in call.nopython_signatures}
    assert returns[types.float32] == types.UniTuple(types.float32, 3)
    assert returns[types.float64] == types.UniTuple(types.float64, 3)
    assert returns[types.int64] == types.UniTuple(types.float64, 3)


def test_dtype_dispatch_in_python():
    assert isinstance(vmath.exp(np.float32(1.0)), np.float32)
    assert vmath.exp(np.float32(1.0)) == np.float32(np.e)  # correctly rounded
    assert isinstance(vmath.pow(np.float32(2.0), 3), np.float32)
    assert not isinstance(vmath.pow(np.float32(2.0), np.float64(3.0)), np.float32)
    assert vmath.exp_f64(1.0) == vmath.exp(1.0)


def test_caller_fastmath_does_not_leak_in():
    """Implementations keep IEEE semantics inside a fastmath=True kernel."""
    @njit(fastmath=True)
    def logs(x, out):
        for i in range(x.size):
            out[i] = vmath.log(x[i])

    x = np.array([np.nan, np.inf, 0.0, -1.0, 1.0], dtype=np.float32)
    out = np.empty_like(x)
    logs(x, out)
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf and np.isnan(out[3])
    assert out[4] == 0.0


def test_docstring_examples():
    import doctest

    result = doctest.testmod(vmath, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 13 and result.failed == 0
