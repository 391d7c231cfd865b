"""Large kernel outputs are reused across calls only when nothing references them."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import w2_step

import jitgrad as jg
import jitgrad.compiler.group_runner as executable
from jitgrad.compiler.recycle import Recycler


def test_recycler_reuses_only_unreferenced_arrays():
    rc = Recycler((4,), np.float32, keep=3)  # (the plans keep 2)
    a = rc.get()
    b = rc.get()           # a is still referenced: a new array
    assert b is not a
    view = a[1:]
    del a
    c = rc.get()           # a lives on through its view's base
    assert c is not view.base and c is not b
    del view
    d = rc.get()           # now the first array is free
    assert d is rc.ring[0] and rc.reused == 1
    held = np.asarray(d)   # another name for the same object
    assert rc.get() is not held


@pytest.fixture
def small_recycling(monkeypatch):
    # recycle every kernel output, however small (the real threshold is 32 MiB)
    monkeypatch.setattr(executable, "RECYCLE_MIN_BYTES", 1)


def _step():
    return jg.compile(w2_step)


def _leaves(rng, n=1000):
    return [jg.tensor(rng.standard_normal(n), dtype=jg.float32, requires_grad=True)
            for _ in range(3)]


def _eager_grads(xs):
    xs = [x.detach().requires_grad_() for x in xs]
    (jg.tanh(xs[0] * xs[1] + xs[2]) ** 2 * jg.sigmoid(xs[0])).sum().backward()
    return [x.grad.numpy() for x in xs]


def test_gradients_released_by_the_step_are_reused(small_recycling, rng):
    step = _step()
    xs = _leaves(rng)
    seen = []
    for _ in range(6):
        step(*xs)
        seen.append(id(xs[0].grad._data))
        for got, want in zip((x.grad.numpy() for x in xs), _eager_grads(xs)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert len(set(seen)) < len(seen)  # some call wrote into an earlier call's buffer


def test_a_gradient_the_user_kept_is_never_overwritten(small_recycling, rng):
    step = _step()
    xs = _leaves(rng)
    step(*xs)
    kept = xs[0].grad              # the tensor
    kept_np = xs[1].grad.numpy()   # an array sharing its memory
    kept_view = xs[2].grad[10:20]  # a view
    before = [kept.numpy().copy(), kept_np.copy(), kept_view.numpy().copy()]
    for _ in range(5):
        with jg.no_grad():         # new inputs: new gradients each call
            for x in xs:
                x.mul_(0.9)
        step(*xs)
    after = [kept.numpy(), kept_np, kept_view.numpy()]
    for b, a in zip(before, after):
        np.testing.assert_array_equal(a, b)
