"""The reference interpreter (trace/interpreter.py): what JITGRAD_DISABLE_JIT=1 runs and the
oracle of the compiled plans; it frees each value after its last reader."""

from __future__ import annotations

import numpy as np
from helpers import import_example

import jitgrad as jg
from jitgrad.trace.interpreter import graph_ends, interpret, last_uses


class _PeakDict(dict):
    """An environment that records how many values it held at most."""

    peak = 0

    def __setitem__(self, k, v):
        super().__setitem__(k, v)
        self.peak = max(self.peak, len(self))


def _entry(f):
    (entry,) = (e for es in f._entries.values() for e in es)
    return entry


def test_interpreter_frees_values_after_their_last_reader(rng):
    def chain(x):
        for k in range(40):
            x = jg.tanh(x * 1.01 + 0.5) if k % 2 else jg.sigmoid(x) * x
        return x.sum()

    x = jg.tensor(rng.standard_normal(1000), dtype=jg.float32)
    f = jg.compile(chain)
    f(x)
    g = _entry(f).graph
    env = _PeakDict({id(g.inputs[0]): x._data})
    env.update({id(v): v.source for v in g.all_vars() if v.kind == "const"})
    interpret(g, env)
    assert len(g.eqns) > 80 and env.peak <= 4, env.peak  # the input, live values, the result
    np.testing.assert_allclose(env[id(g.outputs[0])], chain(x).numpy(), rtol=1e-5)
    # the schedule: every value but the input and the output is dropped exactly once
    drops = [k for d in last_uses([e.ins for e in g.eqns], graph_ends(g)) for k in d]
    assert len(drops) == len(set(drops)) == len(g.eqns) - 1


def test_disable_jit_runs_a_training_step_on_the_interpreter(monkeypatch, rng):
    """JITGRAD_DISABLE_JIT=1: a compiled MLP training step runs on the reference interpreter
    (no generated kernel) and trains as eager does, within float32 rounding."""
    monkeypatch.setenv("JITGRAD_DISABLE_JIT", "1")
    digits = import_example("train_digits")
    x = jg.tensor(rng.standard_normal((32, 64)), dtype=jg.float32)
    y = jg.tensor(rng.integers(0, 10, 32))
    losses = {}
    for mode in ("eager", "compiled"):
        jg.manual_seed(0)
        model = jg.nn.Sequential(jg.nn.Linear(64, 32), jg.nn.ReLU(), jg.nn.Linear(32, 10))
        opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        step = digits.make_step(model, opt)
        step = jg.compile(step) if mode == "compiled" else step
        losses[mode] = [float(step(x, y)) for _ in range(4)]
        if mode == "compiled":
            assert _entry_sources(step) == ""
    np.testing.assert_allclose(losses["compiled"], losses["eager"], rtol=1e-5)


def _entry_sources(f) -> str:
    return "".join(e.plan.source() for es in f._entries.values() for e in es)
