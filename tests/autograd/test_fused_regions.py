"""Eager backward runs regions of element-wise nodes fused (autograd/fused_regions.py): the
same bits, the same effects and errors as node by node, for every fusable op and for the
graph shapes the region rule has to get right (shared leaves, nodes fed from outside,
hooks, retain_grad, modified saved tensors, retain_graph, user gradients, threads)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same_bits, ops_helpers, run_in_threads

import jitgrad as jg
from jitgrad.autograd import fused_regions as fr
from jitgrad.ops import REGISTRY

H = ops_helpers()
OPS = sorted(n for n, op in REGISTRY.items()
             if op.vjp is not None and ((op.kind == "elementwise" and op.expr)
                                        or n in ("sum", "mean")))


@pytest.fixture
def eager_fusion(monkeypatch):
    """Fusion on for every region (no size floor, compiled at first sight)."""
    monkeypatch.setattr(jg.config, "eager_fusion", True)
    monkeypatch.setattr(fr, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(fr, "MIN_REPEATS", 1)
    fr.clear()
    yield
    fr.clear()


def _grads_both_ways(make_loss, leaves, monkeypatch, backward=lambda loss: loss.backward()):
    """(node-by-node grads, fused grads, regions fused): ``make_loss()`` built and
    differentiated with fusion off, then on, into fresh ``.grad``s."""
    out = []
    for fuse in (False, True):
        monkeypatch.setattr(jg.config, "eager_fusion", fuse)
        for t in leaves:
            t.grad = None
        before = fr.stats()["fused"]
        backward(make_loss())
        out.append(([None if t.grad is None else t.grad.numpy().copy() for t in leaves],
                    fr.stats()["fused"] - before))
    (node_by_node, _), (fused, n_fused) = out
    return node_by_node, fused, n_fused


def _assert_grads_equal(a, b, what):
    for k, (x, y) in enumerate(zip(a, b)):
        assert (x is None) == (y is None), (what, k)
        if x is not None:
            assert_same_bits(x, y, f"{what} gradient {k}")


@pytest.mark.parametrize("name", OPS)
def test_op_fused_backward_equals_node_by_node(name, eager_fusion, monkeypatch):
    """Every fusable op's samples inside a region (``(op(...) * w).sum()``): bits equal.
    float32 (float64 rounds the same way through the same generator: eager == compiled
    covers both dtypes; the replay under test here does not depend on the dtype)."""
    dtype = np.float32
    fused_any = False
    for i in range(len(H.samples_for(name, dtype))):
        args, p = H.sample(name, i, dtype)
        ts = H.make_inputs(jg, args)
        leaves = [t for t in ts if isinstance(t, jg.Tensor) and t.requires_grad]
        probe = H.call(jg, name, ts, p)
        if not (probe.requires_grad and probe.dtype.is_floating_point):
            continue
        w = jg.tensor(np.random.default_rng(1).uniform(0.5, 1.5, probe.shape),
                      dtype=probe.dtype)
        a, b, n = _grads_both_ways(lambda ts=ts, p=p, w=w: (H.call(jg, name, ts, p) * w).sum(),
                                   leaves, monkeypatch)
        _assert_grads_equal(a, b, f"{name} sample {i}")
        fused_any = fused_any or n > 0
    assert fused_any, f"no sample of {name} ran fused"


def _w2(x, w, b):
    return (jg.tanh(x * w + b) ** 2 * jg.sigmoid(x)).sum()


def test_w2_with_default_thresholds_fuses_from_the_second_backward(monkeypatch):
    fr.clear()
    monkeypatch.setattr(jg.config, "eager_fusion", True)
    rng = np.random.default_rng(0)
    n = fr.MIN_ELEMENTS * 2
    x, w, b = (jg.tensor(rng.standard_normal(n), dtype=jg.float32, requires_grad=True)
               for _ in range(3))
    ref, _, _ = _grads_both_ways(lambda: _w2(x, w, b), [x, w, b], monkeypatch)
    fr.clear()
    counts = []
    for _ in range(3):
        x.grad = w.grad = b.grad = None
        before = fr.stats()["fused"]
        _w2(x, w, b).backward()
        counts.append(fr.stats()["fused"] - before)
        _assert_grads_equal(ref, [t.grad.numpy() for t in (x, w, b)], "W2")
    assert counts == [0, 1, 1]  # compiled when seen the second time
    assert fr.stats()["nodes"] == 14  # sum, mul, sigmoid, pow, tanh, add, mul: twice
    (key,) = fr._REGIONS.keys()
    recomputed = [c for node in key[0] for c in node[3] if type(c) is tuple and c[0] == "r"]
    assert len(recomputed) == 1  # tanh ** 2, from tanh's output: one array fewer to read


def test_small_graphs_run_node_by_node(monkeypatch):
    fr.clear()
    monkeypatch.setattr(jg.config, "eager_fusion", True)
    x = jg.randn(100, requires_grad=True)
    for _ in range(3):
        (x.tanh() * x).sum().backward()
    assert fr.stats()["fused"] == 0


def test_disabled_by_config(eager_fusion, monkeypatch):
    monkeypatch.setattr(jg.config, "eager_fusion", False)
    x = jg.randn(64, requires_grad=True)
    (x.tanh() * x).sum().backward()
    assert fr.stats()["fused"] == 0


@pytest.mark.parametrize("seed", range(6))
def test_broadcasting_chains_with_sums(seed, eager_fusion, monkeypatch):
    """Bias rows and columns (gradients summed to their shapes inside the region), sums over
    rows and columns, means: the node-by-node bits."""
    rng = np.random.default_rng(seed)
    dt = jg.float32 if seed % 2 else jg.float64
    rows, cols = int(rng.integers(1, 60)), int(rng.integers(1, 90))
    x = jg.tensor(rng.standard_normal((rows, cols)), dtype=dt, requires_grad=True)
    b = jg.tensor(rng.standard_normal(cols), dtype=dt, requires_grad=True)
    c = jg.tensor(rng.standard_normal((rows, 1)), dtype=dt, requires_grad=True)

    def loss():
        h = jg.tanh(x * 1.5 + b) * jg.sigmoid(x - c)
        e = (h * h + 0.5).sqrt()
        return (e.sum() + h.sum(0).sum() * 0.25 + (e * c).sum(1).mean()
                + jg.exp(-h).mean(0).sum() + (x * x).sum())

    a, f, n = _grads_both_ways(loss, [x, b, c], monkeypatch)
    _assert_grads_equal(a, f, "chain")
    assert n >= 1


def test_views_and_saved_arrays_sharing_memory(eager_fusion, monkeypatch):
    """Reshape / permute / expand nodes join regions; a node saving a tensor and its
    transpose (two arguments over one buffer) gives the node-by-node bits, without a
    warning from the compiler."""
    rng = np.random.default_rng(11)
    x = jg.tensor(rng.standard_normal((6, 6)), dtype=jg.float32, requires_grad=True)
    c = jg.tensor(rng.standard_normal((6, 1)), dtype=jg.float32, requires_grad=True)

    def loss():
        h = jg.tanh(x * x.t()) + c.expand(6, 6)
        return (h.reshape(4, 9).permute(1, 0) * 1.5).sigmoid().sum()

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, f, n = _grads_both_ways(loss, [x, c], monkeypatch)
    _assert_grads_equal(a, f, "views")
    assert n >= 1


@pytest.mark.parametrize("scalar", [1.5, 3, -0.1, 1e30])
def test_recomputed_values_with_numbers_and_mixed_dtypes(scalar, eager_fusion, monkeypatch):
    """Saved values recomputed inside the region (``x * k``, ``k - x``, ``x / k`` saved by a
    product) with Python numbers of every kind, and float32 mixed with float64: the
    forward's bits."""
    rng = np.random.default_rng(13)
    x = jg.tensor(rng.standard_normal(50), dtype=jg.float32, requires_grad=True)
    y = jg.tensor(rng.standard_normal(50), dtype=jg.float64, requires_grad=True)

    def loss():
        a = x * scalar
        b = scalar - x
        c = x / scalar
        d = x * y  # float32 * float64 -> float64
        return (a * b * c * jg.tanh(d) * (d * 2)).sum()

    ref, got, n = _grads_both_ways(loss, [x, y], monkeypatch)
    _assert_grads_equal(ref, got, f"k={scalar}")
    assert n >= 1
    key = next(iter(fr._REGIONS))
    assert any(type(c) is tuple and c[0] == "r" for node in key[0] for c in node[3])


