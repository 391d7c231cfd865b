"""State a compiled function reaches in ways a script sets up after ``jitgrad.compile`` runs,
or passes through something other than named parameters, compiled against eager: globals
and closure variables defined after the decorator (a script's ``model``/``opt`` made in
``main()``), arguments through ``*args`` / ``**kwargs`` / ``functools.partial`` / a
decorator's wrapper / a callable object, an optimizer state cleared through an argument,
and a fresh optimizer per fold. Each was a stale plan before (stop 48's probe)."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F


def _scaled(x):
    return x * _LATE_SCALE + _LATE_BIAS  # noqa: F821 - defined by the test, after compile


def test_globals_defined_after_compile_are_guarded():
    f = jg.compile(_scaled)
    g = globals()
    try:
        g["_LATE_SCALE"], g["_LATE_BIAS"] = 2.0, jg.zeros(3)
        x = jg.ones(3)
        assert f(x).tolist() == [2.0] * 3
        g["_LATE_SCALE"] = 10.0
        assert f(x).tolist() == [10.0] * 3
        g["_LATE_BIAS"] = jg.ones(3)
        assert f(x).tolist() == [11.0] * 3
    finally:
        g.pop("_LATE_SCALE", None)
        g.pop("_LATE_BIAS", None)


def _model_and_opt(kind="sgd"):
    jg.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    o = (jg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) if kind == "sgd"
         else jg.optim.Adam(m.parameters(), lr=0.01))
    return m, o


def _body(m, o, x, y):
    o.zero_grad()
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    o.step()
    return loss


def _batches(n=4):
    rng = np.random.default_rng(0)
    return [(jg.tensor(rng.standard_normal((6, 4)).astype(np.float32)),
             jg.tensor(rng.integers(0, 3, 6))) for _ in range(n)]


def _assert_same(m1, m2):
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_closure_model_and_optimizer_made_after_compile():
    """``@compile def step`` inside ``main()`` before ``model`` / ``opt`` exist: the plan
    that makes Adam's state must not replay at every step."""
    def main(kind):
        @jg.compile
        def step(x, y):
            return _body(model, opt, x, y)
        model, opt = _model_and_opt(kind)
        for x, y in _batches():
            step(x, y)
        return model, opt

    for kind in ("sgd", "adam"):
        m, o = main(kind)
        me, oe = _model_and_opt(kind)
        for x, y in _batches():
            _body(me, oe, x, y)
        _assert_same(m, me)
        if kind == "adam":
            assert [s["step"].item() for s in o.state.values()] == [4.0] * 4


def _by_args(*a):
    return _body(*a)


def _by_kwargs(x, y, **kw):
    return _body(kw["m"], kw["o"], x, y)


