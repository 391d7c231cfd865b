"""``log_softmax`` over rows of at most ``SMALL_C`` columns runs blocks of rows
(``kernels/softmax.py``): the values of the row code's formulation, the same bits however
the rows are split, and PyTorch's results on infinite and NaN rows."""

import numpy as np
import pytest
from jitgrad.kernels import softmax as K


def _reference(x):
    """PyTorch's log_softmax in float64: shifted by the row maximum, unmasked where
    infinite (a row holding +inf, or only -inf, gives NaNs; logsumexp masks it)."""
    x = x.astype(np.float64)
    m = np.max(x, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocks_match_the_reference_and_any_split(dtype):
    rng = np.random.default_rng(0)
    tol = 2e-6 if dtype == np.float32 else 1e-14
    for c in range(1, K.SMALL_C + 3):
        for r in (1, 7, 8, 9, 33):
            x = (rng.standard_normal((r, c)) * 8).astype(dtype)
            out = np.empty_like(x)
            K.log_softmax(0, r, x, out)
            np.testing.assert_allclose(out, _reference(x), rtol=tol, atol=tol)
            parts = np.empty_like(x)
            for lo, hi in ((0, r // 3), (r // 3, r - 1), (r - 1, r)):
                K.log_softmax(lo, hi, x, parts)  # blocks start elsewhere: the same rows
            assert parts.tobytes() == out.tobytes(), (r, c)


@pytest.mark.parametrize("c", [3, 12, 40])  # the blocked code and the row code
def test_infinite_and_nan_rows_as_pytorch(c):
    x = np.zeros((5, c), np.float32)
    x[0, :2] = [np.inf, 1.0]
    x[1, :] = -np.inf
    x[1, 1] = 2.0
    x[2, :] = -np.inf
    x[3, 2] = np.nan
    x[4, 0] = 1e30
    out = np.empty_like(x)
    K.log_softmax(0, 5, x, out)
    np.testing.assert_allclose(out, _reference(x).astype(np.float32), rtol=1e-6, atol=1e-6)
    assert np.isnan(out[0]).all() and out[1, 1] == 0.0  # (PyTorch 2.13's values)
    assert np.isnan(out[2]).all() and np.isnan(out[3]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c", [1, 5, 63, 64, 65, 130, 1000, 4099])
def test_softmax_partial_sums_keep_the_accuracy(dtype, c):
    """softmax's row sums add ``SUM_BLOCK``-long partials in the row's type into float64,
    and it scales in the row's type: against the float64 softmax of the kernel's rounded
    differences ``x - max``, within 3 units in the last place in float32 (measured: 2.1; the
    whole float64 sums were 1.1, PyTorch's float32 sums 3.4 at 4099 columns and 61 at
    50000) and 8 in float64 (against long double), whatever the width relative
    to the block; the same bits however the rows are split; its backward likewise."""
    rng = np.random.default_rng(c)
    x = (rng.standard_normal((9, c)) * 4).astype(dtype)
    x[0, :] = 0.0  # equal exps: the sum is the width exactly
    out = np.empty_like(x)
    K.softmax(0, 9, x, out)
    wide = np.longdouble  # (x86: 64-bit significands; the float64 case's reference)
    ref = np.exp((x - x.max(1, keepdims=True)).astype(wide))
    ref /= ref.sum(1, keepdims=True)
    eps = np.finfo(dtype).eps
    ulps = 3 if dtype == np.float32 else 8
    assert (np.abs(out - ref) <= ulps * eps * ref).all()
    parts = np.empty_like(x)
    for lo, hi in ((0, 4), (4, 5), (5, 9)):
        K.softmax(lo, hi, x, parts)
    assert parts.tobytes() == out.tobytes()
    g = rng.standard_normal((9, c)).astype(dtype)
    gx = np.empty_like(x)
    K.softmax_backward(0, 9, g, out, gx)
    y64 = out.astype(wide)
    dot = (g * y64).sum(1, keepdims=True)
    want = y64 * (g - dot)
    # the dot product's rounding (units of its condition, sum |g| y, not of its value,
    # which cancels: float64 at 1000 columns was 8.7 units of |dot| on an AMD EPYC, 0.73 of
    # sum |g| y) reaches every element through y
    cond = (np.abs(g) * y64).sum(1, keepdims=True)
    bound = ulps * eps * (np.abs(want) + y64 * (np.abs(g) + cond))
    assert (np.abs(gx - want) <= bound).all()
