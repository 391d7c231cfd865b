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


# ------------------------------------------------------------------------- optimizers
def _sgd_setup(momentum=0.0):
    jg.manual_seed(0)
    eager_m, m = nn.Linear(3, 2), nn.Linear(3, 2)
    m.load_state_dict(eager_m.state_dict())
    opts = [jg.optim.SGD(mm.parameters(), lr=0.1, momentum=momentum) for mm in (eager_m, m)]

    def make(model, opt):
        def step(x):
            opt.zero_grad()
            loss = model(x).square().sum()
            loss.backward()
            opt.step()
            return loss
        return step
    return (eager_m, m), opts, make(eager_m, opts[0]), jg.compile(make(m, opts[1]))


def _same(models, eager, compiled, x, calls=2):
    for _ in range(calls):
        np.testing.assert_array_equal(eager(x)._data, compiled(x)._data)
    for pe, pc in zip(*(mm.parameters() for mm in models)):
        np.testing.assert_array_equal(pe._data, pc._data)


def _both(opts, change):
    for o in opts:
        change(o)


@pytest.mark.parametrize("change", [
    lambda o: o.param_groups[0].__setitem__("momentum", 0.5),
    lambda o: o.param_groups[0].update(dampening=0.25, momentum=0.5),
    lambda o: o.param_groups[0]["params"].pop(),           # a parameter no longer updated
    lambda o: o.state.clear(),                             # momentum buffers dropped
    lambda o: setattr(o, "param_groups", [dict(o.param_groups[0], momentum=0.5)]),
    lambda o: o.__dict__.__setitem__("param_groups", [dict(o.param_groups[0], momentum=0.5)]),
    lambda o: o.load_state_dict(dict(o.state_dict(), param_groups=[
        dict(o.state_dict()["param_groups"][0], momentum=0.5)])),
], ids=["setitem", "update", "params_pop", "state_clear", "rebound", "dict_write", "load"])
def test_every_optimizer_change_reaches_the_guard(change):
    models, opts, eager, compiled = _sgd_setup(momentum=0.9)
    x = jg.randn(4, 3)
    _same(models, eager, compiled, x)
    assert guards._OPTIMIZER_STATES.get(opts[1]) is not None  # cached: tracked containers
    _both(opts, change)
    _same(models, eager, compiled, x, calls=3)


def test_cached_optimizer_state_is_reused_until_an_optimizer_changes():
    from jitgrad.nn.mutation import OPTIM_EPOCH

    _models, opts, _eager, compiled = _sgd_setup(momentum=0.9)
    x = jg.randn(4, 3)
    compiled(x)
    compiled(x)
    first = guards.state_of(opts[1])
    assert guards.state_of(opts[1]) is first   # no change: the same tuple, not a new read
    epoch = OPTIM_EPOCH[0]
    compiled(x)                                # a compiled step changes no container
    assert OPTIM_EPOCH[0] == epoch and guards.state_of(opts[1]) is first
    opts[0].param_groups[0]["lr"] = 0.2        # any optimizer's change: read again
    assert guards.state_of(opts[1]) is not first and guards.state_of(opts[1]) == first


def test_optimizer_with_untracked_contents_is_read_every_call():
    models, opts, eager, compiled = _sgd_setup()
    for o in opts:  # a tuple option with a list inside: its contents can change unseen
        o.param_groups[0]["extra"] = ([1],)
    x = jg.randn(4, 3)
    _same(models, eager, compiled, x)
    assert guards._OPTIMIZER_STATES.get(opts[1]) is None
    from jitgrad.jit.function import compiled_function_of

    stats = compiled_function_of(compiled).stats
    retraces = stats["retraces"]
    for o in opts:
        o.param_groups[0]["extra"][0].append(2)   # no epoch change: still a miss
    _same(models, eager, compiled, x)
    assert stats["retraces"] == retraces + 1


def test_a_plan_whose_trace_created_optimizer_state_never_serves_an_empty_state():
    """The first step's trace creates the momentum buffers (a change to what the guards
    read): its plan runs that call only. Cached, it would serve the calls after
    ``opt.state.clear()`` without recreating the buffers -- momentum silently lost."""
    models, opts, eager, compiled = _sgd_setup(momentum=0.9)
    x = jg.randn(4, 3)
    _same(models, eager, compiled, x)
    for o in opts:
        o.state.clear()
    _same(models, eager, compiled, x, calls=4)
    assert all(len(opts[1].state[p]) == 1 for p in models[1].parameters())


def test_pickled_and_copied_optimizers_keep_tracked_containers():
    import copy
    import pickle

    from jitgrad.nn.mutation import OptimDict, OptimList, OptimState

    _models, opts, _eager, compiled = _sgd_setup(momentum=0.9)
    compiled(jg.randn(4, 3))
    compiled(jg.randn(4, 3))
    for o in (pickle.loads(pickle.dumps(opts[1])), copy.deepcopy(opts[1])):
        assert type(o.param_groups) is OptimList and type(o.state) is OptimState
        assert all(type(g) is OptimDict and type(g["params"]) is OptimList
                   for g in o.param_groups)
        assert all(type(v) is OptimDict for v in o.state.values())


def test_a_group_added_by_the_caller_is_kept_as_given_and_still_guarded():
    """``add_param_group(d)`` keeps ``d`` itself (PyTorch's semantics: later changes to it
    are the optimizer's); a plain dict is not tracked, so the guard reads it every call."""
    models, opts, eager, compiled = _sgd_setup(momentum=0.9)
    extra = [jg.zeros(3, requires_grad=True) for _ in opts]
    groups = [{"params": [e], "lr": 0.1} for e in extra]
    for o, g in zip(opts, groups):
        o.add_param_group(g)
        assert o.param_groups[-1] is g
    x = jg.randn(4, 3)
    _same(models, eager, compiled, x)
    assert guards._OPTIMIZER_STATES.get(opts[1]) is None
    for g in groups:
        g["momentum"] = 0.5  # a change the mutation count cannot see
    _same(models, eager, compiled, x)
    assert opts[1].param_groups[-1]["momentum"] == 0.5
