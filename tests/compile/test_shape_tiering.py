"""Shape tiering (jit/tiering.py): a call with new shapes runs eagerly until its eager calls
have cost what a retrace does, then traces; the first and second shapes trace at once.
Where a call runs changes its speed, never its result."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import config
from jitgrad.jit.tiering import ShapeTiering, shape_kind


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (retrace warnings)
        yield


def _x(n, seed=0):
    rng = np.random.default_rng(seed)
    return jg.tensor(rng.standard_normal((n, 8)), dtype=jg.float32, requires_grad=True)


def _loss(x, w):
    return (jg.tanh(x @ w) * 2.0 + jg.sigmoid(x)[:, :4]).sum()


def _w():
    return jg.tensor(np.linspace(-1, 1, 32).reshape(8, 4), dtype=jg.float32,
                     requires_grad=True)


def _key(n):
    return (("t",), (((n, 8), "f4", True, False, np.ndarray, 0),), True, ())


def test_the_rule_without_timings():
    t = ShapeTiering()
    a, b, c = _key(3), _key(5), _key(7)
    assert not t.runs_eagerly(a)
    t.traced(a, 1.0)  # the first trace (kernels compiled): not a retrace
    t.traced(a, 0.025)  # its guard failed (an optimizer's first step): a retrace
    assert t.retrace_s[shape_kind(c)] == 0.025
    assert not t.runs_eagerly(b)  # (a second shape: traced at once all the same)
    t.traced(b, 0.020)
    assert t.retrace_s[shape_kind(c)] == 0.020
    runs = 0
    while t.runs_eagerly(c):
        t.ran_eagerly(c, 0.003)
        runs += 1
        t.ran_eagerly(_key(101 + runs), 0.003)  # (another shape between: no streak)
    assert runs == 7  # 7 * 3 ms >= 20 ms
    d = _key(9)
    t.ran_eagerly(d, 0.5)  # (a first eager call that loaded kernels: paid at once)
    assert not t.runs_eagerly(d)
    t.traced(c, 0.030)
    assert t.retrace_s[shape_kind(c)] == 0.020  # the fastest retrace is kept
    assert c not in t.waiting
    other_kind = (("t",), (((3, 8), "f8", True, False, np.ndarray, 0),), True, ())
    assert not t.runs_eagerly(other_kind)  # another dtype: its own kind


def test_a_new_shape_called_several_times_in_a_row_traces():
    """An evaluation loop or a benchmark: the same new shape back to back compiles soon."""
    w = _w()
    f = jg.compile(_loss)
    for n in (11, 13):
        f(_x(n), w)
    for _ in range(3):
        f(_x(17), w)
    # (two eager calls, then the trace; one, when the first eager call took as long as a
    # retrace: eager kernels loaded in it)
    assert f.stats["eager_new_shapes"] in (1, 2) and f.stats["traces"] == 3
    hits = f.stats["cache_hits"]
    f(_x(17), w)
    assert f.stats["cache_hits"] == hits + 1


def test_new_shapes_run_eagerly_then_trace_and_give_eager_bits():
    w = _w()
    f = jg.compile(_loss)
    for n in (11, 13):  # first and second shapes: traced at once
        f(_x(n), w).backward()
    assert f.stats["traces"] == 2 and f.stats["eager_new_shapes"] == 0
    for k in range(2000):
        f(_x(19 + k % 3), w)  # (shapes in between: no back-to-back streak)
        x = _x(17, seed=k)
        traces = f.stats["traces"]
        out = f(x, w)
        traced_now = f.stats["traces"] > traces  # (this call of shape 17 traced it)
        out.backward()
        xe = _x(17, seed=k)
        ref = _loss(xe, w.detach().requires_grad_())
        ref.backward()
        assert out.item() == ref.item()
        np.testing.assert_array_equal(x.grad.numpy(), xe.grad.numpy())
        if traced_now:  # (on a loaded machine a shape in between may trace first: slow
            break       # eager calls of it reached the retrace time; that is tiering too)
    eager_runs = f.stats["eager_new_shapes"]
    assert traced_now and 1 <= eager_runs < 4000
    hits = f.stats["cache_hits"]
    f(_x(17), w)
    assert f.stats["cache_hits"] == hits + 1  # compiled from now on


def test_a_training_loop_switching_shapes_matches_eager_bit_for_bit():
    def run(compiled):
        jg.manual_seed(0)
        model = jg.nn.Sequential(jg.nn.Linear(8, 16), jg.nn.Tanh(), jg.nn.Linear(16, 3))
        # (SGD: Adam's traced update rounds differently, docs/architecture.md's bound)
        opt = jg.optim.SGD(model.parameters(), 1e-2, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = jg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        f = jg.compile(step) if compiled else step
        rng = np.random.default_rng(3)
        losses = []
        for n in [16] * 3 + [5, 9, 16, 7, 5, 9, 12, 16, 5] * 4:
            x = jg.tensor(rng.standard_normal((n, 8)), dtype=jg.float32)
            y = jg.tensor(rng.integers(0, 3, n))
            losses.append(f(x, y).item())
        return losses, [p.detach().numpy().copy() for p in model.parameters()], f

    eager_losses, eager_params, _ = run(False)
    losses, params, f = run(True)
    assert losses == eager_losses
    for a, b in zip(params, eager_params):
        np.testing.assert_array_equal(a, b)
    assert f.stats["eager_new_shapes"] > 0


def test_a_step_counter_with_changing_batch_shapes_does_not_trace_per_call():
    """A Python int that changes at every call, with batches of changing shapes: a kind of
    call is the key without its numbers and shapes, so tiering runs the new ones eagerly
    (the numbers limit counts traced counter values, whatever the shapes)."""
    w = jg.tensor(np.ones((4, 4), np.float32), requires_grad=True)

    def step(x, it):
        return (x @ w).tanh().sum() * min(1.0, (it + 1) / 1000)

    f = jg.compile(step)
    sizes = np.random.default_rng(0).integers(1, 31, 200)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, b in enumerate(sizes):
            x = jg.tensor(np.linspace(-1, 1, 4 * int(b)).reshape(int(b), 4),
                          dtype=jg.float32)
            assert f(x, i).item() == step(x, i).item()
    assert f.stats["traces"] <= 3  # (was 8 per shape: 160 traces, 26 warnings)
    assert not [w for w in caught if "recompile_limit" in str(w.message)]


@pytest.mark.parametrize("how", ["config off", "dynamic=False", "fullgraph=True"])
def test_every_new_shape_traces_at_once_when_asked(monkeypatch, how):
    w = _w()
    if how == "config off":
        monkeypatch.setattr(config, "shape_tiering", False)
    options = {"dynamic=False": {"dynamic": False}, "fullgraph=True": {"fullgraph": True}}
    f = jg.compile(_loss, **options.get(how, {}))
    for n in (11, 13, 17, 19):
        f(_x(n), w)
    assert f.stats["traces"] == 4 and f.stats["eager_new_shapes"] == 0


def test_lower_and_eager_reason_trace_new_shapes_at_once():
    w = _w()
    f = jg.compile(_loss)
    for n in (11, 13):
        f(_x(n), w)
    f(_x(17), w)
    assert f.stats["eager_new_shapes"] == 1
    assert f.eager_reason(_x(17), w) is None
    assert "tanh" in str(f.lower(_x(19), w))
    assert f.stats["traces"] == 4


def test_reset_forgets_the_measurements():
    w = _w()
    f = jg.compile(_loss)
    for n in (11, 13):
        f(_x(n), w)
    f.reset()
    f(_x(17), w)  # (a first shape again: traced at once)
    assert f.stats["eager_new_shapes"] == 0
