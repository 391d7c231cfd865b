"""``compiler/pool_relu.py``: max pooling moved before the ReLU in compiled plans keeps eager
mode's bits (values and gradients), including windows whose maximum is negative, zero,
NaN or infinite, ties, overlapping windows and padding; and is not applied where the
ReLU output or the argmax positions are read elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F
from jitgrad.compiler import passes

F32 = np.float32

POOLS = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 1, "padding": 1},  # overlapping windows, padding
    {"kernel_size": 2, "stride": 2, "ceil_mode": True},
    {"kernel_size": (2, 3), "stride": (1, 2), "dilation": (2, 1)},
]


def _data(rng, shape):
    """Values with every special case: all-negative windows, zeros (ReLU ties), equal
    positive values, NaN and both infinities."""
    x = rng.standard_normal(shape).astype(F32)
    x[..., :2, :2] = -1.0
    x[..., 2:4, 2:4] = 0.0
    x[0, 0, 4, 4:6] = 2.5
    x[0, 1, 1, 5] = np.nan
    x[1, 0, 5, 1] = np.inf
    x[1, 1, 6, 6] = -np.inf
    return x


def _arr(t):
    return t.detach().numpy().copy()


def _flat(r):
    return r if isinstance(r, tuple) else (r,)


@pytest.fixture
def rewrites(monkeypatch):
    """How many ReLU -> pool blocks the plans built in the test rewrote."""
    counts = []
    real = passes.pool_before_relu

    def spy(graph, keep=()):
        counts.append(real(graph, keep))
        return counts[-1]
    monkeypatch.setattr(passes, "pool_before_relu", spy)
    return counts


@pytest.mark.parametrize("pool", POOLS, ids=["k2", "k3s1p1", "ceil", "dilated"])
def test_pooled_relu_keeps_eager_bits(pool, rewrites):
    rng = np.random.default_rng(0)
    x = jitgrad.tensor(_data(rng, (2, 3, 8, 9)))
    w = jitgrad.tensor(rng.uniform(0.5, 1.5, (3, 8, 9)).astype(F32), requires_grad=True)
    shape = F.max_pool2d(x, **pool).shape
    coef = jitgrad.tensor(rng.uniform(0.5, 1.5, shape).astype(F32))  # gradient 0 nowhere

    def step(x):
        w.grad = None
        y = F.max_pool2d(F.relu(x * w), **pool)
        loss = (y * coef).sum()
        loss.backward()
        return loss, y

    eager = [[_arr(t) for t in step(x)] + [_arr(w.grad)] for _ in range(2)]
    compiled = jitgrad.compile(step)
    for k in range(3):
        got = [_arr(t) for t in compiled(x)] + [_arr(w.grad)]
        for a, b in zip(got, eager[min(k, 1)]):
            assert a.tobytes() == b.tobytes()
    assert sum(rewrites) == 1


def test_not_applied_when_the_relu_output_or_indices_are_read(rewrites):
    rng = np.random.default_rng(1)
    x = jitgrad.tensor(_data(rng, (2, 3, 8, 8)))
    w = jitgrad.tensor(rng.uniform(0.5, 1.5, (3, 8, 8)).astype(F32), requires_grad=True)

    def relu_read(x):
        w.grad = None
        r = F.relu(x * w)
        loss = (F.max_pool2d(r, 2) ** 2).sum() + r.sum()
        loss.backward()
        return loss

    def indices_read(x):
        w.grad = None
        y, i = F.max_pool2d(F.relu(x * w), 2, return_indices=True)
        loss = (y * y).sum()
        loss.backward()
        return loss, i

    for fn in (relu_read, indices_read):
        want = [_arr(t) for t in _flat(fn(x))] + [_arr(w.grad)]
        got = [_arr(t) for t in _flat(jitgrad.compile(fn)(x))] + [_arr(w.grad)]
        for a, b in zip(got, want):
            assert a.tobytes() == b.tobytes()
    assert sum(rewrites) == 0
