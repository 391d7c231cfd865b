"""``torch.compiler`` / ``torch._dynamo`` names that scripts call (a compile probe found
them missing): reset, disable, graph_break, is_compiling, config, and the accepted hints."""

from __future__ import annotations

import warnings

import pytest

import jitgrad as jg


def test_reset_forgets_every_trace():
    f = jg.compile(lambda x: x * 2)
    x = jg.ones(2)
    f(x), f(x)
    assert f.stats["traces"] == 1
    jg.compiler.reset()
    assert f(x).tolist() == [2.0, 2.0] and f.stats["traces"] == 2
    jg._dynamo.reset()
    f(x)
    assert f.stats["traces"] == 3


def test_disabled_function_runs_eagerly_inside_a_compiled_one():
    seen = []

    @jg.compiler.disable
    def log(t):
        seen.append(t.sum().item())  # a value and a side effect: must run for real
        return t

    g = jg.compile(lambda x: log(x * 2) + 1)
    x = jg.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert g(x).tolist() == g(x).tolist() == [3.0, 3.0]
    assert seen == [4.0, 4.0]
    strict = jg.compile(lambda x: log(x), fullgraph=True)
    with pytest.raises(Exception, match="jitgrad.compiler.disable"):
        strict(x)
    assert jg._dynamo.disable(reason="io")(lambda t: t + 1)(x).tolist() == [2.0, 2.0]


def test_is_compiling_and_graph_break():
    assert not jg.compiler.is_compiling() and not jg._dynamo.is_compiling()
    h = jg.compile(lambda x: x + (1 if jg.compiler.is_compiling() else 100))
    assert h(jg.ones(2)).tolist() == [2.0, 2.0]  # the plan, traced while compiling
    jg._dynamo.graph_break()  # nothing outside a trace

    def broken(x):
        y = x * 3
        jg._dynamo.graph_break()
        return y + 1
    b = jg.compile(broken)
    with pytest.warns(UserWarning, match="graph_break"):
        assert b(jg.ones(2)).tolist() == [4.0, 4.0]


def test_dynamo_config_and_hints(monkeypatch):
    monkeypatch.setattr(jg.config, "cache_size_limit", jg.config.cache_size_limit)
    monkeypatch.setattr(jg.config, "recompile_limit", jg.config.recompile_limit)
    jg._dynamo.config.cache_size_limit = 16
    jg._dynamo.config.recompile_limit = 4
    assert jg.config.cache_size_limit == 16 and jg.config.recompile_limit == 4
    assert jg._dynamo.config.cache_size_limit == 16
    jg._dynamo.config.suppress_errors = True
    with pytest.raises(AttributeError, match="no setting"):
        jg._dynamo.config.not_a_setting = 1
    t = jg.ones(3)
    jg._dynamo.mark_dynamic(t, 0)
    jg._dynamo.mark_static(t, 0)
    jg.compiler.cudagraph_mark_step_begin()
    f = lambda x: x  # noqa: E731
    assert jg.compiler.allow_in_graph(f) is f
