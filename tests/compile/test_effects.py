"""Effect equations (``trace.effects.run_effect``, ``ir.is_effect``): what a collective of
``jitgrad.distributed`` becomes inside a compiled function. The plan runs them at every call,
in the traced order, never dropped (even unread), merged (even identical) or fused."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.compiler.passes import optimize
from jitgrad.trace.effects import run_effect
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
