"""A compiled optimizer step gives eager's bits for every optimizer whose eager update does
not round its bias corrections as Python floats (those -- Adam, AdamW, Adamax, NAdam --
take PyTorch's capturable formulas when traced: an ulp or so per step,
docs/architecture.md)."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg

OPT = jg.optim
EXACT = {
    "SGD": lambda p: OPT.SGD(p, lr=1e-2),
    "SGD momentum nesterov": lambda p: OPT.SGD(p, lr=1e-2, momentum=0.9, nesterov=True,
                                              weight_decay=1e-3),
    "RMSprop": lambda p: OPT.RMSprop(p, lr=1e-2),
    "RMSprop centered momentum": lambda p: OPT.RMSprop(p, lr=1e-2, momentum=0.5, centered=True),
    "Adagrad": lambda p: OPT.Adagrad(p, lr=1e-2, lr_decay=1e-3),
    "Adadelta": lambda p: OPT.Adadelta(p, lr=0.5),
    "Rprop": lambda p: OPT.Rprop(p, lr=1e-2),
    "ASGD": lambda p: OPT.ASGD(p, lr=1e-2),
    "RAdam": lambda p: OPT.RAdam(p, lr=1e-2),
}
CAPTURABLE = {
    "Adam": lambda p: OPT.Adam(p, lr=1e-2),
    "AdamW": lambda p: OPT.AdamW(p, lr=1e-2),
    "Adamax": lambda p: OPT.Adamax(p, lr=1e-2),
    "NAdam": lambda p: OPT.NAdam(p, lr=1e-2),
}


def _both(make, steps: int = 5):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(2000).astype(np.float32)
    g0 = rng.standard_normal(2000).astype(np.float32)
    pe, pc = jg.nn.Parameter(jg.tensor(w0)), jg.nn.Parameter(jg.tensor(w0))
    oe, oc = make([pe]), make([pc])

    def step(g):
        pc.grad = g.clone()
        oc.step()
    compiled = jg.compile(step)
    for i in range(steps):
        g = jg.tensor(g0 * np.float32(np.cos(i + 1)))
        pe.grad = g.clone()
        oe.step()
        compiled(g)
    return pe.detach().numpy(), pc.detach().numpy(), compiled.stats["traces"]


@pytest.mark.parametrize("name", sorted(EXACT))
def test_compiled_step_is_eagers_bits(name):
    eager, compiled, traces = _both(EXACT[name])
    np.testing.assert_array_equal(compiled, eager)
    assert traces <= 2  # the first step (no state yet), then the steady state


@pytest.mark.parametrize("name", sorted(CAPTURABLE))
def test_capturable_updates_within_ulps(name):
    eager, compiled, _ = _both(CAPTURABLE[name])
    np.testing.assert_allclose(compiled, eager, rtol=2e-6, atol=2e-7)


@pytest.mark.parametrize("name", ["SGD momentum nesterov", "RMSprop", "Adam"])
def test_a_tensor_learning_rate_is_read_at_every_call(name):
    """``lr=jitgrad.tensor(0.01)`` (PyTorch's way to vary the rate under compile without
    recompiling) made the step run eagerly; it is read at every call like a float rate,
    changed in place or replaced."""
    make = {**EXACT, **CAPTURABLE}[name]
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal(64).astype(np.float32)
    g0 = rng.standard_normal(64).astype(np.float32)
    results = []
    for compiled in (False, True):
        p = jg.nn.Parameter(jg.tensor(w0))
        opt = make([p])
        opt.param_groups[0]["lr"] = jg.tensor(0.01, dtype=jg.float64)

        def step(g, p=p, opt=opt):
            p.grad = g.clone()
            opt.step()
        fn = jg.compile(step) if compiled else step
        for i in range(6):
            fn(jg.tensor(g0 * np.float32(np.cos(i + 1))))
            if i == 2:
                opt.param_groups[0]["lr"].fill_(0.003)
            if i == 4:
                opt.param_groups[0]["lr"] = jg.tensor(0.02, dtype=jg.float64)
        results.append(p.detach().numpy().copy())
        if compiled:
            assert not any(e.eager_reason for es in fn._entries.values() for e in es)
            assert fn.stats["traces"] <= 2
    if name in EXACT:
        np.testing.assert_array_equal(results[1], results[0])
    else:
        np.testing.assert_allclose(results[1], results[0], rtol=2e-6, atol=2e-7)
