"""Module trees are re-read by a compiled call's guards only when the module epoch moved
(``nn/mutation.py``): every kind of change to a tree still reaches the guard, including
those the epoch cannot see (a mutable attribute changed in place), so a compiled call never
returns a stale result."""

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
from jitgrad.jit import guards
from jitgrad.nn.mutation import EPOCH


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.scale = 2.0

    def forward(self, x):
        return self.lin(x) * self.scale


def _eager(m, x):
    with jg.no_grad():
        return m(x).numpy()


def _check(m, f, x):
    np.testing.assert_array_equal(f(x).detach().numpy(), _eager(m, x))


@pytest.fixture
def setup():
    jg.manual_seed(0)
    m = Scaled()
    f = jg.compile(lambda x: m(x))
    x = jg.randn(4, 3)
    _check(m, f, x)
    _check(m, f, x)
    return m, f, x


def test_tracked_tree_is_cached_until_a_change():
    m = Scaled()
    a = guards.state_of(m)
    assert guards._TREE_STATES[m][1] is a[1]  # cached
    assert guards.state_of(m)[1] is a[1]      # served from the cache
    before = EPOCH[0]
    m.scale = 3.0
    assert EPOCH[0] > before
    b = guards.state_of(m)
    assert b != a


@pytest.mark.parametrize("change", [
    "number", "eval", "param", "hook", "hook_removed", "modules_dict", "delattr",
    "buffer", "child"])
def test_every_tracked_change_retraces(setup, change):
    m, f, x = setup
    hits = f.stats["cache_hits"]
    if change == "number":
        m.scale = 5.0
    elif change == "eval":
        m.eval()
        m.scale = m.scale  # (a no-op rebinding also counts as a change)
    elif change == "param":
        m.lin.weight = nn.Parameter(jg.ones(2, 3))
    elif change == "hook":
        m.lin.register_forward_hook(lambda mod, a, out: out * 10)
    elif change == "hook_removed":
        h = m.lin.register_forward_hook(lambda mod, a, out: out * 10)
        _check(m, f, x)
        h.remove()
    elif change == "modules_dict":
        m._modules["lin"] = nn.Linear(3, 2)
    elif change == "delattr":
        m.extra = 1.0
        _check(m, f, x)
        del m.extra
        m.scale = 7.0
    elif change == "buffer":
        m.register_buffer("b", jg.ones(2))
        m.forward = lambda x: m.lin(x) * m.scale + m.b  # an instance attribute: untracked
    elif change == "child":
        m.lin = nn.Linear(3, 2)
    _check(m, f, x)
    if change != "hook_removed":  # (removing the hook restores the first entry's state)
        assert f.stats["cache_hits"] == hits  # the change was seen: no cache hit


def test_untracked_attribute_is_read_every_call():
    class WithList(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)
            self.scales = [2.0]

        def forward(self, x):
            return self.lin(x) * self.scales[0]

    m = WithList()
    assert [k for _, k, _ in guards._module_state(m)[1]] == ["scales"]  # compared each call
    f = jg.compile(lambda x: m(x))
    x = jg.randn(4, 3)
    _check(m, f, x)
    _check(m, f, x)
    epoch = EPOCH[0]
    m.scales[0] = 4.0          # no attribute set: the epoch does not move
    assert EPOCH[0] == epoch
    _check(m, f, x)            # still not stale
    m.scales.append(1.0)
    _check(m, f, x)


def test_config_object_attribute_change_is_seen():
    """nanoGPT keeps a mutable config object on the model: the tree is reused from the
    epoch's cache, the config compared at every call."""
    class Cfg:
        def __init__(self):
            self.scale = 2.0

    class WithCfg(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)
            self.cfg = Cfg()

        def forward(self, x):
            return self.lin(x) * self.cfg.scale

    m = WithCfg()
    f = jg.compile(lambda x: m(x))
    x = jg.randn(4, 3)
    _check(m, f, x)
    _check(m, f, x)
    assert guards._TREE_STATES.get(m) is not None
    m.cfg.scale = 3.0
    _check(m, f, x)


def test_sequential_edits_bump(setup):
    seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))
    f = jg.compile(lambda x: seq(x))
    x = jg.randn(4, 3)
    _check(seq, f, x)
    del seq[1]
    _check(seq, f, x)
    ml = nn.ModuleList([nn.Linear(3, 3)])

    def g(x):
        for mod in ml:
            x = mod(x)
        return x
    fg = jg.compile(g)
    np.testing.assert_array_equal(fg(x).detach().numpy(), ml[0](x).detach().numpy())
    ml.insert(0, nn.Linear(3, 3))
    with jg.no_grad():
        want = ml[1](ml[0](x)).numpy()
    np.testing.assert_array_equal(fg(x).detach().numpy(), want)
