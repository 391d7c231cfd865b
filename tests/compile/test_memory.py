"""A compiled call's peak memory is no higher than the same function's eager call (NumPy
reports its allocations to tracemalloc)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from helpers import w2_step

import jitgrad as jg


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _mlp(x, w1, w2):
    w1.grad = w2.grad = None
    h = jg.tanh(x @ w1)
    loss = ((h @ w2) ** 2).mean() + h.abs().mean()
    loss.backward()
    return loss


@pytest.mark.parametrize("fn,shapes", [
    (w2_step, [(1_000_000,)] * 3),
    (_mlp, [(256, 512), (512, 512), (512, 64)]),
], ids=["chain", "mlp"])
def test_compiled_peak_memory_at_most_eager(fn, shapes, rng):
    args = [jg.tensor(rng.standard_normal(s), dtype=jg.float32, requires_grad=True)
            for s in shapes]
    fn(*args)  # eager kernels loaded
    eager = _peak(lambda: fn(*args))
    cf = jg.compile(fn)
    for _ in range(3):  # trace, build, steady state
        cf(*args)
    compiled = _peak(lambda: cf(*args))
    assert compiled <= eager, (compiled, eager)
    np.testing.assert_allclose(cf(*args).item(), fn(*args).item(), rtol=1e-5)
