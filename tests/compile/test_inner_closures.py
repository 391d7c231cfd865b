"""State a compiled function reaches through the closure of a function it calls
(``compile(lambda x: train(x))``, ``train`` closing over the model and optimizer) is guarded
like its own closure: a momentum buffer created by the first step, or a cell rebound, is a
miss, never a stale result."""

import numpy as np

import jitgrad as jg


def _pair():
    jg.manual_seed(0)
    m = jg.nn.Linear(3, 2).double()
    e = jg.nn.Linear(3, 2).double()
    e.load_state_dict(m.state_dict())
    return m, e


def test_optimizer_state_behind_an_inner_closure():
    m, e = _pair()
    opt = jg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    eo = jg.optim.SGD(e.parameters(), lr=0.1, momentum=0.9)

    def train(x):
        opt.zero_grad()
        m(x).pow(2).sum().backward()
        opt.step()

    step = jg.compile(lambda x: train(x))
    x = jg.randn(4, 3, dtype=jg.float64)
    for _ in range(4):
        step(x)
        eo.zero_grad()
        e(x).pow(2).sum().backward()
        eo.step()
        np.testing.assert_array_equal(m.weight.detach().numpy(), e.weight.detach().numpy())
    assert step.stats["traces"] == 2  # the first step made the momentum buffers


def test_rebound_inner_cell_retraces():
    scale = 2.0

    def inner(x):
        return x * scale

    def rebind(v):
        nonlocal scale
        scale = v

    f = jg.compile(lambda x: inner(x))
    x = jg.ones(3)
    np.testing.assert_array_equal(f(x).numpy(), [2.0, 2.0, 2.0])
    rebind(5.0)
    np.testing.assert_array_equal(f(x).numpy(), [5.0, 5.0, 5.0])
