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


def _cycled(make, compiled: bool, changer):
    """A model's steps with ``changer(opt)(i)`` (a scheduler's step) between them; the
    losses, a weight, and the compiled step's trace count and whether it ran eagerly."""
    jg.manual_seed(0)
    m = jg.nn.Sequential(jg.nn.Linear(6, 16), jg.nn.Tanh(), jg.nn.Linear(16, 3))
    opt = make(m.parameters())
    change = changer(opt)
    x, y = jg.randn(32, 6), jg.randint(0, 3, (32,))

    def step():
        loss = jg.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    fn = jg.compile(step) if compiled else step
    losses = []
    for i in range(12):
        losses.append(fn().item())
        change(i)
    eager = compiled and any(e.eager_reason for es in fn._entries.values() for e in es)
    return np.array(losses), m[0].weight.detach().numpy(), \
        (fn.stats["traces"], eager) if compiled else None


def _one_cycle(opt):
    sched = OPT.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=20)
    return lambda i: sched.step()


@pytest.mark.parametrize("name", ["SGD momentum nesterov", "Adam"])
def test_one_cycle_momentum_is_read_at_every_call(name):
    """OneCycleLR cycles SGD's ``momentum`` / Adam's ``betas[0]`` at every step: a compiled
    step read them as constants and traced again at every call (then ran eagerly past the
    recompile limit: 0.94x eager); once a trace finds one changed, it is read at every call
    like the learning rate."""
    make = {"SGD momentum nesterov": lambda p: OPT.SGD(p, lr=1e-2, momentum=0.9,
                                                       nesterov=True),
            "Adam": lambda p: OPT.AdamW(p, lr=1e-2)}[name]
    want, w_want, _ = _cycled(make, False, _one_cycle)
    got, w_got, (traces, eager) = _cycled(make, True, _one_cycle)
    assert traces <= 3 and not eager  # no state yet, the steady state, the changed option
    if name == "Adam":  # the capturable exception (module docstring)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        np.testing.assert_allclose(w_got, w_want, rtol=2e-6, atol=2e-7)
    else:
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(w_got, w_want)


def test_momentum_turned_off_and_on_traces_the_other_update():
    """Whether SGD has momentum decides what the step computes (a buffer or none): the
    compiled step's guard keeps that, so setting it to 0 and back traces again and gives
    eager's bits each time; values, once seen changing, are read at every call."""
    def change(opt):
        def set_momentum(i):
            group = opt.param_groups[0]
            group["momentum"] = {3: 0.0, 6: 0.5, 8: 0.7}.get(i, group["momentum"])
        return set_momentum
    make = lambda p: OPT.SGD(p, lr=1e-2, momentum=0.9)  # noqa: E731
    want, w_want, _ = _cycled(make, False, change)
    got, w_got, (traces, eager) = _cycled(make, True, change)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(w_got, w_want)
    assert traces <= 5 and not eager  # momentum (2), none, changed (2; then no trace)


def test_constant_betas_stay_baked_into_the_plan():
    """Reading Adam's betas at every call costs 0-d arithmetic in each (a small model's
    compiled step ~8% slower): they are baked in until a trace finds them changed."""
    m = jg.nn.Linear(3, 2)
    opt = OPT.Adam(m.parameters(), lr=0.01)
    x = jg.randn(4, 3)

    def step(x):
        m(x).sum().backward()
        opt.step()
        opt.zero_grad()
    f = jg.compile(step)
    for _ in range(3):
        f(x)
    assert "Adam.lr" in str(f.lower(x)) and "betas" not in str(f.lower(x))
    opt.param_groups[0]["betas"] = (0.8, 0.999)
    for _ in range(3):
        f(x)
    assert "Adam.betas[0]" in str(f.lower(x)) and f.stats["traces"] == 3
