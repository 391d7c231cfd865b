"""Effect equations (``trace.effects.run_effect``, ``ir.is_effect``): what a collective of
``jitgrad.distributed`` becomes inside a compiled function. The plan runs them at every call,
in the traced order, never dropped (even unread), merged (even identical) or fused."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.compiler.passes import optimize
from jitgrad.trace.effects import in_place, run_effect
from jitgrad.trace.ir import is_effect
from jitgrad.trace.state import STATE
from jitgrad.trace.tracer import Tracer


def logged(log: list, tag: str, x):
    """An effect: appends ``tag`` to ``log`` and returns ``2 * x`` (a new array)."""
    def impl(a):
        log.append(tag)
        return a * 2.0
    return run_effect("log", impl, [x], tag)


@pytest.mark.parametrize("disable_jit", [False, True])
def test_plans_run_effects_at_every_call_in_order_never_dropped_or_merged(monkeypatch,
                                                                          disable_jit):
    if disable_jit:  # the reference interpreter runs them too
        monkeypatch.setenv("JITGRAD_DISABLE_JIT", "1")
    log = []

    @jg.compile(fullgraph=True)
    def f(x):
        y = x * 3.0
        a = logged(log, "a", y)
        logged(log, "a", y)      # identical to the first: not merged by CSE
        logged(log, "unread", x)  # nothing reads it: not dropped by DCE
        b = logged(log, "b", a + 1.0)
        return b + y

    x = jg.tensor([1.0, 2.0])
    expected = ((x.numpy() * 3.0 * 2.0 + 1.0) * 2.0) + x.numpy() * 3.0
    for call in range(3):
        log.clear()
        np.testing.assert_array_equal(f(x).numpy(), expected)
        # the first call runs them while tracing (the values are real: a graph break
        # finishes the call eagerly from there), then in the plan, which runs the call
        assert log == ["a", "a", "unread", "b"] * (2 if call == 0 else 1)
    assert f.stats["traces"] == 1
    if not disable_jit:
        log.clear()  # (the closure's list is guarded: as it was at the calls)
        lowered = f.lower(x)
        steps = [s for s in lowered.fusion_groups if "=log" in s]
        assert len(steps) == 4 and all(": call " in s for s in steps), lowered.fusion_groups
        assert "effect=unread" in lowered.graph


def test_passes_keep_effect_equations():
    log = []
    x = jg.tensor([1.0, 2.0])
    tr = Tracer()
    tr.add_input(x, 0)
    STATE.tracer = tr
    try:
        logged(log, "kept", x)
        out = x + 1.0
    finally:
        STATE.tracer = None
    graph = tr.finish([out])
    assert [is_effect(e) for e in graph.eqns] == [True, False]
    optimize(graph)
    assert [e.name for e in graph.eqns] == ["log", "add"]


class Sink:
    """An effect that asks for its operands in views of one flat buffer (as a
    DistributedDataParallel bucket does): copies those not already there, notes which were,
    returns a copy of the buffer."""

    _jitgrad_guard_by_identity = True  # (``placed`` changes at every call: no retrace)

    def __init__(self, *shapes, dtype=np.float64) -> None:
        self.flat = np.zeros(sum(int(np.prod(s)) for s in shapes), dtype)
        self.views, start = [], 0
        for s in shapes:
            n = int(np.prod(s))
            self.views.append(self.flat[start:start + n].reshape(s))
            start += n
        self.placed: list = []

    def impl(self, *arrays):
        self.placed = [in_place(a, v) for a, v in zip(arrays, self.views)]
        for a, v in zip(arrays, self.views):
            if not in_place(a, v):
                np.copyto(v, a)
        return self.flat.copy()

    def __call__(self, *tensors):
        return run_effect("sink", self.impl, tensors, "sink", places=self.views)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_plans_compute_an_effects_operands_where_it_asks(dtype):
    """A matmul (``np.matmul(out=...)``), a fused element-wise value and a sum over rows
    (through a reshape) are computed straight into the effect's places; the results equal
    eager mode's bit for bit."""
    sink = Sink((3, 4), (4,), (3, 4), dtype=dtype)

    def f(a, b, c):
        mm = a @ b
        bias = c.sum(0, keepdim=True).reshape(4)
        ew = c * 2.0 + 1.0
        return sink(mm, bias, ew) + 1.0

    rng = np.random.default_rng(0)
    args = [jg.tensor(rng.standard_normal(s).astype(dtype)) for s in ((3, 5), (5, 4), (3, 4))]
    eager = f(*args).numpy()
    assert sink.placed == [False, False, False]
    compiled = jg.compile(f, fullgraph=True)
    for _ in range(3):
        np.testing.assert_array_equal(compiled(*args).numpy(), eager)
    assert sink.placed == [True, True, True]


def test_an_operand_read_elsewhere_or_made_from_its_places_memory_is_not_placed():
    """The plan places nothing another step reads, nor a value whose producer reads the
    place's memory (a captured tensor over it): the effect copies them; results as in eager
    mode."""
    sink = Sink((2, 2), (2, 2))
    old = jg.from_numpy(sink.views[1])  # a captured tensor over the second place

    def f(a, b):
        mm = a @ b              # also returned: not placed
        late = a * 3.0 + old    # reads the second place: not placed
        return mm, sink(mm, late)

    a, b = jg.tensor(np.eye(2) * 2.0), jg.tensor(np.arange(4.0).reshape(2, 2))
    compiled = jg.compile(f, fullgraph=True)
    compiled(a, b)  # traced (running the effect once more than eager mode)
    for _ in range(2):
        old._data[...] = 5.0
        eager = [t.numpy() for t in f(a, b)]
        old._data[...] = 5.0
        got = [t.numpy() for t in compiled(a, b)]
        for e, g in zip(eager, got):
            np.testing.assert_array_equal(g, e)
        assert sink.placed == [False, False]


def test_a_captured_tensor_written_then_set_as_grad_is_that_tensor():
    """``p.grad = t`` of a captured tensor ``t`` written in place: ``p.grad`` is ``t`` after
    each compiled call, as in eager mode (not a copy of its value)."""
    p = jg.zeros(3, requires_grad=True)
    t = jg.zeros(3)

    @jg.compile(fullgraph=True)
    def f(x):
        with jg.no_grad():
            t.copy_(x * 2.0)
        p.grad = t
        return x + 1.0

    for k in range(3):
        p.grad = None
        f(jg.tensor([1.0, 2.0, 3.0]) * k)
        assert p.grad is t
        assert t.tolist() == [2.0 * k, 4.0 * k, 6.0 * k]
