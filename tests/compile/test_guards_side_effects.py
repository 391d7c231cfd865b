"""Compiled functions never return a stale result: state read through objects, containers,
globals and modules is guarded; Python side effects, hooks and untraceable calls run at every
call as in eager mode (a graph break), or raise under fallback="error"."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
from jitgrad.trace.tracer import GraphBreak


def T(*v):
    return jg.tensor(np.array(v, dtype=np.float32))


def vals(t):
    return t.detach().numpy().tolist()


@pytest.fixture(autouse=True)
def _quiet_graph_break_warnings():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="jitgrad.compile: running")
        yield


class Holder:
    pass


# ------------------------------------------------------------------ state read by the trace
def test_attribute_of_a_captured_object_is_guarded():
    h = Holder()
    h.w = T(2.0, 2.0)
    f = jg.compile(lambda x: x * h.w)
    x = T(1.0, 2.0)
    assert vals(f(x)) == [2, 4]
    h.w = T(3.0, 3.0)
    assert vals(f(x)) == [3, 6]
    assert vals(f(x)) == [3, 6] and f.stats["traces"] == 2


def test_list_and_dict_entries_are_guarded():
    scale, d = [1.0], {"s": 1.0}
    f = jg.compile(lambda x: x * scale[0] * d["s"])
    x = T(1.0, 2.0)
    f(x)
    scale[0] = 2.0
    assert vals(f(x)) == [2, 4]
    d["s"] = 3.0
    assert vals(f(x)) == [6, 12]


MODE = "a"
OPTIONAL = None
NP_SCALE = np.float32(2.0)


def _by_mode(x):
    y = x * 2 if MODE == "a" else x * 3
    y = y if OPTIONAL is None else y * 5
    return y * NP_SCALE


def test_string_none_and_numpy_scalar_globals_are_guarded():
    global MODE, OPTIONAL, NP_SCALE
    f = jg.compile(_by_mode)
    x = T(1.0, 2.0)
    try:
        assert vals(f(x)) == [4, 8]
        MODE = "b"
        assert vals(f(x)) == [6, 12]
        OPTIONAL = 1
        assert vals(f(x)) == [30, 60]
        NP_SCALE = np.float32(1.0)
        assert vals(f(x)) == [15, 30]
    finally:
        MODE, OPTIONAL, NP_SCALE = "a", None, np.float32(2.0)


def _helper_reading_global(x):
    return x * 2 if MODE == "a" else x * 7


def test_globals_read_by_a_called_helper_are_guarded():
    global MODE
    f = jg.compile(lambda x: _helper_reading_global(x) + 1)
    x = T(1.0)
    try:
        assert vals(f(x)) == [3]
        MODE = "c"
        assert vals(f(x)) == [8]
    finally:
        MODE = "a"


class Configured(nn.Module):
    def __init__(self):
        super().__init__()
        self.mode = "double"
        self.t = T(1.0, 1.0)
        self.cfg = {"k": 1.0}

    def forward(self, x):
        y = x * self.t * self.cfg["k"]
        return y * 2 if self.mode == "double" else y


@pytest.mark.parametrize("change, expected", [
    (lambda m: setattr(m, "mode", "single"), [1, 2]),
    (lambda m: setattr(m, "t", T(3.0, 3.0)), [6, 12]),
    (lambda m: m.cfg.__setitem__("k", 2.0), [4, 8]),
])
def test_plain_attributes_of_a_compiled_module_are_guarded(change, expected):
    m = Configured()
    f = jg.compile(m)
    x = T(1.0, 2.0)
    assert vals(f(x)) == [2, 4]
    change(m)
    assert vals(f(x)) == expected


def test_a_module_passed_as_an_argument_is_guarded():
    drop = nn.Sequential(nn.Dropout(0.5))
    f = jg.compile(lambda mod, x: mod(x))
    x = jg.ones(1000)
    assert f(drop, x).sum().item() != 1000.0
    drop.eval()
    assert f(drop, x).sum().item() == 1000.0


def test_a_numpy_argument_converted_inside_is_an_input_not_a_constant():
    f = jg.compile(lambda x, a: x * jg.tensor(a))
    x = T(1.0, 2.0)
    for k in range(1, 4):
        assert vals(f(x, np.full(2, k, np.float32))) == [k, 2 * k]
    assert f.stats["traces"] == 1  # a new array is new data, not a new trace


def test_unrelated_mutations_do_not_retrace():
    h = Holder()
    h.w, h.step = T(2.0), 0
    f = jg.compile(lambda x: x * h.w)
    x = T(1.0)
    for i in range(5):
        h.step = i  # the function never reads h.step... but h is snapshotted shallowly
        f(x)
    assert f.stats["traces"] == 1


# --------------------------------------------------------- side effects, hooks, untraceable
def test_python_random_runs_at_every_call():
    random.seed(0)
    f = jg.compile(lambda x: x * random.randint(1, 10**6))
    x = T(1.0)
    assert len({vals(f(x))[0] for _ in range(5)}) > 1


def test_numpy_global_random_and_time_break_the_graph():
    import time

    f = jg.compile(lambda x: x * float(np.random.rand()))
    g = jg.compile(lambda x: x * (time.perf_counter() > 0))
    x = T(1.0)
    assert len({vals(f(x))[0] for _ in range(4)}) > 1
    assert vals(g(x)) == [1.0]
    for fn, name in ((f, "rand"), (g, "perf_counter")):
        e = fn._entries[next(iter(fn._entries))][0]
        assert name in e.eager_reason


def test_untraceable_call_raises_with_fallback_error():
    f = jg.compile(lambda x: x * random.random(), fallback="error")
    with pytest.raises(GraphBreak, match="random"):
        f(T(1.0))


def test_forward_hooks_fire_at_every_call_and_late_hooks_are_seen():
    calls = []
    lin = nn.Linear(2, 2)
    f = jg.compile(lin)
    x = T(1.0, 2.0)
    y0 = vals(f(x))
    h = lin.register_forward_hook(lambda mod, i, o: (calls.append(1), o * 0)[1])
    for _ in range(3):
        assert vals(f(x)) == [0.0, 0.0]
    assert len(calls) == 3
    h.remove()
    assert vals(f(x)) == y0
    assert vals(f(x)) == y0 and len(calls) == 3


def test_side_effects_on_outside_state_run_at_every_call():
    hist = []
    counter = Holder()
    counter.n = 0

    def step(x):
        loss = (x * 2).sum()
        hist.append(loss)
        counter.n += 1
        return loss

    f = jg.compile(step)
    x = T(1.0, 2.0)
    for _ in range(3):
        assert f(x).item() == 6.0
    assert len(hist) == 3 and counter.n == 3
    assert all(h.item() == 6.0 for h in hist)


def test_side_effect_raises_with_fallback_error_and_leaves_state():
    hist = []

    def step(x):
        hist.append(1)
        return x * 2

    f = jg.compile(step, fallback="error")
    with pytest.raises(GraphBreak, match="append"):
        f(T(1.0))
    assert hist == []  # the break comes before the function ran a line


def test_local_containers_and_new_objects_are_not_side_effects():
    class Box:
        def __init__(self, v):
            self.v = v

    def fn(x):
        acc, d = [], {}
        acc.append(x * 2)
        d["y"] = acc[0] + 1
        return Box(d["y"]).v

    f = jg.compile(fn, fallback="error")
    assert vals(f(T(1.0))) == [3.0]
    assert vals(f(T(2.0))) == [5.0] and f.stats["traces"] == 1


def test_retain_grad_inside_a_compiled_function():
    x = jg.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)

    def fn(x):
        y = x * 2
        y.retain_grad()
        (y * y).sum().backward()
        return y

    f = jg.compile(fn)
    for _ in range(2):
        x.grad = None
        y = f(x)
        assert vals(y.grad) == [4.0, 8.0]


def test_tensor_hook_registered_inside_fires_every_call():
    seen = []
    x = jg.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)

    def fn(x):
        y = x * 3
        y.register_hook(lambda g: seen.append(vals(g)))
        return y.sum()

    f = jg.compile(fn)
    for _ in range(3):
        f(x).backward()
    assert seen == [[1.0, 1.0]] * 3


def test_guards_cost_nothing_for_functions_that_read_no_outside_state():
    f = jg.compile(lambda x: (x.log() * x).sum())
    x = T(1.0, 2.0)
    f(x)
    f(x)
    e = f._entries[next(iter(f._entries))][0]
    assert not e.access  # jg.log-style chains through Python modules are not guarded


def test_a_compiled_bound_method_guards_its_module():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.5)
            self.scale = 2.0

        def forward(self, x):
            return self.drop(x) * self.scale

    m = Net()
    f = jg.compile(m.forward)
    x = jg.ones(1000)
    assert f(x).sum().item() != 2000.0
    m.eval()
    assert f(x).sum().item() == 2000.0
    m.scale = 3.0
    assert f(x).sum().item() == 3000.0


class DynamicNet(nn.Module):
    """pytorch/tutorials' dynamic_net: a random number of terms per forward."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.e = (nn.Parameter(jg.tensor(v)) for v in (0.1, 0.2, 0.01))

    def forward(self, x):
        y = self.a + self.b * x
        for exp in range(2, random.randint(2, 5)):
            y = y + self.e * x ** exp
        return y


