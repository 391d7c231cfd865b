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


def test_a_cell_read_only_inside_a_comprehension_is_guarded():
    """``inner`` reads ``scale`` only in its list comprehension (a function of its own,
    made afresh by each call): rebinding the cell is a miss, in an inner function and in
    the compiled function itself."""
    scale = 2.0

    def inner(xs):
        return [x * scale for x in xs]

    def rebind(v):
        nonlocal scale
        scale = v

    f = jg.compile(lambda a, b: inner([a, b])[1])
    g = jg.compile(lambda a, b: [x * scale for x in (a, b)][0])
    x = jg.ones(3)
    assert f(x, x).tolist() == [2.0] * 3 and g(x, x).tolist() == [2.0] * 3
    rebind(5.0)
    assert f(x, x).tolist() == [5.0] * 3 and g(x, x).tolist() == [5.0] * 3


def test_a_function_called_through_a_local_variable_is_guarded():
    """``fn = table[name]; fn(x)``: the chain ``fn`` is read before it is bound, so the
    called function is found among the caller's local variables; rebinding its default
    retraces."""
    def double(x, k=2.0):
        return x * k

    table = {"double": double}

    def run(name, x):
        fn = table[name]
        return fn(x)

    f = jg.compile(lambda x: run("double", x))
    x = jg.arange(3.0)
    assert f(x).tolist() == [0.0, 2.0, 4.0]
    double.__defaults__ = (3.0,)
    assert f(x).tolist() == [0.0, 3.0, 6.0]


def test_tracing_does_not_scan_the_heap(monkeypatch):
    """Finding the function behind an inner frame (for its cells and defaults) never falls
    back to ``gc.get_referrers`` for the usual shapes -- a function read by the caller, held
    in its local variable, a module's ``forward``, a comprehension: that scan takes time in
    proportion to the process's heap (seconds per trace in a large process)."""
    import gc

    calls = []
    real = gc.get_referrers
    monkeypatch.setattr(gc, "get_referrers", lambda *a: calls.append(a) or real(*a))
    scale = 2.0

    def double(x, k=2.0):
        return x * k

    table = {"double": double}

    def run(name, x):
        fn = table[name]
        return sum(fn(v) * scale for v in [x, x])

    class Net(jg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = jg.nn.Linear(3, 3)

        def forward(self, x, k=1.0):
            return run("double", self.lin(x)) * k

    net = Net()
    f = jg.compile(lambda x: net(x).sum())
    f(jg.ones(2, 3))
    assert calls == []