def test_leaf_fed_from_inside_and_outside_the_region(eager_fusion, monkeypatch):
    """``x`` gets one gradient from the region and one through a matmul (outside): the two
    are summed as node by node; a leaf with three gradients, one from outside, is not
    fused in a way that would reorder the sum."""
    rng = np.random.default_rng(3)
    x = jg.tensor(rng.standard_normal((8, 8)), requires_grad=True)
    m = jg.tensor(rng.standard_normal((8, 8)), requires_grad=True)

    def two():
        return (jg.tanh(x * 2.0) * 3.0).sum() + (x @ m).sum()

    def three():
        return (jg.tanh(x * 2.0) * x).sum() + (x @ m).sum()

    for make in (two, three):
        a, f, _ = _grads_both_ways(make, [x, m], monkeypatch)
        _assert_grads_equal(a, f, make.__name__)


def test_node_with_a_gradient_already_arrived_stays_outside(eager_fusion, monkeypatch):
    """``f.sum() + (f * f).sum()``: ``f``'s node gets a gradient from the plain sum first,
    then two from the product's region. Taking it into that region dropped the first (from
    the second backward on with the default thresholds: a residual block lost a branch's
    gradient). It stays outside, its gradients summed in the node-by-node order."""
    rng = np.random.default_rng(5)
    a = jg.tensor(rng.standard_normal((64, 32)), dtype=jg.float32, requires_grad=True)

    def heads():
        f = jg.relu(a)
        return f.sum() + (f * f).sum()

    def three_ways():
        f = jg.tanh(a)
        return f.sum() + (f * f).sum() + (jg.sigmoid(f) * 2.0).sum()

    for make in (heads, three_ways):
        ref, fused, n = _grads_both_ways(make, [a], monkeypatch)
        _assert_grads_equal(ref, fused, make.__name__)
        f = jg.relu(a.detach()).numpy()
        if make is heads:
            np.testing.assert_allclose(ref[0], (f > 0) * (1 + 2 * f), rtol=1e-6)


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_with_shared_intermediates(seed, eager_fusion, monkeypatch):
    """Random graphs whose intermediates feed several consumers (element-wise ops, sums,
    broadcasts, a matmul outside the regions), differentiated three times: the fused
    gradients are the node-by-node bits every time."""
    rng = np.random.default_rng(seed)
    a = jg.tensor(rng.standard_normal((16, 8)), dtype=jg.float32, requires_grad=True)
    b = jg.tensor(rng.standard_normal(8), dtype=jg.float32, requires_grad=True)
    w = jg.tensor(rng.standard_normal((8, 8)), dtype=jg.float32)
    unary = [jg.tanh, jg.sigmoid, jg.relu, lambda t: t * t, lambda t: -t, jg.sin,
             lambda t: jg.exp(t * 0.1)]
    program = []
    for _ in range(int(rng.integers(3, 9))):
        kind = int(rng.integers(0, 5))
        program.append((kind, int(rng.integers(0, 1 << 30)), int(rng.integers(0, 1 << 30))))
    outs = int(rng.integers(1, 4))

    def loss():
        pool = [a, a + b]
        for kind, i, j in program:
            x, y = pool[i % len(pool)], pool[j % len(pool)]
            if kind == 0:
                pool.append(unary[j % len(unary)](x))
            elif kind == 1:
                pool.append(x * y if i % 2 else x + y)
            elif kind == 2:
                pool.append(x + b if j % 2 else x * b)
            elif kind == 3:
                pool.append(x @ w)
            else:
                pool.append(x.sum(0, keepdim=True) * 0.5 + x)
        return sum(p.sum() for p in pool[-outs:]) + pool[2].sum()

    for _ in range(3):
        ref, fused, _ = _grads_both_ways(loss, [a, b], monkeypatch)
        _assert_grads_equal(ref, fused, f"seed {seed}")


