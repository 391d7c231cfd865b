"""Save vs recompute (``compiler/partition.py``): a residual one cheap element-wise op away
from what the backward reads anyway is recomputed in the backward kernel, not kept; the
gradients keep eager mode's bits, first and second order."""

from __future__ import annotations

import numpy as np
from helpers import assert_same_bits

import jitgrad as jg


def w2_vector(x, w, b):  # a non-scalar output: the separate forward and backward plans
    return jg.tanh(x * w + b) ** 2 * jg.sigmoid(x)


def _leaves(seed=3, n=300, k=3):
    rng = np.random.default_rng(seed)
    return [jg.from_numpy(rng.standard_normal(n).astype(np.float32)).requires_grad_()
            for _ in range(k)]


def _entry(f):
    (entries,) = f._entries.values()
    return entries[0]


def test_square_of_a_saved_tanh_is_recomputed_not_kept():
    f = jg.compile(w2_vector)
    ts = _leaves()
    low = f.lower(*ts)
    gi = _entry(f).grad_info
    ops = {str(v): e.op.name for e in _entry(f).graph.eqns for v in [e.out]}
    assert sorted(ops[str(v)] for v in gi.saved) == ["sigmoid", "tanh"]
    assert [ops[str(gi.residuals[r])] for r, _ in gi.recomputed] == ["pow_scalar"]
    # the forward kernel stores the output and the two kept values; the backward kernel
    # squares tanh itself
    assert "pow_scalar" in low.fusion_groups[-1]
    assert len(_entry(f).plan.run(ts)) == 1 + 2


def test_recomputed_residuals_keep_eager_bits_first_and_second_order():
    f = jg.compile(w2_vector)
    cot = jg.from_numpy(np.linspace(-2, 2, 300, dtype=np.float32))

    def grads(fn, order):
        ts = _leaves()
        out = fn(*ts)
        if order == 1:
            out.backward(cot)
            return [t.grad for t in ts]
        gs = jg.autograd.grad(out, ts, cot, create_graph=True)
        sum(g.sum() for g in gs).backward()
        return [t.grad for t in ts]
    for order in (1, 2):
        expected = grads(w2_vector, order)
        for _ in range(2):
            for a, b in zip(grads(f, order), expected):
                assert_same_bits(a, b, f"order {order}")


def test_transcendental_residuals_are_kept():
    def fn(x):
        return jg.exp(x) * jg.log(x.abs() + 1.0)
    f = jg.compile(fn)
    (x,) = _leaves(k=1)
    f.lower(x)
    gi = _entry(f).grad_info
    assert not gi.recomputed and len(gi.saved) == len(gi.residuals)


def test_a_chain_of_recomputed_residuals_is_ordered():
    """``a = x*y`` and ``b = a*a`` both recomputed: ``b``'s recipe reads ``a``'s, so it
    comes after it in the backward graph (found by the random-program test)."""
    def fn(x, y):
        a = x * y
        b = a * a
        return b * y + jg.sin(a)  # sin's node runs first: a is the first residual read
    f = jg.compile(fn)
    x, y = _leaves(k=2)
    cot = jg.from_numpy(np.linspace(-1, 1, 300, dtype=np.float32))
    expected = jg.autograd.grad(fn(x, y), (x, y), cot)
    for _ in range(2):
        got = jg.autograd.grad(f(x, y), (x, y), cot)
        for a, b in zip(got, expected):
            assert_same_bits(a, b, "gradient")
    gi = _entry(f).grad_info
    assert len(gi.recomputed) >= 2
    gi.graph.check()
