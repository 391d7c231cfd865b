"""The engine's shortcuts give what its generic traversal gives: the chain path
(``engine._backward_chain``) now also takes chains of fusable ops too small to be fused,
the generic path's implicit seed is made without ``ones_like``, ``grad()`` runs the
capture step only on the nodes it captures from, and a node's two identical gradients are
marked shared without a set."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import config
from jitgrad.autograd import engine
from jitgrad.autograd.fused_regions import MIN_ELEMENTS, chain_may_fuse


def _counting_generic(monkeypatch) -> list:
    calls: list = []
    orig = engine._Run.run
    monkeypatch.setattr(engine._Run, "run", lambda self: (calls.append(1), orig(self))[1])
    return calls


def _no_chain(monkeypatch) -> None:
    monkeypatch.setattr(engine, "_backward_chain", lambda t, retain: False)


def _leaves(n=2, shape=(4, 5), seed=0):
    rng = np.random.default_rng(seed)
    return [jg.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
            for _ in range(n)]


CHAINS = {
    "mul-sum": lambda x, y: (x * y).sum(),
    "tanh-sum": lambda x, y: x.tanh().sum(),
    "exp-mul-mean": lambda x, y: (x * 2.0).exp().mean(),  # conservatively generic (below)
    "view-sum": lambda x, y: x.reshape(-1).sum(),
    "add-sum": lambda x, y: (x + y).sum(),
}


def _grads(build, monkeypatch, chain: bool, retain_twice: bool = False):
    x, y = _leaves()
    with monkeypatch.context() as m:
        calls = _counting_generic(m)
        if not chain:
            _no_chain(m)
        for _ in range(2):  # the second accumulates into the first's .grad
            loss = build(x, y)
            if retain_twice:
                loss.backward(retain_graph=True)
            loss.backward()
    return x.grad, y.grad, bool(calls)


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_small_fusable_chains_take_the_chain_path_with_the_same_results(name, monkeypatch):
    for retain_twice in (False, True):
        gx, gy, generic = _grads(CHAINS[name], monkeypatch, True, retain_twice)
        # ExpBackward0 has no in_meta: the size of its gradient is not known before the
        # chain runs, so chain_may_fuse says it might fuse
        assert generic == (name == "exp-mul-mean")
        rx, ry, _ = _grads(CHAINS[name], monkeypatch, False, retain_twice)
        np.testing.assert_array_equal(gx.numpy(), rx.numpy())
        if ry is None:
            assert gy is None
        else:
            np.testing.assert_array_equal(gy.numpy(), ry.numpy())


def test_the_chain_path_frees_the_graph_as_the_traversal_does():
    x, y = _leaves()
    loss = (x * y).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_the_chain_path_gradients_own_their_memory():
    x, y = _leaves()
    (x + y).sum().backward()  # AddBackward0 routes one gradient to both leaves
    assert not np.shares_memory(x.grad.numpy(), y.grad.numpy())
    x.grad.add_(1.0)
    np.testing.assert_array_equal(y.grad.numpy(), np.ones((4, 5), np.float32))


def test_large_fusable_chains_leave_the_chain_path_unless_fusion_is_off(monkeypatch):
    x = jg.tensor(np.linspace(-1.0, 1.0, MIN_ELEMENTS, dtype=np.float32), requires_grad=True)
    calls = _counting_generic(monkeypatch)
    x.tanh().sum().backward()
    assert calls
    calls.clear()
    monkeypatch.setattr(config, "eager_fusion", False)
    g = x.grad.clone()
    x.tanh().sum().backward()
    assert not calls  # nothing can be fused: the chain path
    np.testing.assert_array_equal(x.grad.numpy(), 2 * g.numpy())


def test_chain_may_fuse_is_conservative_where_sizes_are_unknown():
    x = jg.tensor(np.ones(8, np.float32), requires_grad=True)
    loss = x.exp().tanh().sum()  # SumBackward0 -> TanhBackward0 -> ExpBackward0
    s = loss.grad_fn
    t = s.next_functions[0][0]
    e = t.next_functions[0][0]
    assert s.in_meta  # the sum's input shape: known to be small
    assert not chain_may_fuse([s, t, e]) or t.in_meta is None
    # without in_meta, a node after the first runs on a gradient of unknown size
    if t.in_meta is None:
        assert chain_may_fuse([s, t, e])


@pytest.mark.parametrize("hooked", ["tensor hook", "retain_grad", "node hook", "leaf hook"])
def test_hooks_leave_the_chain_path(hooked, monkeypatch):
    x, y = _leaves()
    calls = _counting_generic(monkeypatch)
    seen = []
    p = x * y
    if hooked == "tensor hook":
        p.register_hook(lambda g: seen.append(1))
    elif hooked == "retain_grad":
        p.retain_grad()
    elif hooked == "node hook":
        p.grad_fn.register_hook(lambda gi, go: seen.append(1))
    else:
        x.register_hook(lambda g: seen.append(1))
    p.sum().backward()
    assert calls
    assert seen or hooked == "retain_grad"
    if hooked == "retain_grad":
        np.testing.assert_array_equal(p.grad.numpy(), np.ones((4, 5), np.float32))
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())


def test_the_generic_seed_is_a_fresh_writable_tensor_a_hook_may_modify():
    x, y = _leaves()
    loss = (x * y).sum()
    kept = []

    def hook(g):
        kept.append(g)
        g.mul_(3.0)  # in place on the seed: allowed, as in PyTorch

    loss.register_hook(hook)
    loss.retain_grad()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * y.detach().numpy())
    assert loss.grad.item() == 3.0
    out = (x * y).sum() * 1.0
    (g,) = jg.autograd.grad(out, out, retain_graph=True)
    assert g.numpy().flags.writeable and g.item() == 1.0
    g.add_(1.0)
    (g2,) = jg.autograd.grad(out, out)
    assert g2 is not g and g2.item() == 1.0


def test_grad_captures_non_leaf_inputs_with_hooks_elsewhere():
    torch = pytest.importorskip("torch")

    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    res = []
    for lib in (jg, torch):
        x = lib.tensor(a, requires_grad=True)
        y = lib.tensor(b, requires_grad=True)
        h = x * y
        k = h.tanh()
        q = y.exp()
        q.register_hook(lambda g: g * 2)  # a hook on a node no input is taken from
        loss = (k * x + h + q).sum()
        gh, gx, gk = lib.autograd.grad(loss, [h, x, k])
        res.append([t.detach().numpy() for t in (gh, gx, gk)])
    for mine, ref in zip(*res):
        np.testing.assert_allclose(mine, ref, rtol=1e-6, atol=1e-6)


def test_a_gradient_routed_twice_is_not_stolen_twice_on_the_generic_path(monkeypatch):
    x, y = _leaves()
    x.register_hook(lambda g: None)  # not a plain leaf: the generic traversal
    calls = _counting_generic(monkeypatch)
    (x + y).exp().sum().backward()
    assert calls
    assert not np.shares_memory(x.grad.numpy(), y.grad.numpy())
    np.testing.assert_array_equal(x.grad.numpy(), y.grad.numpy())
