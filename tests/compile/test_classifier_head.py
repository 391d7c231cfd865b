"""A compiled training step runs its classifier head -- the linear layer before the
cross-entropy chain, the chain, the product carrying the gradient to the layer below -- as
one step (``compiler/classifier_head.py``, ``kernels/classifier_head.py``) with the bits of
the separate calls, eager mode's."""

import numpy as np
import pytest
from helpers import cross_entropy_step, newest_plan
from jitgrad.kernels.classifier_head import blas_thread_count, plan_head

import jitgrad as jg
from jitgrad.compiler import classifier_head as ch
from jitgrad.compiler.chains import nothing
from jitgrad.ops.nnops.linear import _addmm_eager
from jitgrad.ops.nnops.nll import _cross_entropy_chain


def _mlp(n_in, hidden, n_out, bias, dtype):
    layers = [jg.nn.Linear(n_in, hidden, bias=bias), jg.nn.ReLU(),
              jg.nn.Linear(hidden, n_out, bias=bias)]
    model = jg.nn.Sequential(*layers)
    return model.to(jg.float64) if dtype == np.float64 else model


def _pair(make):
    models = [make(), make()]
    models[1].load_state_dict(models[0].state_dict())
    return models


def _runs_head(compiled) -> bool:
    return any(getattr(r, "__qualname__", "").startswith("_head_runner")
               for r in newest_plan(compiled).runners)


def _assert_same_steps(models, x, y, steps=3, **ce):
    eager, compiled = (cross_entropy_step(m, jg.optim.SGD(m.parameters(), lr=0.1), **ce)
                       for m in models)
    compiled = jg.compile(compiled)
    for _ in range(steps):
        a, b = eager(x, y), compiled(x, y)
        assert a.dtype == b.dtype and a._data.tobytes() == b._data.tobytes()
        for p, q in zip(models[0].parameters(), models[1].parameters()):
            assert p._data.tobytes() == q._data.tobytes()
            assert p.grad._data.tobytes() == q.grad._data.tobytes()
    return compiled


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch", [2, 7, 129, 300, 1024])
def test_mlp_step_equals_eager_bit_for_bit(batch, dtype):
    jg.manual_seed(batch)
    models = _pair(lambda: _mlp(20, 64, 10, True, dtype))
    x = jg.randn(batch, 20, dtype=jg.float64 if dtype == np.float64 else jg.float32)
    y = jg.randint(0, 10, (batch,))
    compiled = _assert_same_steps(models, x, y)
    assert _runs_head(compiled)
    # the linear layer, the chain's first call and the gradients' products (input, weight)
    # run in the head's step; the chain's other three calls did nothing already
    assert sum(r is nothing for r in newest_plan(compiled).runners) == 6


@pytest.mark.parametrize("ce", [{"reduction": "sum"}, {"label_smoothing": 0.0}])
def test_no_bias_and_sum_reduction(ce):
    jg.manual_seed(1)
    models = _pair(lambda: _mlp(12, 600, 7, False, np.float32))
    x, y = jg.randn(600, 12), jg.randint(0, 7, (600,))
    assert _runs_head(_assert_same_steps(models, x, y, **ce))


def test_head_over_the_input_has_no_input_gradient_product():
    jg.manual_seed(2)
    models = _pair(lambda: jg.nn.Linear(30, 5))
    x, y = jg.randn(513, 30), jg.randint(0, 5, (513,))
    compiled = _assert_same_steps(models, x, y)
    assert _runs_head(compiled)
    assert sum(r is nothing for r in newest_plan(compiled).runners) == 5  # no input grad


def test_ignored_targets_take_the_separate_calls():
    jg.manual_seed(3)
    models = _pair(lambda: _mlp(8, 16, 4, True, np.float32))
    x = jg.randn(600, 8)
    y = jg.randint(0, 4, (600,))
    y._data[::7] = 2
    compiled = _assert_same_steps(models, x, y, ignore_index=2)
    assert _runs_head(compiled)


def test_a_bad_target_raises_as_eager_and_changes_nothing():
    jg.manual_seed(4)
    models = _pair(lambda: _mlp(8, 16, 4, True, np.float32))
    x, y = jg.randn(600, 8), jg.randint(0, 4, (600,))
    compiled = _assert_same_steps(models, x, y, steps=1)
    before = [p._data.copy() for p in models[1].parameters()]
    bad = y.clone()
    bad._data[300] = 4
    eager = cross_entropy_step(models[0], jg.optim.SGD(models[0].parameters(), lr=0.1))
    with pytest.raises(Exception) as want:
        eager(x, bad)
    with pytest.raises(type(want.value)) as got:
        compiled(x, bad)
    assert str(got.value) == str(want.value)
    for p, b in zip(models[1].parameters(), before):
        np.testing.assert_array_equal(p._data, b)


