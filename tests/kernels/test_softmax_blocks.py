"""``log_softmax`` over rows of at most ``SMALL_C`` columns runs blocks of rows
(``kernels/softmax.py``): the values of the row code's formulation, the same bits however
the rows are split, and PyTorch's results on infinite and NaN rows."""

import numpy as np
import pytest
from jitgrad.kernels import softmax as K


def _reference(x):
    """PyTorch's log_softmax in float64: the row maximum, masked to 0 where infinite."""
    x = x.astype(np.float64)
    m = np.max(x, axis=1, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)
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
    assert np.isnan(out[0, 0]) and np.isneginf(out[0, 1]) and out[1, 1] == 0.0
    assert np.isnan(out[2]).all() and np.isnan(out[3]).all()
