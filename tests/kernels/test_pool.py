"""The thread pool that runs chunked kernels of compiled plans."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest
from jitgrad.kernels import pool
from numba import njit


@njit(nogil=True, cache=True)
def _mark(lo, hi, out, stamp):
    for i in range(lo, hi):
        out[i] += stamp


@njit(nogil=True, cache=True)
def _fail_past(lo, hi, limit):
    if hi > limit:
        raise ValueError("part out of range")


@pytest.mark.parametrize("parts", [1, 2, 3, 17, 1000])
def test_every_part_runs_exactly_once(parts):
    out = np.zeros(parts, np.int64)
    pool.run_parts(_mark, parts, (out, 1))
    assert (out == 1).all()


def test_concurrent_callers_each_get_all_their_parts():
    results, errors = [], []

    def call(k):
        try:
            out = np.zeros(5000, np.int64)
            for _ in range(50):
                pool.run_parts(_mark, out.size, (out, k))
            results.append((k, out))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(k for k, _ in results) == [1, 2, 3, 4]
    for k, out in results:
        assert (out == 50 * k).all()


def test_a_worker_error_reaches_the_caller_and_the_pool_stays_usable():
    if pool.pool_threads() < 2:
        pytest.skip("one thread: no worker")
    with pytest.raises(ValueError, match="part out of range"):
        pool.run_parts(_fail_past, 100, (60,))  # the caller's share is fine, a worker's not
    out = np.zeros(10, np.int64)
    pool.run_parts(_mark, 10, (out, 1))
    assert (out == 1).all()


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="fork")
def test_a_forked_child_gets_a_new_pool():
    out = np.zeros(64, np.int64)
    pool.run_parts(_mark, 64, (out, 1))  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # child: the parent's worker threads do not exist here
        try:
            child = np.zeros(64, np.int64)
            pool.run_parts(_mark, 64, (child, 1))
            os._exit(0 if (child == 1).all() else 1)
        except BaseException:  # noqa: BLE001
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_an_interrupt_while_waiting_is_raised_after_the_workers_finish():
    class FlakySemaphore:
        """Its first acquire is interrupted (as by Ctrl-C), the second succeeds."""

        def __init__(self):
            self.calls = 0

        def acquire(self):
            self.calls += 1
            if self.calls == 1:
                raise KeyboardInterrupt

    class FakeWorker:
        def __init__(self):
            self.done = FlakySemaphore()

    workers = [FakeWorker(), FakeWorker()]
    pending = pool._join(workers)
    assert isinstance(pending, KeyboardInterrupt)
    assert [w.done.calls for w in workers] == [2, 2]  # both waits completed


def test_set_num_threads_changes_the_pool_and_keeps_results(rng):
    import jitgrad as jg

    before = jg.get_num_threads()
    x = jg.tensor(rng.standard_normal(300_000), dtype=jg.float32, requires_grad=True)
    f = jg.compile(jg.grad(lambda x: (jg.tanh(x) * jg.sigmoid(x)).sum()))
    f(x)
    try:
        results = []
        for n in (1, 2, 3):
            jg.set_num_threads(n)
            assert jg.get_num_threads() == n
            results.append(f(x).numpy())
        for r in results[1:]:
            np.testing.assert_array_equal(r, results[0])
    finally:
        jg.set_num_threads(before)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="positive integer"):
            jg.set_num_threads(bad)


@pytest.mark.parametrize("size", [10, 1 << 16, 1 << 19])
def test_run_sized_runs_every_part_once_at_every_size(size, monkeypatch):
    """Below HOT_MIN_SIZE on the calling thread; from it on spinning workers only; from
    PARALLEL_MIN_SIZE on the pool (``parallel.parallel_mode``): every part once either way."""
    modes = []
    real = pool.run_parts

    def spy(fn, parts, args, hot_only=False):
        modes.append(hot_only)
        real(fn, parts, args, hot_only)

    monkeypatch.setattr(pool, "run_parts", spy)
    monkeypatch.setattr(pool, "parallel_mode", _mode)  # (no OpenBLAS spinner to wait for)
    out = np.zeros(64, np.int64)
    pool.run_sized(_mark, out.size, size, (out, 1))
    assert (out == 1).all()
    assert modes == ([] if size < (1 << 16) else [size < (1 << 19)])


def _mode(n):
    """``parallel.parallel_mode`` with no OpenBLAS worker spinning."""
    from jitgrad.kernels import parallel

    return 0 if n < parallel.HOT_MIN_SIZE else (2 if n >= parallel.PARALLEL_MIN_SIZE else 1)