def test_existing_grads_accumulate(eager_fusion, monkeypatch):
    x = jg.randn(50, dtype=jg.float64, requires_grad=True)
    res = []
    for fuse in (False, True):
        monkeypatch.setattr(jg.config, "eager_fusion", fuse)
        x.grad = None
        for _ in range(3):
            (jg.sigmoid(x) * x).sum().backward()
        res.append(x.grad.numpy().copy())
    assert_same_bits(res[1], res[0])
    assert fr.stats()["fused"] == 3


def test_user_gradient_is_not_kept_as_grad(eager_fusion):
    """``y.backward(g)`` where ``g`` reaches a leaf unchanged (an add): the leaf's ``.grad``
    is a copy, not the caller's tensor."""
    x = jg.randn(20, requires_grad=True)
    b = jg.randn(20, requires_grad=True)
    g = jg.randn(20)
    ((x + b) * 1.0 + b).backward(g)
    assert fr.stats()["fused"] == 1
    before = x.grad.numpy().copy()
    g.mul_(2.0)
    assert_same_bits(x.grad, before)
    assert not np.shares_memory(x.grad.numpy(), g.numpy())


def test_hooks_and_retain_grad_on_intermediates(eager_fusion, monkeypatch):
    """A tensor hook or retain_grad keeps its node out of a region: the hook sees the same
    gradient, replaces it the same way, and ``.grad`` is retained as node by node."""
    x = jg.randn(30, dtype=jg.float64, requires_grad=True)
    seen = []
    res = []
    for fuse in (False, True):
        monkeypatch.setattr(jg.config, "eager_fusion", fuse)
        x.grad = None
        u = jg.tanh(x * 2.0)
        v = u * u
        u.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 0.5)
        v.retain_grad()
        (jg.exp(v) * 3.0).sum().backward()
        res.append((x.grad.numpy().copy(), v.grad.numpy().copy()))
    assert fr.stats()["fused"] >= 1
    assert_same_bits(seen[1], seen[0])
    for a, b in zip(res[0], res[1]):
        assert_same_bits(b, a)


