"""The 2-norm of a whole float array runs on ``kernels/reduce.sum_squares`` (float64 squares
in one fixed order), in eager mode and in compiled plans alike: accurate, the same for any
memory layout of the same values, and ``clip_grad_norm_``'s total the same eagerly and
compiled."""

from __future__ import annotations

import numpy as np
import pytest
from jitgrad.kernels.reduce import SQUARES_LANES, sum_squares

import jitgrad as jg
from jitgrad.ops import norms

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("n", [1, 7, SQUARES_LANES - 1, SQUARES_LANES, 3 * SQUARES_LANES + 5,
                               100_000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_squares_is_the_float64_sum_in_its_order(n, dtype):
    a = RNG.standard_normal(n).astype(dtype)
    x = a.astype(np.float64)
    whole = n - n % SQUARES_LANES
    lanes = (x[:whole].reshape(-1, SQUARES_LANES) ** 2).sum(0) if whole else \
        np.zeros(SQUARES_LANES)
    expect = 0.0
    for v in lanes:  # the lanes in order, then the tail
        expect += v
    for v in x[whole:]:
        expect += v * v
    assert sum_squares(a) == expect


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_norm_is_accurate_and_layout_independent(dtype):
    # (its own generator: the data, so the rounding, must not depend on the tests run first)
    a = np.random.default_rng(7).standard_normal((300, 70)).astype(dtype) * 3
    ref = np.sqrt((a.astype(np.longdouble) ** 2).sum())
    n_c = jg.linalg.vector_norm(jg.tensor(a)).numpy()
    n_f = jg.linalg.vector_norm(jg.tensor(np.asfortranarray(a))).numpy()
    n_t = jg.linalg.vector_norm(jg.tensor(a.T.copy()).t()).numpy()
    assert n_c.dtype == dtype and n_c.tobytes() == n_f.tobytes() == n_t.tobytes()
    # float32: the float64 sum rounded once; float64: the sum's own rounding, halved by sqrt
    ulps = 1 if dtype == np.float32 else 2
    assert abs(float(n_c) - ref) <= ref * ulps * np.finfo(dtype).eps
    assert jg.linalg.vector_norm(jg.tensor(a), keepdim=True).shape == (1, 1)


def test_other_norms_keep_numpys_formulation(monkeypatch):
    calls = []
    monkeypatch.setattr(norms, "_vector_norm_ref",
                        lambda *a, **k: calls.append(1) or np.float32(0.0))
    x = jg.tensor(RNG.standard_normal((4, 5)).astype(np.float32))
    jg.linalg.vector_norm(x, dim=1)
    jg.linalg.vector_norm(x, ord=1)
    jg.linalg.vector_norm(x.double(), ord=float("inf"))
    assert len(calls) == 3
    jg.linalg.vector_norm(x)
    assert len(calls) == 3


def test_clip_grad_norm_gives_the_same_total_eagerly_and_compiled():
    ws = [RNG.standard_normal(s).astype(np.float32) for s in ((64, 32), (32,), (32, 10))]
    x = jg.tensor(RNG.standard_normal((16, 64)).astype(np.float32))

    def step(params):
        for p in params:
            p.grad = None
        h = (x @ params[0] + params[1]).tanh()
        (h @ params[2]).square().sum().backward()
        return jg.nn.utils.clip_grad_norm_(params, 1.0)

    results = []
    for f in (step, jg.compile(step)):
        params = [jg.tensor(w, requires_grad=True) for w in ws]
        for _ in range(2):
            total = f(params)
        results.append([total.detach().numpy()] + [p.grad.numpy() for p in params])
    for e, c in zip(*results):
        assert e.tobytes() == c.tobytes()
