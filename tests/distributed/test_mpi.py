"""Multi-rank checks: tests/distributed/mpi_worker.py run under ``mpiexec -n 2`` (skipped
without mpi4py or mpiexec), bounded by a timeout (MPIEXEC_TIMEOUT and the subprocess's)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 60
RANKS = 2


def mpiexec() -> str:
    """The mpiexec next to this Python (the mpich wheel's), else the one on PATH."""
    local = Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.skip("mpiexec not found (pip install mpich)")
    return found


def run_ranks(*checks: str) -> str:
    """Run mpi_worker.py's ``checks`` on two ranks; fail with their output unless every rank
    reports every check."""
    env = dict(os.environ, MPIEXEC_TIMEOUT=str(TIMEOUT_S))
    cmd = [mpiexec(), "-n", str(RANKS), sys.executable, "-m", "mpi4py",
           str(HERE / "mpi_worker.py"), *checks]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S + 15, env=env,
                       cwd=HERE)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    for check in checks:
        for rank in range(RANKS):
            assert f"OK {check} {rank}" in r.stdout, out
    return out


def test_collectives_against_numpy():
    run_ranks("collectives")


def test_sampler_covers_every_index_once_per_epoch():
    run_ranks("sampler")


def test_ddp_two_ranks_equal_one_process_on_the_whole_batch():
    run_ranks("ddp")