def test_modified_saved_tensor_raises_as_node_by_node(eager_fusion):
    x = jg.randn(40, requires_grad=True)
    y = jg.tanh(x * 2.0)
    z = (y * 3.0).exp()
    y.add_(1.0)  # y is saved by TanhBackward (its output) and by nothing else here
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    assert x.grad is None
    assert fr.stats()["fused"] == 0


def test_retain_graph_and_second_backward(eager_fusion, monkeypatch):
    x = jg.randn(25, requires_grad=True)
    loss = (jg.sigmoid(x) * jg.tanh(x)).sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()
    assert_same_bits(x.grad, first * 2)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    assert fr.stats()["fused"] == 2


def test_create_graph_and_grad_run_node_by_node(eager_fusion):
    x = jg.randn(10, dtype=jg.float64, requires_grad=True)
    (gx,) = jg.autograd.grad((jg.tanh(x) * x).sum(), x, create_graph=True)
    gx.sum().backward()  # double backward through the graph create_graph built
    assert x.grad is not None
    assert fr.stats()["fused"] == 1  # the plain backward fused; create_graph's did not


def test_grad_and_backward_inputs(eager_fusion, monkeypatch):
    """``autograd.grad(loss, inputs)`` and ``backward(inputs=)`` fuse too: leaves asked for,
    an intermediate asked for (its node stays out of the region), leaves not asked for."""
    rng = np.random.default_rng(7)
    x, w = (jg.tensor(rng.standard_normal(40), requires_grad=True) for _ in range(2))

    def run(fuse):
        monkeypatch.setattr(jg.config, "eager_fusion", fuse)
        u = jg.tanh(x * w)
        loss = (jg.sigmoid(u) * u * x).sum()
        gx, gu = jg.autograd.grad(loss, [x, u], retain_graph=True)
        (gw,) = jg.autograd.grad(loss, [w], retain_graph=True)
        x.grad = w.grad = None
        loss.backward(inputs=[w])
        return gx, gu, gw, w.grad, x.grad

    before = fr.stats()["fused"]
    ref = run(False)
    assert fr.stats()["fused"] == before
    got = run(True)
    assert fr.stats()["fused"] >= before + 3  # (two regions in the first: u splits it)
    assert ref[4] is None and got[4] is None  # x was not asked for
    for a, b in zip(ref[:4], got[:4]):
        assert_same_bits(b, a)


def test_threads_backward_at_once(eager_fusion):
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(300) for _ in range(4)]
    expected = []
    jg.config.eager_fusion = False
    for a in arrays:
        t = jg.tensor(a, requires_grad=True)
        (jg.tanh(t * 1.5) * jg.sigmoid(t)).sum().backward()
        expected.append(t.grad.numpy().copy())
    jg.config.eager_fusion = True

    def work(i):
        for _ in range(20):
            t = jg.tensor(arrays[i], requires_grad=True)
            (jg.tanh(t * 1.5) * jg.sigmoid(t)).sum().backward()
            assert_same_bits(t.grad, expected[i])

    assert run_in_threads(work, 4) == []
    assert fr.stats()["fused"] == 80


def test_a_region_the_compiler_refuses_runs_node_by_node(eager_fusion, monkeypatch):
    def refuse(order, key, n_slots):
        def fn(*tensors):
            raise RuntimeError("the compiler refused it")
        return fn

    monkeypatch.setattr(fr, "_compile", refuse)
    x = jg.randn(30, requires_grad=True)
    for _ in range(2):
        x.grad = None
        (jg.tanh(x) * x).sum().backward()
        assert x.grad is not None
    assert fr.stats()["fused"] == 0
    assert [e[1] for e in fr._REGIONS.values()] == [False]



def test_a_number_that_changes_between_backwards_is_never_stale(eager_fusion, monkeypatch):
    """The numbers a node saved are part of the region's structure: a loop whose scale
    changes each step gets each step's gradient (a structure per value, never a stale one)."""
    x = jg.randn(64, dtype=jg.float32, requires_grad=True)
    for k in (1.5, 2.5, 1.5, -3.0):
        ref, got, n = _grads_both_ways(lambda k=k: (jg.tanh(x * k) * x).sum(), [x],
                                       monkeypatch)
        _assert_grads_equal(ref, got, f"k={k}")
        assert n == 1
