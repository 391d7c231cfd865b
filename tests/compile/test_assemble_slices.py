"""A compiled step assembles the gradients of a split's parts in one pass
(``compiler.passes.assemble_slice_grads`` -> the ``assemble_slices`` op) with the bits of
eager mode's zero-filled slices and adds: signed zeros, uncovered parts, overlapping slices
(left to the adds), and the GPT example's ``qkv.split``."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import newest_plan

import jitgrad as jg


def _ops(plan) -> list:
    return [e.op if isinstance(e.op, str) else e.op.name for e in plan.graph.eqns]


def _grads(fn, x, *extra):
    """(loss, x.grad) of ``fn(x, *extra)`` and its backward inside the function, eagerly
    and compiled (second call), and the ops of the compiled plan."""
    def step(x, *extra):
        x.grad = None
        loss = fn(x, *extra)
        loss.backward()
        return loss

    results = []
    compiled = jg.compile(step)
    for f in (step, compiled):
        for _ in range(2):
            loss = f(x, *extra)
        results.append((loss.detach().numpy().copy(), x.grad.numpy().copy()))
    return (*results, _ops(newest_plan(compiled)))


def _split_loss(x, w):
    q, k, v = x.split(4, dim=2)
    return ((q * w).sum() + (k * k).sum() + (v.tanh() * w).sum())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_split_in_three_is_one_assembly_with_eager_bits(dtype):
    rng = np.random.default_rng(0)
    x = jg.tensor(rng.standard_normal((3, 5, 12)).astype(dtype), requires_grad=True)
    w = jg.tensor(rng.standard_normal((3, 5, 4)).astype(dtype))
    w.data[0, 0] = -0.0  # a -0.0 gradient element: the adds of zeros give +0.0
    w.data[1, 2, 1] = 0.0
    (le, ge), (lc, gc), ops = _grads(_split_loss, x, w)
    assert le.tobytes() == lc.tobytes() and ge.tobytes() == gc.tobytes()
    assert np.signbit(gc).sum() == np.signbit(ge).sum()
    assert ops.count("assemble_slices") == 1 and "getitem_backward" not in ops


def test_parts_not_covering_the_value_leave_zeros():
    rng = np.random.default_rng(1)
    x = jg.tensor(rng.standard_normal((6, 8)).astype(np.float32), requires_grad=True)

    def fn(x):
        return x[:2].sin().sum() + x[4:, 2:5].exp().sum()
    (le, ge), (lc, gc), ops = _grads(fn, x)
    assert ge.tobytes() == gc.tobytes() and (gc[2:4] == 0).all()
    assert ops.count("assemble_slices") == 1


def test_overlapping_slices_keep_the_adds():
    rng = np.random.default_rng(2)
    x = jg.tensor(rng.standard_normal((6, 8)).astype(np.float32), requires_grad=True)

    def fn(x):
        return x[:4].sin().sum() + x[2:].exp().sum()
    (le, ge), (lc, gc), ops = _grads(fn, x)
    assert ge.tobytes() == gc.tobytes()
    assert "assemble_slices" not in ops and ops.count("getitem_backward") == 2


def test_a_part_read_twice_is_not_taken_apart():
    """A part's gradient that something else reads too stays as it is (the tree takes only
    values read once): the result is still eager mode's."""
    rng = np.random.default_rng(3)
    x = jg.tensor(rng.standard_normal((4, 6)).astype(np.float32), requires_grad=True)

    def fn(x):
        a, b = x.split(3, dim=1)
        return (a * b).sum() + a.sin().sum()
    (le, ge), (lc, gc), _ = _grads(fn, x)
    assert ge.tobytes() == gc.tobytes()


def test_the_gpt_example_assembles_its_qkv_gradients():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "asv_benchmarks" / "benchmarks"))
    import training_workloads as tw

    state = tw.gpt_initial_state("nano")
    steps = []
    for _ in range(2):
        model = tw._gpt_model(jg, "nano")
        with jg.no_grad():
            model.load_state_dict({k: jg.from_numpy(v.copy()) for k, v in state.items()})
        opt = model.configure_optimizers(tw.GPT_WEIGHT_DECAY, tw.GPT_LR, tw.GPT_BETAS, "cpu")
        steps.append(tw._gpt_module(jg).make_step(model, opt, tw.GPT_CLIP))
    eager, compiled = steps[0], jg.compile(steps[1])
    x, y = (jg.from_numpy(a) for a in tw.gpt_data("nano"))
    for _ in range(3):
        assert eager(x, y).detach().numpy().tobytes() == compiled(x, y).detach().numpy().tobytes()
    assert _ops(newest_plan(compiled)).count("assemble_slices") == 1  # one layer's qkv split
