"""Smoke test of the benchmarks: every asv benchmark once at tiny sizes, ``compare.py --quick``
and ``asv check``. No timing is asserted. Deselect with ``pytest -m "not bench"``.

A benchmark class may define ``quick_params`` (same shape as asv's ``params``; ``None`` for a
class without parameters) to choose what runs here; otherwise the smallest numeric value of each
parameter and every non-numeric value are used.
"""

import importlib.util
import inspect
import itertools
import json
import numbers
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

ROOT = Path(__file__).resolve().parents[1]
ASV_DIR = ROOT / "asv_benchmarks"
BENCH_DIR = ASV_DIR / "benchmarks"
PREFIXES = ("time_", "timeraw_", "peakmem_", "mem_", "track_")
MODULE_PATHS = sorted(BENCH_DIR.glob("bench_*.py"))


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_asv_quick_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _param_lists(cls):
    if hasattr(cls, "quick_params"):
        params = cls.quick_params
        if params is None:
            return []
        return [list(p) for p in params] if params and isinstance(params[0], list) else [params]
    params = getattr(cls, "params", None)
    if not params:
        return []
    lists = [list(p) for p in params] if isinstance(params[0], list) else [list(params)]
    out = []
    for values in lists:
        nums = [v for v in values if isinstance(v, numbers.Real) and not isinstance(v, bool)]
        out.append([min(nums)] if len(nums) == len(values) else values)
    return out


def _cases():
    for path in MODULE_PATHS:
        try:
            module = _load(path)
        except Exception as exc:  # reported by the test, not as a collection error
            yield pytest.param(exc, [], id=f"{path.stem}.<import>")
            continue
        for cname, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            methods = [m for m in dir(cls) if m.startswith(PREFIXES) and callable(getattr(cls, m))]
            if methods:
                yield pytest.param(cls, methods, id=f"{path.stem}.{cname}")


def _run_timeraw(code) -> None:
    stmt, setup = code if isinstance(code, tuple) else (code, "")
    src = textwrap.dedent(setup) + "\n" + textwrap.dedent(stmt)
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize(("cls", "methods"), list(_cases()))
def test_benchmark_class_runs(cls, methods):
    if isinstance(cls, Exception):
        raise cls
    combos = list(itertools.product(*_param_lists(cls)))
    ran = 0
    for combo in combos:
        inst = cls()
        cache = (inst.setup_cache(),) if hasattr(inst, "setup_cache") else ()
        for name in methods:
            args = (*cache, *combo)
            try:
                if hasattr(inst, "setup"):
                    inst.setup(*args)
            except NotImplementedError:  # asv: this combination is skipped
                break
            try:
                result = getattr(inst, name)(*args)
                if name.startswith("timeraw_"):
                    _run_timeraw(result)
                elif name.startswith("track_"):
                    assert isinstance(result, numbers.Real), (name, result)
                ran += 1
            finally:
                if hasattr(inst, "teardown"):
                    inst.teardown(*args)
    assert ran, f"{cls.__name__}: every parameter combination was skipped"


def test_compare_quick(tmp_path):
    out = tmp_path / "compare.json"
    proc = subprocess.run(
        [sys.executable, str(ASV_DIR / "compare.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["quick"] is True and data["triad"]["gbs_best"] > 0
    rows = data["results"]
    workloads = {r["workload"] for r in rows}
    assert workloads == {"per_op", "seed", "matmul", "attention", "chain", "mlp_step",
                         "optim_step", "cnn_step", "per_sample", "jacobian", "gpt_step",
                         "cold", "compile"}, workloads
    optim = {r["impl"] for r in rows if r["workload"] == "optim_step"}
    assert {"jitgrad", "jitgrad_fused"} <= optim, optim
    compile_rows = {(r["config"], r["impl"]) for r in rows if r["workload"] == "compile"}
    assert {("W2 1e6 f32, cold cache", "jitgrad"),
            ("W2 1e6 f32, warm cache", "jitgrad")} <= compile_rows, compile_rows
    for r in rows:
        assert r["median_s"] > 0, r
        assert not r.get("check_error"), r
    jit = {(r["workload"], r["config"], r["impl"]): r for r in rows
           if r["impl"].startswith("jitgrad")}
    assert jit, "no jitgrad rows"
    for key, r in jit.items():   # correctness of jitgrad against the float64 reference
        if r.get("err") is not None:
            tol = 1e-12 if "float64" in key[1] else 1e-4
            assert r["err"] < tol, (key, r["err"])
    assert "x best" in proc.stdout and "per_op" in proc.stdout


def test_settle_threads_waits_for_a_spinning_thread(monkeypatch):
    """compare.py starts each repeat once no thread of the process is busy: while the
    process's CPU time grows as fast as the wall clock (a spinning thread), it waits; with
    nothing busy the wait is a probe or two; ``max_s`` bounds it. The clocks are simulated:
    a real spinning thread on a loaded 2-core machine is descheduled at random, and the
    test measured 0.078 s for a 0.15 s spin once."""
    sys.path.insert(0, str(ASV_DIR))
    try:
        import compare
    finally:
        sys.path.remove(str(ASV_DIR))
    assert compare.settle_threads(max_s=1.0) < 0.1  # (real clocks: nothing busy here)

    class Clock:
        def __init__(self, busy_until: float) -> None:
            self.wall = self.cpu = 0.0
            self.busy_until = busy_until

        def sleep(self, s: float) -> None:
            if self.wall < self.busy_until:  # a thread spins: CPU time grows with the wall
                self.cpu += s
            self.wall += s

    for busy, max_s, want in ((0.15, 2.0, 0.15), (0.0, 2.0, 0.0), (5.0, 0.05, 0.05)):
        clock = Clock(busy)
        fake = types.SimpleNamespace(sleep=clock.sleep, process_time=lambda c=clock: c.cpu,
                                     perf_counter=lambda c=clock: c.wall)
        monkeypatch.setattr(compare, "time", fake)  # (compare's name only, not the module)
        waited = compare.settle_threads(max_s=max_s, probe_s=0.004)
        assert want <= waited <= want + 0.0081, (busy, max_s, waited)


def test_asv_check():
    pytest.importorskip("asv")
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "asv", "check", "--python=same"],
                          capture_output=True, text=True, cwd=ASV_DIR, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "No problems found" in proc.stdout, proc.stdout[-3000:]