def _timed(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        return fn(*a, **k)
    return wrapper


@pytest.mark.parametrize("style", ["*args", "**kwargs", "partial", "decorated"])
def test_arguments_through_packed_parameters_partial_and_wrappers(style):
    """The model and optimizer passed through ``*args`` / ``**kwargs``, bound by
    ``functools.partial`` or passed through a decorator's ``*a, **k`` wrapper: SGD with
    momentum compiled equals eager (its first-step plan used to replay)."""
    me, oe = _model_and_opt()
    mc, oc = _model_and_opt()
    if style == "*args":
        fc = jg.compile(_by_args)
        calls = [lambda x, y: _by_args(me, oe, x, y), lambda x, y: fc(mc, oc, x, y)]
    elif style == "**kwargs":
        fc = jg.compile(_by_kwargs)
        calls = [lambda x, y: _by_kwargs(x, y, m=me, o=oe), lambda x, y: fc(x, y, m=mc, o=oc)]
    elif style == "partial":
        fc = jg.compile(functools.partial(_body, mc, oc))
        calls = [functools.partial(_body, me, oe), fc]
    else:
        fc = jg.compile(_timed(_body))
        calls = [lambda x, y: _body(me, oe, x, y), lambda x, y: fc(mc, oc, x, y)]
    for x, y in _batches():
        for c in calls:
            c(x, y)
    _assert_same(me, mc)


def test_a_library_decorated_function_guards_what_it_is_passed():
    """``@jitgrad.no_grad()`` wraps the function in jitgrad's own wrapper: the model passed
    to it is still guarded (``eval()``, a swapped layer)."""
    @jg.no_grad()
    def evaluate(model, x):
        return model(x)

    cf = jg.compile(evaluate)
    jg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    x = jg.ones(2, 4)
    jg.manual_seed(1)
    a = evaluate(model, x)
    jg.manual_seed(1)
    assert jg.equal(cf(model, x), a)
    model.eval()
    assert jg.equal(cf(model, x), evaluate(model, x))
    model[0] = nn.Linear(4, 4)
    assert jg.equal(cf(model, x), evaluate(model, x))


def test_partial_keywords_changed_or_added_later():
    def f(x, scale=2.0, bias=None):
        y = x * scale
        return y if bias is None else y + bias

    p = functools.partial(f, bias=jg.ones(2))
    cp = jg.compile(p)
    x = jg.ones(2)
    assert cp(x).tolist() == [3.0, 3.0]
    p.keywords["bias"] = jg.zeros(2)
    assert cp(x).tolist() == [2.0, 2.0]
    p.keywords["scale"] = 9.0
    assert cp(x).tolist() == [9.0, 9.0]


class _Scaler:
    def __init__(self):
        self.scale = 2.0
        self.net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))

    def __call__(self, x):
        return self.net(x) * self.scale


def test_a_callable_objects_attributes_are_guarded():
    jg.manual_seed(0)
    s = _Scaler()
    cs = jg.compile(s)
    x = jg.ones(2, 3)
    s.net.eval()
    assert jg.equal(cs(x), s(x))
    s.scale = 5.0
    assert jg.equal(cs(x), s(x))
    s.net = nn.Sequential(nn.Linear(3, 3))
    assert jg.equal(cs(x), s(x))


def test_optimizer_state_cleared_through_an_argument():
    """After `opt.state.clear()` the step makes the state again, compiled (not eagerly:
    the state changed in a call long after the first step's change)."""
    me, oe = _model_and_opt("adam")
    mc, oc = _model_and_opt("adam")
    step = jg.compile(_body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "runs eagerly" warning
        for i, (x, y) in enumerate(_batches(8)):
            if i == 4:
                oe.state.clear()
                oc.state.clear()
            _body(me, oe, x, y)
            step(mc, oc, x, y)
            assert len(oc.state) == len(oe.state)
    _assert_same(me, mc)
    assert step.stats["cache_hits"] >= 4


def test_a_fresh_optimizer_per_fold_compiles():
    """k-fold training passes a new optimizer at each fold: its first step changes its
    state, as the first fold's did; the step keeps compiling (it went eager for good)."""
    step = jg.compile(_body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "runs eagerly" warning
        for _fold in range(3):
            mc, oc = _model_and_opt()
            me, oe = _model_and_opt()
            for x, y in _batches(5):
                _body(me, oe, x, y)
                step(mc, oc, x, y)
            _assert_same(me, mc)
    assert step.stats["cache_hits"] >= 6


class _GlobalScaler:
    def __call__(self, x):
        return x * _LATE_FACTOR  # noqa: F821 - defined by the test, after compile


def test_a_callable_objects_globals_are_guarded():
    cs = jg.compile(_GlobalScaler())
    g = globals()
    try:
        g["_LATE_FACTOR"] = 2.0
        assert cs(jg.ones(2)).tolist() == [2.0, 2.0]
        g["_LATE_FACTOR"] = 5.0
        assert cs(jg.ones(2)).tolist() == [5.0, 5.0]
    finally:
        g.pop("_LATE_FACTOR", None)
