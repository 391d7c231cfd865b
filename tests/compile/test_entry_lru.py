"""Traced entries are bounded: past ``jitgrad.config.cache_size_limit`` the least recently
used entry is evicted (and freed), the eviction is logged under ``JITGRAD_LOGS=recompiles``,
and a call with an evicted signature traces again and computes the same values."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from helpers import python_prints, run_python

import jitgrad as jg


@pytest.fixture(autouse=True)
def _trace_every_shape(monkeypatch):
    """Entries per shape are what is evicted here: each new shape traces at once."""
    monkeypatch.setattr(jg.config, "shape_tiering", False)


@pytest.fixture
def limit3(monkeypatch):
    monkeypatch.setattr(jg.config, "cache_size_limit", 3)


def _signatures(f):
    return sorted(k[1][0][0][0] for k in f._entries)


def test_least_recently_used_entry_is_evicted(limit3):
    f = jg.compile(lambda x: x * 2 + 1)
    for n in (1, 2, 3):
        f(jg.ones(n))
    f(jg.ones(1))  # 1 is now the most recently used: 2 goes first
    f(jg.ones(4))
    assert _signatures(f) == [1, 3, 4] and f.stats["evictions"] == 1
    f(jg.ones(1))
    f(jg.ones(5))
    assert _signatures(f) == [1, 4, 5] and f.stats["evictions"] == 2
    traces = f.stats["traces"]
    np.testing.assert_array_equal(f(jg.ones(2)).numpy(), [3.0, 3.0])  # evicted: traced again
    assert f.stats["traces"] == traces + 1
    assert len(f._lru) == 3 == sum(len(v) for v in f._entries.values())


def test_evicted_entries_are_freed(limit3):
    f = jg.compile(lambda x: jg.tanh(x) * x)
    f(jg.ones(1))
    (first,) = f._entries.values()
    ref = weakref.ref(first[0])
    del first
    for n in range(2, 8):
        f(jg.ones(n))
        f(jg.ones(n))  # a hit: the generated fast path serves it
    gc.collect()
    assert ref() is None
    assert len(f._lru) == 3


def test_the_fast_path_entry_counts_as_most_recent(limit3):
    """Hits through the generated fast path do not reorder the LRU; its entry is kept when
    it is the oldest, and an evicted entry's fast path is never served again."""
    f = jg.compile(lambda x, k=1: x + k)
    f(jg.ones(1))
    f(jg.ones(1))  # a generic hit: entry [1] gets the fast path
    fast = f._fast
    assert fast is not None
    for n in (2, 3):  # keyword calls: the generic path, the fast path stays entry [1]'s
        f(jg.ones(n), k=1)
        f(jg.ones(n), k=1)
    assert f._fast is fast
    f(jg.ones(4), k=1)  # [1] is the oldest by generic use, but the fast path's: [2] goes
    assert _signatures(f) == [1, 3, 4]
    assert f._fast is fast
    f(jg.ones(5), k=1)
    assert _signatures(f) == [1, 4, 5]
    live = [e.fast for es in f._entries.values() for e in es]
    assert f._fast is None or any(f._fast is x for x in live)


def test_eviction_is_logged(limit3, monkeypatch, capsys):
    monkeypatch.setenv("JITGRAD_LOGS", "recompiles")
    f = jg.compile(lambda x: x - 1)
    for n in (1, 2, 3, 4):
        f(jg.ones(n, dtype=jg.float64))
    out = capsys.readouterr().out
    assert "evicted the least recently used entry (float64[1]): cache_size_limit=3" in out


def test_limit_from_the_environment():
    code = ("import jitgrad as jg\n"
            "f = jg.compile(lambda x: x * 3)\n"
            "for n in range(1, 6): f(jg.ones(n))\n"
            "print(jg.config.cache_size_limit, len(f._lru), f.stats['evictions'])\n")
    assert python_prints(code, JITGRAD_CACHE_SIZE_LIMIT="2", JITGRAD_SHAPE_TIERING="0") == \
        ["2", "2", "3"]
    r = run_python("import jitgrad", JITGRAD_CACHE_SIZE_LIMIT="0")
    assert r.returncode != 0 and "JITGRAD_CACHE_SIZE_LIMIT must be a positive integer" in \
        r.stderr


def test_default_limit():
    assert jg.config.DEFAULT_CACHE_SIZE_LIMIT == 128
