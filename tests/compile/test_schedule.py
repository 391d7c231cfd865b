"""Plan step order (``compiler/schedule.py``): a group whose values only leave the plan (an
optimizer update) runs right after the last step it must follow -- its gradient's GEMM, the
readers of the parameter it writes -- not after the whole backward pass; the results are
eager's bits and the updates still store in place."""

import numpy as np
import pytest
from helpers import cross_entropy_step, newest_plan

import jitgrad as jg
import jitgrad.nn as nn
from jitgrad.compiler.fusion import partition
from jitgrad.compiler.inplace_writes import sharing_memory, step_reads
from jitgrad.compiler.schedule import hoist_sinks
from jitgrad.ops.linalg import MATMUL
from jitgrad.trace.ir import Var


def _mlp(seed=0):
    jg.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 4))


class _Tied(nn.Module):
    """One weight read by two layers, the second reading it after the first layer's
    gradient exists: its update must wait for the last reader."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(jg.randn(8, 8) * 0.3)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = (x @ self.w.t()).relu()
        return self.head((h @ self.w.t()).tanh())


def _writers(plan):
    """Step index -> the parameters' destination Vars its group stores into or computes."""
    writes = {id(v) for _, v in plan.graph.writes}
    return [k for k, s in enumerate(plan.steps) if s.kind == "group" and any(
        id(e.out) in writes for e in s.group.eqns)]


def _step_of(plan, var_id):
    for k, s in enumerate(plan.steps):
        outs = [e.out for e in s.group.eqns + s.group.reductions] if s.kind == "group" \
            else [s.eqn.out]
        if any(id(o) == var_id for o in outs):
            return k
    raise AssertionError("no step computes the value")


@pytest.mark.parametrize("make_opt", [
    lambda p: jg.optim.SGD(p, lr=0.1),
    lambda p: jg.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-2),
], ids=["sgd", "momentum_wd"])
def test_updates_follow_their_gradients_with_eager_bits(make_opt):
    x, y = jg.randn(10, 12), jg.tensor([0, 1, 2, 3, 1, 0, 2, 3, 1, 0])
    em, cm = _mlp(), _mlp()
    eager = cross_entropy_step(em, make_opt(em.parameters()))
    compiled = jg.compile(cross_entropy_step(cm, make_opt(cm.parameters())))
    for _ in range(4):
        np.testing.assert_array_equal(eager(x, y)._data, compiled(x, y)._data)
        for pe, pc in zip(em.parameters(), cm.parameters()):
            np.testing.assert_array_equal(pe._data, pc._data)
    plan = newest_plan(compiled)
    products = [k for k, s in enumerate(plan.steps)
                if s.kind == "call" and s.eqn.op is MATMUL]
    updates = _writers(plan)
    # the first layers' weight updates run before the last GEMM (the first layer's
    # weight gradient): not all after the backward pass
    assert min(updates) < max(products)
    # and every update still runs after each step reading the array it writes
    for k in updates:
        for d in plan.inplace.get(k, {}).values():
            tainted = sharing_memory(d, plan.steps)
            assert not any(step_reads(s, tainted) for s in plan.steps[k + 1:])
    assert sum(len(m) for m in plan.inplace.values()) >= len(list(cm.parameters()))


def test_a_weight_read_twice_is_updated_after_its_last_reader():
    x, y = jg.randn(6, 8), jg.tensor([0, 1, 2, 1, 0, 2])
    jg.manual_seed(1)
    em = _Tied()
    jg.manual_seed(1)
    cm = _Tied()
    eager = cross_entropy_step(em, jg.optim.SGD(em.parameters(), lr=0.2))
    compiled = jg.compile(cross_entropy_step(cm, jg.optim.SGD(cm.parameters(), lr=0.2)))
    for _ in range(3):
        np.testing.assert_array_equal(eager(x, y)._data, compiled(x, y)._data)
        np.testing.assert_array_equal(em.w._data, cm.w._data)
    plan = newest_plan(compiled)
    w_var = next(v for v in list(plan.graph.inputs) + list(plan.graph.externals)
                 if v.source is not None and v.source.obj is cm.w)
    # stored in place (an update placed before a reader could not be)...
    w_update = next(k for k, m in plan.inplace.items() if any(d is w_var for d in m.values()))
    # ...after both products reading the weight, the second one in the backward pass
    tainted = sharing_memory(w_var, plan.steps)
    readers = [k for k, s in enumerate(plan.steps) if k != w_update and step_reads(s, tainted)]
    assert len([k for k in readers if plan.steps[k].kind == "call"]) >= 3
    assert w_update > max(readers)


def test_hoisting_keeps_every_value_computed_before_it_is_read():
    model = _mlp()
    opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    compiled = jg.compile(cross_entropy_step(model, opt))
    compiled(jg.randn(4, 12), jg.tensor([0, 1, 2, 3]))
    compiled(jg.randn(4, 12), jg.tensor([0, 1, 2, 3]))
    plan = newest_plan(compiled)
    original = partition(plan.graph)
    order = hoist_sinks(plan.graph, list(original))
    assert sorted(map(id, order)) == sorted(map(id, original))  # a permutation
    made: set = {id(v) for v in list(plan.graph.inputs) + list(plan.graph.externals)}
    made |= {id(v) for v in plan.graph.all_vars() if v.kind == "const"}
    for s in order:
        reads = s.group.operands() if s.kind == "group" else [
            i for i in s.eqn.ins if isinstance(i, Var)]
        assert all(id(v) in made for v in reads)
        made |= {id(e.out) for e in (s.group.eqns + s.group.reductions)} \
            if s.kind == "group" else {id(s.eqn.out)}
    assert [k for k, s in enumerate(order) if s.group is not None] == [
        s.group.index for s in order if s.group is not None]
