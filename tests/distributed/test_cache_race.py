"""Ranks compiling the same kernels into one empty cache directory at once (every rank of a
job starts cold on a shared home directory): jitgrad's modules and native objects are
written to a temporary name and renamed (``compiler/cache._atomic_write``, ``native.export``),
and Numba's index and data files too (``IndexDataCacheFile._open_for_write``: a uuid-named
temporary file, then ``os.replace``), so no process ever reads a partial file. Checked here
with processes released together, then a later process that must find every entry intact."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

PROGRAM = r'''
import os, sys, time, warnings
go = sys.argv[1]
while not os.path.exists(go):  # released together
    time.sleep(0.0005)
warnings.simplefilter("error")  # a damaged cache entry is a warning: fail on it
import numpy as np
import jitgrad
from jitgrad.compiler import cache

@jitgrad.compile
def f(x, y):
    return (jitgrad.tanh(x) * y + 1.5).sum()

x = jitgrad.tensor(np.linspace(-1, 1, 1000))
y = jitgrad.tensor(np.linspace(0, 2, 1000))
v = f(x, y).item()
z = float((x * y - 0.25).numpy().sum())  # an eager kernel
print("RESULT", repr(v), repr(z), cache.STATS["modules_written"], flush=True)
'''

PROCESSES = 3


def run_together(tmp_path: Path, n: int) -> list[str]:
    env = dict(os.environ, JITGRAD_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_CACHE_DIR", None)
    go = tmp_path / f"go{time.monotonic_ns()}"
    procs = [subprocess.Popen([sys.executable, "-c", PROGRAM, str(go)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(n)]
    time.sleep(0.2)
    go.touch()
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
        outs.append(out)
    return outs


def results(outs: list[str]) -> list[tuple[str, str, int]]:
    found = []
    for out in outs:
        line = next(ln for ln in out.splitlines() if ln.startswith("RESULT"))
        _, v, z, written = line.split()
        found.append((v, z, int(written)))
    return found


def test_processes_compiling_one_kernel_into_an_empty_cache_at_once(tmp_path):
    first = results(run_together(tmp_path, PROCESSES))
    assert len({(v, z) for v, z, _ in first}) == 1  # the same bits everywhere
    assert max(written for _, _, written in first) > 0  # the cache started empty
    left = [p.name for p in (tmp_path / "cache").rglob("*") if ".tmp" in p.name]
    assert left == []  # no temporary file left behind
    (later,) = results(run_together(tmp_path, 1))
    assert later == (first[0][0], first[0][1], 0)  # every module found intact
