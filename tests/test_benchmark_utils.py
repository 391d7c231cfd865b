"""jitgrad.utils.benchmark (torch.utils.benchmark): Timer, Measurement statistics, Compare."""

from __future__ import annotations

import re

import numpy as np
import pytest

import jitgrad
from jitgrad.utils import benchmark
from jitgrad.utils.benchmark import Compare, Measurement, TaskSpec, Timer


def _spec(**kw) -> TaskSpec:
    return TaskSpec(stmt=kw.pop("stmt", "x.sum()"), setup="pass", **kw)


def test_timer_runs_the_statement_with_globals_setup_and_torch():
    calls = []
    t = Timer("calls.append(torch.ones(2).sum().item() + k)", setup="k = 1",
              globals={"calls": calls})
    m = t.timeit(10)
    assert calls[-1] == 3.0 and len(calls) == 10 + 2  # (a warm-up of max(10 // 100, 2))
    assert m.number_per_run == 10 and len(m.raw_times) == 1
    assert m.times == [m.raw_times[0] / 10] and m.median == m.mean == m.times[0]
    assert m.stmt == "calls.append(torch.ones(2).sum().item() + k)" and m.num_threads == 1


def test_thread_count_is_set_while_timing_and_restored():
    seen = []
    before = jitgrad.get_num_threads()
    Timer("seen.append(torch.get_num_threads())", globals={"seen": seen},
          num_threads=1).timeit(3)
    assert set(seen) == {1} and jitgrad.get_num_threads() == before


def test_blocked_and_adaptive_autorange():
    x = jitgrad.ones(100)
    blocks = []
    m = Timer("x.sum()", globals={"x": x}).blocked_autorange(
        callback=lambda n, s: blocks.append((n, s)), min_run_time=0.02)
    assert len(m.raw_times) == len(blocks) >= 1 and sum(m.raw_times) >= 0.02
    assert all(n == m.number_per_run for n, _ in blocks) and m.number_per_run >= 10
    a = Timer("x.sum()", globals={"x": x}).adaptive_autorange(threshold=0.5, max_run_time=1)
    assert len(a.raw_times) > 3 or sum(a.raw_times) > 1
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        Timer().autorange()


def test_measurement_statistics_match_numpy():
    times = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 2.5, 3.5]
    m = Measurement(2, [t * 2 for t in times], _spec())
    assert m.median == pytest.approx(np.quantile(times, 0.5))
    assert m.iqr == pytest.approx(np.quantile(times, 0.75) - np.quantile(times, 0.25))
    assert m.mean == pytest.approx(np.mean(times))
    assert m.has_warnings and "WARNING: Interquartile range is" in repr(m)
    steady = Measurement(1, [1e-3 * (1 + 1e-6 * i) for i in range(40)], _spec())
    assert not steady.has_warnings and steady.significant_figures == 4
    text = repr(steady)
    assert "Median: 1.00 ms" in text and "IQR:" in text
    assert "40 measurements, 1 runs per measurement, 1 thread" in text
    merged = Measurement.merge([m, Measurement(1, [7.0], _spec())])
    assert len(merged) == 1 and merged[0].number_per_run == 1 and len(merged[0].times) == 9


def test_titles_and_units():
    assert _spec(label="L", sub_label="S").title == "L: S"
    assert _spec().title == "x.sum()"
    assert TaskSpec("a = 1\nb = 2", "pass").title == "stmt:\n  a = 1\n  b = 2"
    assert benchmark.select_unit(3e-6) == ("us", 1e-6)
    assert benchmark.select_unit(0.5) == ("ms", 1e-3)
    assert benchmark.select_unit(2e-8) == ("ns", 1e-9)
    assert benchmark.trim_sigfig(1234.5, 2) == pytest.approx(1200)


def test_compare_table():
    def m(desc, sub, median, threads=1):
        return Measurement(1, [median] * 4, TaskSpec("s", "pass", label="add", sub_label=sub,
                                                     description=desc, num_threads=threads))
    results = [m("jitgrad", "n=10", 2e-6), m("numpy", "n=10", 1e-6),
               m("jitgrad", "n=1000", 4e-6), m("numpy", "n=1000", 8e-6),
               m("jitgrad", "n=10", 3e-6, threads=4)]
    c = Compare(results)
    text = str(c)
    lines = text.splitlines()
    assert lines[0].startswith("[") and " add " in lines[0]
    assert lines[1].split("|")[1].strip() == "jitgrad" and lines[1].split("|")[2].strip() == \
        "numpy"
    assert lines[2].startswith("1 threads: ---")
    assert [c.strip() for c in lines[3].split("|")] == ["n=10", "2.0", "1.0"]
    assert [c.strip() for c in lines[4].split("|")] == ["n=1000", "4.0", "8.0"]
    assert lines[5].startswith("4 threads: ---")
    assert [c.strip() for c in lines[6].split("|")] == ["n=10", "3.0", ""]
    assert "Times are in microseconds (us)." in text
    c.colorize()
    plain = re.sub(r"\033\[[0-9;]*m", "", str(c))
    assert plain.splitlines()[3] == lines[3]  # colours do not move the columns
    assert "\033[92m" in str(c)
    with pytest.raises(ValueError, match="Measurement"):
        Compare([1.0])


def test_torch_namespace_and_pytorch_agreement():
    assert jitgrad.utils.benchmark is benchmark
    tb = pytest.importorskip("torch.utils.benchmark")
    spec = dict(stmt="s", setup="pass", label="L", sub_label="S", description="D")
    times = [1e-6, 2e-6, 1.5e-6, 1.2e-6, 1.1e-6]
    ours = Measurement(3, times, TaskSpec(**spec))
    theirs = tb.Measurement(3, times, tb.utils.common.TaskSpec(**spec))
    for attr in ("median", "mean", "iqr", "significant_figures", "has_warnings", "title"):
        assert getattr(ours, attr) == pytest.approx(getattr(theirs, attr)), attr
    assert repr(ours).splitlines()[1:] == repr(theirs).splitlines()[1:]
