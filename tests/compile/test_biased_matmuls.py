"""A linear layer's bias is added inside the kernel of the element-wise ops that read it
(``compiler.passes.split_biased_matmuls``): for 2-D inputs, and for inputs of more dims
read through the reshape that ``linear`` puts around its ``addmm``; the bits of eager mode."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import newest_plan

import jitgrad as jg
import jitgrad.nn.functional as F

RNG = np.random.default_rng(0)


def _run(fn, *arrays):
    """Eager and compiled (second call) results of ``fn`` and its gradients, and the plan."""
    def step(*ts):
        for t in ts:
            t.grad = None
        loss = fn(*ts)
        loss.backward()
        return loss

    compiled = jg.compile(step)
    results = []
    for f in (step, compiled):
        ts = [jg.tensor(a, requires_grad=True) for a in arrays]
        for _ in range(2):
            loss = f(*ts)
        results.append([loss.detach().numpy()] + [t.grad.numpy() for t in ts])
    for e, c in zip(*results):
        assert e.tobytes() == c.tobytes()
    return newest_plan(compiled)


def _ops(plan) -> list:
    return [e.op if isinstance(e.op, str) else e.op.name for e in plan.graph.eqns]


def _group_with(plan, *names) -> bool:
    return any(all(f"={n}" in d for n in names) for d in plan.describe_groups())


@pytest.mark.parametrize("shape", [(16, 24), (4, 6, 24), (2, 3, 4, 24)])
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_the_bias_is_added_in_the_activation_kernel(shape, act):
    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.standard_normal((32, 24)).astype(np.float32)
    b = RNG.standard_normal(32).astype(np.float32)
    plan = _run(lambda x, w, b: getattr(F, act)(F.linear(x, w, b)).square().sum(), x, w, b)
    assert "addmm" not in _ops(plan)
    assert _group_with(plan, "add", act)


def test_a_residual_add_takes_the_bias_of_a_three_dim_linear():
    x = RNG.standard_normal((4, 6, 24)).astype(np.float32)
    w = RNG.standard_normal((24, 24)).astype(np.float32)
    b = RNG.standard_normal(24).astype(np.float32)
    plan = _run(lambda x, w, b: (x + F.linear(x, w, b)).tanh().sum(), x, w, b)
    assert "addmm" not in _ops(plan)


@pytest.mark.parametrize("reader", ["softmax", "flatten"])
def test_other_readers_keep_the_addmm(reader):
    """A row op reads the product (no element-wise reader to take the bias), or a reshape
    that does not keep the last dim: the ``addmm`` stays, with eager mode's bits."""
    x = RNG.standard_normal((4, 6, 24)).astype(np.float32)
    w = RNG.standard_normal((32, 24)).astype(np.float32)
    b = RNG.standard_normal(32).astype(np.float32)
    if reader == "softmax":
        def fn(x, w, b):
            return (F.linear(x, w, b).softmax(-1) * 3.0).sin().sum()
    else:
        def fn(x, w, b):
            return F.linear(x, w, b).reshape(4, -1).relu().sum()
    plan = _run(fn, x, w, b)
    assert "addmm" in _ops(plan)
