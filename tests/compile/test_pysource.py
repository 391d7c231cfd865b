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