def test_dynamic_net_trains_as_in_eager_mode():
    def train(compiled: bool):
        jg.manual_seed(0)
        random.seed(3)
        model = DynamicNet()
        fwd = jg.compile(model) if compiled else model
        opt = jg.optim.SGD(model.parameters(), lr=1e-3)
        x = jg.linspace(-1.0, 1.0, 50)
        y = jg.sin(x)
        losses = []
        for _ in range(8):
            loss = ((fwd(x) - y) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().numpy().copy() for p in model.parameters()]

    (le, pe), (lc, pc) = train(False), train(True)
    np.testing.assert_allclose(lc, le, rtol=1e-6)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def _draws_in_a_helper(x):
    return x * random.random()


def test_random_in_a_called_helper_breaks_the_graph():
    f = jg.compile(lambda x: _draws_in_a_helper(x) + 1)
    x = T(1.0)
    assert len({vals(f(x))[0] for _ in range(4)}) > 1


def test_module_functions_named_like_mutating_methods_compile():
    """``jitgrad.add(...)`` (``torch.add`` in ported code) is a function of a module, not a
    container's ``add``: it is traced, not a graph break."""
    def f(x, y):
        return jg.add(x, y, alpha=2.0).sum()
    c = jg.compile(f, fullgraph=True)
    x, y = T([1.0, 2.0]), T([3.0, 4.0])
    assert c(x, y).item() == f(x, y).item() == 17.0
    assert c.eager_reason(x, y) is None
