"""A NumPy array a compiled function reads is guarded by its contents (NumPy arrays have
no version counter): an in-place change retraces. Where comparing takes long, a warning,
given once per array, names the array and says how to avoid the cost."""

import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.jit import guards

TABLE = np.arange(6, dtype=np.float32)


def scaled(x):
    return x * jitgrad.tensor(TABLE).sum()


def test_contents_guard_retraces_and_warns_once(monkeypatch):
    monkeypatch.setattr(guards, "SLOW_ARRAY_GUARD_S", 0.0)  # every comparison is "slow"
    monkeypatch.setattr(guards, "_WARNED_ARRAYS", {})
    f = jitgrad.compile(scaled)
    x = jitgrad.ones(2)
    with pytest.warns(RuntimeWarning, match=r"NumPy array of shape \[6\] and dtype float32"):
        assert f(x).tolist() == [15.0, 15.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same array: no second warning
        assert f(x).tolist() == [15.0, 15.0]
        TABLE[0] = 10.0
        try:
            assert f(x).tolist() == [25.0, 25.0]  # changed in place: seen
        finally:
            TABLE[0] = 0.0
    assert f.stats["traces"] == 2


def test_fast_comparisons_do_not_warn():
    f = jitgrad.compile(scaled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(jitgrad.ones(2))
        f(jitgrad.ones(2))
