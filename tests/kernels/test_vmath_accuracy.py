"""Every vmath function stays within its documented ulp bound (``bounds.ULP_BOUNDS``).

float32: every 997th bit pattern of the whole float32 range (both signs, 4.3M values) plus
random samples; float64: random samples (uniform on the interesting range, random bit
patterns, log-uniform magnitudes). References and the ulp measure are described in
``jitgrad.kernels.vmath.testing``; the heavier sweeps are marked slow.
"""

import numpy as np
import pytest
from jitgrad.kernels import vmath
from jitgrad.kernels.vmath import ACCURATE_DOMAIN, FUNCTIONS, ULP_BOUNDS
from jitgrad.kernels.vmath import testing as T
from jitgrad.kernels.vmath.bounds import describe

UNARY = [name for name in FUNCTIONS if name != "pow"]
DTYPES = [np.float32, np.float64]


def assert_within_bound(name, dtype, *cols):
    key = (name, np.dtype(dtype).name)
    err, at = T.max_error(name, *cols, limit=ACCURATE_DOMAIN.get(key))
    assert err <= ULP_BOUNDS[key], f"{name}{at} is {err:.3f} ulp off; bound {ULP_BOUNDS[key]}"


def test_ulp_measure():
    """The yardstick itself: exact is 0, the next float is 1, inf and NaN are handled."""
    x = np.array([1.0, 1.5, 3e38, np.inf, np.nan, 0.0], dtype=np.float32)
    ref = x.astype(np.float64)
    assert T.ulp_error(x, ref, np.float32).tolist() == [0, 0, 0, 0, 0, 0]
    up = np.nextafter(x[:3], np.float32(np.inf))
    assert T.ulp_error(up, ref[:3], np.float32).tolist() == [1, 1, 1]
    half = np.array([1 + 2.0**-24], dtype=np.float64)  # halfway between two floats
    assert T.ulp_error(np.array([1.0], np.float32), half, np.float32)[0] == 0.5
    big = np.finfo(np.float32).max
    near_inf = T.ulp_error(np.array([np.inf], np.float32), np.array([float(big)]), np.float32)
    assert near_inf[0] == 1.0  # overflowing one ulp early costs one ulp
    assert T.ulp_error(np.array([np.nan], np.float32), np.array([1.0]), np.float32)[0] == np.inf
    sub = np.array([2 * 2.0**-149], dtype=np.float64)  # subnormal ulp is 2**-149
    assert T.ulp_error(np.array([2.0**-149], np.float32), sub, np.float32)[0] == 1.0


@pytest.mark.parametrize("name", UNARY)
def test_float32_bit_pattern_sweep(name):
    assert_within_bound(name, np.float32, T.float32_sweep(997))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_random_samples(name, dtype):
    n = 20_000 if (name == "erf" and dtype == np.float64) else 300_000  # mpmath for erf
    assert_within_bound(name, dtype, *T.random_inputs(name, dtype, n))


def test_bounds_cover_every_function_and_reach_docstrings():
    for name in FUNCTIONS:
        for dtype in ("float32", "float64"):
            assert 0 < ULP_BOUNDS[(name, dtype)] <= 4
        assert describe(name) in getattr(vmath, name).__doc__


@pytest.mark.slow
@pytest.mark.parametrize("name", UNARY)
def test_float32_dense_sweep(name):
    """Every 7th float32 bit pattern (614M values), in chunks."""
    chunk = 2**26
    for start in range(0, 2**32, chunk):
        bits = np.arange(start, start + chunk, 7, dtype=np.uint64).astype(np.uint32)
        assert_within_bound(name, np.float32, bits.view(np.float32))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_many_random_samples(name, dtype):
    n = 200_000 if (name == "erf" and dtype == np.float64) else 4_000_000
    for seed in range(1, 4):
        assert_within_bound(name, dtype, *T.random_inputs(name, dtype, n, seed=seed))
