"""The NLL kernels (``kernels/losses.py``: ``nll_picked``, ``nll_grad_plain``) give the NumPy
formulation's bits, and hand ignored or out-of-range targets to it."""

import numpy as np
import pytest

from jitgrad.ops.nnops import nll


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("n,c", [(1, 1), (7, 3), (128, 10), (300, 17)])
def test_plain_batch_same_bits(dtype, reduction, n, c):
    rng = np.random.default_rng(n * c)
    x = rng.standard_normal((n, c)).astype(dtype)
    t = rng.integers(0, c, n).astype(np.int64)
    g = np.asarray(rng.uniform(0.5, 2.0), dtype=dtype)
    a = nll._nll_fwd(x, t, None, reduction, -100)
    b = nll._nll_ref(x, t, None, reduction, -100)
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    ga = nll._nll_grad_fwd(g, t, None, reduction, -100, x.shape)
    gb = nll._nll_grad_ref(g, t, None, reduction, -100, x.shape)
    assert ga.dtype == gb.dtype and ga.tobytes() == gb.tobytes()


@pytest.mark.parametrize("ignore", [-100, 2])
def test_ignored_targets_take_the_general_path(ignore):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    t = np.array([0, 2, 3, ignore, 1, 2], dtype=np.int64)
    for red in ("mean", "sum"):
        a = nll._nll_fwd(x, t, None, red, ignore)
        b = nll._nll_ref(x, t, None, red, ignore)
        assert a.tobytes() == b.tobytes()
        g = np.asarray(1.5, np.float32)
        ga = nll._nll_grad_fwd(g, t, None, red, ignore, x.shape)
        gb = nll._nll_grad_ref(g, t, None, red, ignore, x.shape)
        assert ga.tobytes() == gb.tobytes()
