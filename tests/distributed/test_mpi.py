"""Multi-rank checks: tests/distributed/mpi_worker.py run under ``mpiexec -n 2`` (skipped
without mpi4py or mpiexec), bounded by a timeout (MPIEXEC_TIMEOUT and the subprocess's)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
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


def launch(*checks: str) -> subprocess.CompletedProcess:
    """mpi_worker.py's ``checks`` on two ranks under mpiexec (and ``python -m mpi4py``)."""
    env = dict(os.environ, MPIEXEC_TIMEOUT=str(TIMEOUT_S))
    cmd = [mpiexec(), "-n", str(RANKS), sys.executable, "-m", "mpi4py",
           str(HERE / "mpi_worker.py"), *checks]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S + 15,
                          env=env, cwd=HERE)


def run_ranks(*checks: str) -> str:
    """Run ``checks`` on two ranks; fail with their output unless every rank reports every
    check."""
    r = launch(*checks)
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


def test_ddp_gradients_are_bucket_views_and_allreduces_overlap_the_backward():
    run_ranks("ddp_views")


def test_compiled_ddp_step_two_ranks_equal_one_process_on_the_whole_batch():
    run_ranks("ddp_compiled")


def test_compiled_ddp_step_broadcasts_rank_0s_buffers_before_each_forward():
    run_ranks("ddp_compiled_buffers")


def test_a_skipped_collective_times_out_on_every_rank_naming_it():
    start = time.monotonic()
    out = run_ranks("ddp_timeout")
    assert time.monotonic() - start < 40
    assert re.search(r"TIMEOUT 0: \[Rank 0\] collective operation timeout: ALLREDUCE of "
                     r"DistributedDataParallel bucket 0 of 4 \(1 gradient, 3 elements, "
                     r"float64\) \(SeqNum=\d+\) ran for 2\d\d\d milliseconds", out), out
    assert re.search(r"TIMEOUT 1: \[Rank 1\] collective operation timeout: BARRIER", out), out


def test_the_ddp_example_trains_on_two_ranks():
    pytest.importorskip("sklearn")
    env = dict(os.environ, MPIEXEC_TIMEOUT=str(TIMEOUT_S))
    example = HERE.parent.parent / "examples" / "train_digits_ddp.py"
    cmd = [mpiexec(), "-n", str(RANKS), sys.executable, "-m", "mpi4py", str(example),
           "--epochs", "2", "--train-size", "256", "--batch-size", "32"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S + 15, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "2 rank(s)" in out and "epoch  2/2: loss" in out, out
    assert re.search(r"test accuracy 0\.\d+, [\d.]+ steps/s .*parameters identical on every "
                     r"rank: True", out), out


def test_a_raising_rank_ends_the_job_fast():
    start = time.monotonic()
    r = launch("abort")
    assert time.monotonic() - start < 20
    assert r.returncode != 0
    assert "rank 1 fails on purpose" in r.stdout + r.stderr
