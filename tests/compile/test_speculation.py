"""Speculative VJP (``jit/speculation.py``): a compiled loss computes its input gradients in
the forward call and ``backward()`` hands them over. Every way of differentiating the loss
gives eager mode's bits: the implicit seed, another cotangent, ``retain_graph`` twice,
``autograd.grad``, ``create_graph``, hooks on the inputs, accumulation into existing
``.grad``s; a loss never differentiated keeps nothing alive and stops the speculation."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from helpers import assert_same_bits

import jitgrad as jg
from jitgrad.jit.speculation import IDLE_LIMIT


def w2(x, w, b):
    return (jg.tanh(x * w + b) ** 2 * jg.sigmoid(x)).sum()


def _arrays(n=257, dtype=np.float32, k=3):
    rng = np.random.default_rng(7)
    return [rng.standard_normal(n).astype(dtype) for _ in range(k)]


def _leaves(arrays):
    return [jg.from_numpy(a.copy()).requires_grad_() for a in arrays]


def _entry(f):
    (entries,) = f._entries.values()
    return entries[0]


def _grads_after(fn, arrays, how):
    ts = _leaves(arrays)
    loss = fn(*ts)
    how(loss, ts)
    return loss, [t.grad for t in ts]


def _same_as_eager(f, fn, arrays, how, calls=3):
    le, ge = _grads_after(fn, arrays, how)
    for _ in range(calls):  # the first call (traces), then the generated call path
        lc, gc_ = _grads_after(f, arrays, how)
        assert_same_bits(lc, le, "loss")
        for a, b in zip(gc_, ge):
            assert_same_bits(a, b, "gradient")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_loss_backward_hands_over_eager_bits(dtype):
    f = jg.compile(w2)
    arrays = _arrays(dtype=dtype)
    _same_as_eager(f, w2, arrays, lambda loss, ts: loss.backward())
    assert _entry(f).spec_plan is not None and _entry(f).speculating
    assert "speculated gradients: yes" in jg.explain(f, *_leaves(arrays))


@pytest.mark.parametrize("cot", [3.0, 2.0, -0.5, 0.0])
def test_other_cotangent_gives_eager_bits(cot):
    """A cotangent other than 1 recomputes exactly (not a rounded scaling)."""
    f = jg.compile(w2)
    _same_as_eager(f, w2, _arrays(), lambda loss, ts: loss.backward(jg.tensor(cot)))
    _same_as_eager(f, w2, _arrays(), lambda loss, ts: (loss * cot).backward())


def test_retain_graph_twice_then_freed():
    f = jg.compile(w2)

    def twice(loss, ts):
        loss.backward(retain_graph=True)
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
    _same_as_eager(f, w2, _arrays(), twice)


def test_autograd_grad_and_accumulation_into_existing_grads():
    f = jg.compile(w2)
    arrays = _arrays()

    def grad_then_backward(loss, ts):
        for t in ts:
            t.grad = jg.ones_like(t)
        gs = jg.autograd.grad(loss, ts, retain_graph=True)
        for t, g in zip(ts, gs):
            t.grad += g  # in place on the leaf's own .grad
        loss.backward()  # accumulates into those .grads
    _same_as_eager(f, w2, arrays, grad_then_backward)


def test_hooks_on_inputs_see_and_change_the_gradient():
    seen = []

    def doubled(g):
        seen.append(g.clone())
        return g * 2

    def with_hooks(loss, ts):
        handle = ts[0].register_hook(doubled)
        loss.backward()
        handle.remove()
    f = jg.compile(w2)
    arrays = _arrays()
    _same_as_eager(f, w2, arrays, with_hooks)
    assert len(seen) == 4 and all(np.array_equal(s.numpy(), seen[0].numpy()) for s in seen)


def test_create_graph_through_a_speculated_loss():
    def cube(x):
        return (x ** 3).sum()
    f = jg.compile(cube)

    def second_order(loss, ts):
        (g,) = jg.autograd.grad(loss, ts[:1], create_graph=True)
        g.sum().backward()
    _same_as_eager(f, cube, _arrays(dtype=np.float64, k=1), second_order)


def test_input_modified_in_place_before_backward_raises():
    f = jg.compile(w2)
    ts = _leaves(_arrays())
    for _ in range(2):
        loss = f(*ts)
        with jg.no_grad():
            ts[0].add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
        assert all(t.grad is None for t in ts)


def test_non_leaf_inputs_and_two_inputs_with_one_gradient():
    """Gradients flowing on to earlier nodes; ``x + y`` gives both inputs one gradient
    array, and the two ``.grad``s must not share memory."""
    def fn(x, y):
        return ((x + y).tanh() * 3).sum()
    f = jg.compile(fn)
    arrays = _arrays(k=2)

    def through_nodes(loss, ts):
        loss.backward()
    for call in (fn, f, f):
        ts = _leaves(arrays)
        mid = [t * 2 for t in ts]
        call(*mid).backward()
        assert ts[0].grad._data is not ts[1].grad._data
        ts[0].grad += 1
        assert not np.array_equal(ts[0].grad.numpy(), ts[1].grad.numpy())
    _same_as_eager(f, fn, arrays, through_nodes)


def test_loss_never_differentiated_keeps_nothing_and_stops_speculating():
    f = jg.compile(w2)
    ts = _leaves(_arrays())
    loss = f(*ts)
    node = weakref.ref(loss.grad_fn)
    arrays = weakref.ref(loss.grad_fn._arrays[0])
    del loss
    gc.collect()
    assert node() is None and arrays() is None
    entry = _entry(f)
    for _ in range(IDLE_LIMIT + 2):
        loss = f(*ts)  # evaluation with grad mode on: no backward
    assert not entry.speculating
    assert all(t.grad is None for t in ts)
    eager = w2(*ts)
    assert_same_bits(loss, eager, "loss while not speculating")
    loss.backward()  # a backward through a forward-only call: speculation comes back
    assert entry.speculating
    expected = [t.grad.clone() for t in ts]
    for t in ts:
        t.grad = None
    f(*ts).backward()
    for t, g in zip(ts, expected):
        assert_same_bits(t.grad, g, "gradient after speculation resumed")


def test_not_speculated_when_it_could_differ(monkeypatch):
    """Effects, random draws, several or non-scalar differentiable outputs: the separate
    forward and backward plans, as before; ``JITGRAD_SPECULATE=0`` turns it off."""
    x = jg.ones(4, requires_grad=True)
    buf = jg.zeros(4)
    cases = {
        "effects": (lambda x: (x * buf.add_(1)).sum(), "the call has effects"),
        "random": (lambda x: (x * jg.rand(4)).sum(), "the call draws random"),
        "two outputs": (lambda x: ((x * 2).sum(), (x * 3).sum()), "more than one"),
        "vector": (lambda x: x * 2, "the differentiable output is not a one-element"),
    }
    for fn, why in cases.values():
        f = jg.compile(fn)
        assert f"speculated gradients: no ({why}" in jg.explain(f, x)
    monkeypatch.setenv("JITGRAD_SPECULATE", "0")
    f = jg.compile(w2)
    assert "speculated gradients: no (disabled" in jg.explain(f, *_leaves(_arrays()))
    _same_as_eager(f, w2, _arrays(), lambda loss, ts: loss.backward())


def test_non_scalar_output_node_path_equals_eager():
    def fn(x, w):
        return jg.tanh(x * w) * x
    f = jg.compile(fn)

    def weighted(out, ts):
        out.backward(jg.from_numpy(np.linspace(-1, 1, out.numel(), dtype=np.float32)))
    _same_as_eager(f, fn, _arrays(k=2), weighted)


def test_speculated_loss_follows_python_state_between_calls():
    """A captured weight written in place, a closure number rebound, a module attribute
    changed: each later call of the speculated loss gives eager mode's loss and gradients."""
    rng = np.random.default_rng(3)
    w = jg.from_numpy(rng.standard_normal(50).astype(np.float32))
    cfg = {"scale": 2.0}

    def fn(x):
        return (jg.tanh(x * w) * cfg["scale"]).sum()
    f = jg.compile(fn)
    x0 = rng.standard_normal(50).astype(np.float32)
    for step in range(4):
        if step == 1:
            with jg.no_grad():
                w.mul_(0.5)          # captured tensor changed in place
        if step == 2:
            cfg["scale"] = -1.5      # a number the trace read
        xe, xc = (jg.from_numpy(x0.copy()).requires_grad_() for _ in range(2))
        le, lc = fn(xe), f(xc)
        le.backward()
        lc.backward()
        assert_same_bits(lc, le, f"loss at step {step}")
        assert_same_bits(xc.grad, xe.grad, f"gradient at step {step}")
    assert _entry(f).speculating  # the newest entry (a retrace after the number changed)


def test_a_value_check_is_speculated_and_still_raises_at_every_call():
    """``gaussian_nll_loss``'s variance check is an effect equation (``run_check``) that
    only raises: the loss is speculated (eager bits), and a later call with a negative
    variance raises eager's error."""
    def fn(mu, y, v):
        return jg.nn.functional.gaussian_nll_loss(mu, y, v)

    f = jg.compile(fn)
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(64).astype(np.float32) for _ in range(2)] + [
        rng.uniform(0.5, 2.0, 64).astype(np.float32)]
    _same_as_eager(f, fn, arrays, lambda loss, ts: loss.backward())
    assert "speculated gradients: yes" in jg.explain(f, *_leaves(arrays))
    assert _entry(f).speculating
    arrays[2][3] = -1.0
    for call in (fn, f):
        with pytest.raises(ValueError, match="var has negative entry"):
            call(*_leaves(arrays))
