"""The one builder of generated Python (compiler/pysource.py): unique names, linecache
registration (tracebacks show the generated line), the JITGRAD_LOGS=code dump; every call
path, plan and kernel caller goes through it."""

from __future__ import annotations

import gc
import linecache
import traceback

import numpy as np

import jitgrad as jg
from jitgrad.compiler.pysource import build_function


def test_unique_names_and_linecache():
    f = build_function("probe", ["x"], ["y = x + 1", "return y"])
    g = build_function("probe", ["x"], ["return x"])
    assert f.__name__ != g.__name__ and f.__name__.startswith("probe_")
    filename = f.__code__.co_filename
    assert filename == f"<jitgrad:{f.__name__}>"
    assert linecache.getline(filename, 2).strip() == "y = x + 1"
    assert f(1) == 2 and g(5) == 5


def test_a_traceback_shows_the_generated_line():
    f = build_function("failing", ["x"], ["y = x * 2", "return y / 0"], {})
    try:
        f(1)
    except ZeroDivisionError:
        text = traceback.format_exc()
    assert f"<jitgrad:{f.__name__}>" in text and "return y / 0" in text


def test_the_linecache_entry_goes_with_the_function():
    f = build_function("transient", [], ["return 1"])
    filename = f.__code__.co_filename
    assert filename in linecache.cache
    del f
    gc.collect()
    assert filename not in linecache.cache


def test_logs_code_dumps_call_paths_plans_and_kernels(monkeypatch, capsys):
    monkeypatch.setenv("JITGRAD_LOGS", "code")
    f = jg.compile(lambda x: (jg.tanh(x) * 3.0).sum())
    x = jg.tensor(np.linspace(-1, 1, 7), dtype=jg.float32)
    f(x)
    f(x)  # the cache-hit path is generated at the first hit
    out = capsys.readouterr().out
    for what in ("<jitgrad:group_", "<jitgrad:plan_run_", "<jitgrad:call_run_",
                 "<jitgrad:call_fast_", "def kernel("):
        assert what in out, what


# ---------------------------------------------------------------- bytecode compiled once
from jitgrad.compiler import pysource  # noqa: E402

ID_A, ID_B = 140593899298384, 140593899298999  # (the id() keys plans write)


def _pair(body_of):
    """Two functions whose bodies differ only in the big literals (ids swapped)."""
    return (build_function("pair", ["env"], body_of(ID_A, ID_B)),
            build_function("pair", ["env"], body_of(ID_B, ID_A)))


def test_bodies_differing_only_in_ids_share_bytecode_and_keep_their_values():
    pysource._CODE.clear()
    f, g = _pair(lambda a, b: [f"x = env[{a}]", f"y = [env[{b}] for _ in range(2)]",
                               f"t = ({a}, 3)", f"return x, y, t, {b} in {{{a}, {b}}}"])
    env = {ID_A: "a", ID_B: "b"}
    assert f(env) == ("a", ["b", "b"], (ID_A, 3), True)
    assert g(env) == ("b", ["a", "a"], (ID_B, 3), True)
    assert len(pysource._CODE) == 1  # one compile for both
    assert f.__code__.co_code == g.__code__.co_code
    # each function still names its own source (comprehension included)
    nested = [c for c in g.__code__.co_consts if hasattr(c, "co_filename")]
    assert nested and all(c.co_filename == g.__code__.co_filename for c in nested)


def test_sizes_and_negated_literals_are_put_back():
    f, g = _pair(lambda a, b: [f"return -{a}, {a} // 7, env.get({b})"])
    assert f({ID_B: 1}) == (-ID_A, ID_A // 7, 1)
    assert g({ID_A: 2}) == (-ID_B, ID_B // 7, 2)
    s1 = build_function("sizes", [], ["return list(range(12))[3:10], [0] * 16"])
    s2 = build_function("sizes", [], ["return list(range(13))[4:11], [0] * 17"])
    assert s1() == (list(range(12))[3:10], [0] * 16)
    assert s2() == (list(range(13))[4:11], [0] * 17)


def test_literals_the_compiler_folds_or_strings_holding_digits_compile_as_written():
    before = len(pysource._CODE)
    f = build_function("folded", ["env"], [f"return env[{ID_A} + 1], {ID_A} * 2"])
    assert f({ID_A + 1: "next"}) == ("next", ID_A * 2)
    s = build_function("text", [], [f"return 'id {ID_A}', {ID_B}"])
    assert s() == (f"id {ID_A}", ID_B)
    e = build_function("floats", [], ["return 1e-15, 2.5e10, 0.123456789"])
    assert e() == (1e-15, 2.5e10, 0.123456789)
    assert len(pysource._CODE) - before <= 1  # (only the float one is cacheable)


def test_a_retrace_for_a_new_shape_compiles_no_new_python():
    import warnings

    f = jg.compile(lambda x, w: (jg.tanh(x @ w) * 2.0).sum(1).mean())
    w = jg.tensor(np.ones((8, 4)), dtype=jg.float32, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (11, 13, 17):
            f(jg.ones(n, 8), w).backward()
        compiled = len(pysource._CODE)
        for n in (19, 23, 29, 31):  # (other ids and sizes, the same generated code)
            x = jg.tensor(np.linspace(-1, 1, n * 8).reshape(n, 8), dtype=jg.float32)
            out = f(x, w)
            out.backward()
            ref = (jg.tanh(x @ w.detach()) * 2.0).sum(1).mean()
            assert out.item() == ref.item()
    assert len(pysource._CODE) == compiled
