"""A small thread pool that runs a chunked ``nogil`` kernel on all cores.

Fused kernels of compiled plans are generated as one sequential Numba function over a range
of parts (``kernel(lo, hi, *args)``: chunks, rows or column blocks). Splitting the parts
across Python threads parallelises them without Numba's ``parallel=True``: that would cost
a second compilation per kernel (the parfor pipeline: ~0.4 s of a cold first call) and a
second cached object to load, for the same launch cost (measured 2.29 ms here vs 2.23 ms
for ``prange`` on the 1e6 W2 kernel, 80 vs 75 us at 3e4 elements).

Each part is computed by the same code with the same inputs whichever thread runs it, so
results do not depend on the number of threads. The pool is used by one caller at a time;
a second thread that finds it busy runs its kernel on its own thread instead of waiting
(concurrent calls are safe, and never slower than sequential). After ``fork`` the child
starts a new pool on first use.

Where the C extension ``jitgrad._nativepool`` is built, a kernel whose machine code it can
call runs on its C threads instead (:mod:`.native_launch`: no GIL, no dispatcher, ~60 us less
per launch); the Python workers below run the rest, and are started on first use.
"""

from __future__ import annotations

import os
import threading

from .native_launch import run_native
from .parallel import parallel_mode

__all__ = ["run_parts", "run_sized", "pool_threads", "set_pool_threads"]


def _default_threads() -> int:
    env = os.environ.get("NUMBA_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class _Worker:
    def __init__(self) -> None:
        # plain locks as binary semaphores: acquiring a held lock blocks in C without the
        # GIL, and a handoff costs far less than threading.Semaphore's Condition machinery
        # (an empty two-part launch: 22 -> 17 us)
        self.go = threading.Lock()
        self.go.acquire()
        self.done = threading.Lock()
        self.done.acquire()
        self.task = None
        self.error: BaseException | None = None
        threading.Thread(target=self._loop, name="jitgrad-pool", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.go.acquire()
            if self.task is None:  # the pool was replaced: exit
                return
            fn, lo, hi, args = self.task
            try:
                fn(lo, hi, *args)
            except BaseException as exc:  # handed to the caller
                self.error = exc
            self.task = None
            self.done.release()


class _Pool:
    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.workers: list = []
        self.busy = threading.Lock()

    def run(self, fn, parts: int, args: tuple) -> None:
        if not self.busy.acquire(blocking=False):
            fn(0, parts, *args)  # another thread holds the pool: run here
            return
        try:
            if not self.workers:
                self.workers = [_Worker() for _ in range(self.threads - 1)]
            t = min(self.threads, parts)
            bounds = [parts * k // t for k in range(t + 1)]
            started = []
            error = None
            try:
                for w, lo, hi in zip(self.workers, bounds[1:-1], bounds[2:]):
                    w.task = (fn, lo, hi, args)
                    w.go.release()
                    started.append(w)
                fn(0, bounds[1], *args)
            except BaseException as exc:
                error = exc
            # every started share must finish before the caller goes on (its arrays are in
            # use, and a completion left unconsumed would end the next call's wait early)
            pending = _join(started)
            for w in started:
                if w.error is not None:
                    error, w.error = error or w.error, None
            if error is not None or pending is not None:
                raise error if error is not None else pending
        finally:
            self.busy.release()


def _join(workers: list) -> BaseException | None:
    """Wait for each worker's completion; an interrupt (Ctrl-C) while waiting is held back
    until all have finished, and returned."""
    pending = None
    for w in workers:
        while True:
            try:
                w.done.acquire()
                break
            except BaseException as exc:  # KeyboardInterrupt: finish waiting first
                pending = pending or exc
    return pending


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _reset_after_fork() -> None:
    # the parent's workers do not exist in the child, and a lock another thread held at the
    # fork stays held there: start afresh
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def set_pool_threads(n: int) -> None:
    """Use ``n`` threads from now on (the old pool's idle workers exit), for OpenBLAS's
    products too where they run on the pool (``blas_threads.set_blas_threads``)."""
    global _pool
    with _pool_lock:
        old, _pool = _pool, _Pool(n)
    if old is not None:
        with old.busy:  # let a running call finish
            for w in old.workers:
                w.task = None
                w.go.release()
    from .blas_threads import set_blas_threads

    set_blas_threads(n)


def pool_threads() -> int:
    """Threads the pool uses (``NUMBA_NUM_THREADS``, else the usable CPUs)."""
    return _pool.threads if _pool is not None else _default_threads()


def run_parts(fn, parts: int, args: tuple, hot_only: bool = False) -> None:
    """``fn(lo, hi, *args)`` over ``[0, parts)`` split across the pool's threads (the caller
    computes the first share); ``fn`` must release the GIL (``nogil=True``). ``hot_only``:
    a kernel too small to pay a worker's wake-up runs in parallel only on the C pool's
    spinning workers, else on the calling thread (same bits either way)."""
    global _pool
    pool = _pool
    if pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = _Pool(_default_threads())
            pool = _pool
    if pool.threads == 1 or parts < 2:
        fn(0, parts, *args)
    elif run_native(fn, parts, args, pool.threads, hot_only):
        return
    elif hot_only:
        fn(0, parts, *args)
    else:
        pool.run(fn, parts, args)


def run_sized(fn, parts: int, size: int, args: tuple) -> None:
    """``fn(lo, hi, *args)`` over ``[0, parts)`` for a kernel over ``size`` elements: on the
    calling thread, on the pool's workers while they spin (from ``HOT_MIN_SIZE``), or on the
    pool, waking them (from ``PARALLEL_MIN_SIZE``) -- ``parallel.parallel_mode``. The parts
    are fixed, so the bits are the same whichever runs them."""
    mode = parallel_mode(size) if parts > 1 else 0
    if mode:
        run_parts(fn, parts, args, mode == 1)
    else:
        fn(0, parts, *args)