def test_wide_rows_keep_the_separate_steps():
    jg.manual_seed(5)
    models = _pair(lambda: _mlp(8, 16, 40, True, np.float32))  # 40 classes > SMALL_C
    x, y = jg.randn(64, 8), jg.randint(0, 40, (64,))
    compiled = _assert_same_steps(models, x, y, steps=2)
    assert not _runs_head(compiled)


def test_disabled_by_environment(monkeypatch):
    monkeypatch.setenv("JITGRAD_FUSED_HEAD", "0")
    jg.manual_seed(6)
    models = _pair(lambda: _mlp(8, 16, 4, True, np.float32))
    x, y = jg.randn(32, 8), jg.randint(0, 4, (32,))
    assert not _runs_head(_assert_same_steps(models, x, y, steps=1))


def _separate(h, w, b, t, g, w2):
    x = _addmm_eager(b, h, w) if b is not None else np.matmul(h, w)
    loss, gx = _cross_entropy_chain(x, t, g, "mean", -100)
    return loss, gx, None if w2 is None else np.matmul(gx, w2), np.matmul(gx.T, h)


@pytest.mark.parametrize("parts,dw_parts", [(1, 1), (2, 1), (2, 2), (3, 3)])
@pytest.mark.parametrize("layout", ["transposed", "plain"])
def test_kernel_against_the_separate_calls(parts, dw_parts, layout):
    """One part is the separate calls themselves; more give their bits where the probe
    (``head_parts``) says so -- either way the result is checked here."""
    rng = np.random.default_rng(parts)
    m, k, n = 1536, 96, 10
    h = np.maximum(rng.standard_normal((m, k)), 0).astype(np.float32)
    w_nk = rng.standard_normal((n, k)).astype(np.float32)
    w = w_nk.T if layout == "transposed" else np.ascontiguousarray(w_nk.T)
    b = rng.standard_normal(n).astype(np.float32)
    t = rng.integers(0, n, m)
    g = np.asarray(1.0, np.float32)
    plan = plan_head(h, w, b, t, w_nk, "mean", -100, parts, dw_parts, weight_grad=True)
    got = plan.run(h, w, b, t, g, w_nk)
    want = _separate(h, w, b, t, g, w_nk)
    assert len(got) == len(want) == 4
    same = all(np.array_equal(a, c) for a, c in zip(got, want))
    probed = ch.head_parts(h, w, b, w_nk, "mean", -100, _separate, True)
    if parts == 1:
        assert same
    for a, c in zip(got, want):  # any split: the same values to rounding
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)
    n_parts = min(jg.get_num_threads(), m // ch.MIN_PART_ROWS)
    assert probed in ((1, 1), (n_parts, 1), (n_parts, n_parts))


def test_plan_head_declines_what_it_does_not_take():
    rng = np.random.default_rng(0)
    h = rng.standard_normal((8, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    t = rng.integers(0, 3, 8)
    assert plan_head(h, w, None, t, None, "none", -100) is None        # per-sample losses
    assert plan_head(h[:1], w, None, t[:1], None, "mean", -100) is None  # one row: GEMV
    assert plan_head(h, w.astype(np.float64), None, t, None, "mean", -100) is None
    assert plan_head(h, rng.standard_normal((4, 17)).astype(np.float32), None, t, None,
                     "mean", -100) is None                              # wide rows
    assert plan_head(h[:, ::2], w[::2], None, t, None, "mean", -100) is None  # strided
    bad = t.copy()
    bad[3] = 3
    plan = plan_head(h, w, None, bad, None, "mean", -100)
    assert plan.run(h, w, None, bad, np.asarray(1.0, np.float32), None) is None


def test_heads_leave_openblas_thread_count_as_it_was_alone_and_at_once():
    threads = blas_thread_count()
    if threads is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    import threading

    get, _ = threads
    before = get()
    rng = np.random.default_rng(1)
    h = rng.standard_normal((1024, 64)).astype(np.float32)
    w = rng.standard_normal((64, 10)).astype(np.float32)
    t = rng.integers(0, 10, 1024)
    plans = [plan_head(h, w, None, t, None, "mean", -100, 2) for _ in range(2)]
    g = np.asarray(1.0, np.float32)
    want = plans[0].run(h, w, None, t, g, None)
    assert want is not None and get() == before  # one head on its own

    def loop(plan, out):
        for _ in range(50):
            out.append(plan.run(h, w, None, t, g, None))

    outs = [[], []]
    workers = [threading.Thread(target=loop, args=(p, o)) for p, o in zip(plans, outs)]
    for th in workers:
        th.start()
    for th in workers:
        th.join()
    assert get() == before
    for out in outs:
        for got in out:
            assert got[0].tobytes() == want[0].tobytes()
            assert got[1].tobytes() == want[1].tobytes()
