"""When parallel kernels may run: the size threshold and the BLAS-aware check.

Every parallel kernel of jitgrad runs its parts on one thread pool (``kernels/pool.py``);
Numba's own threading layers (OpenMP, TBB, workqueue) are never started, so a process that ran
parallel kernels can ``fork()`` and its children run jitgrad.
"""

from __future__ import annotations

from time import perf_counter

__all__ = ["PARALLEL_MIN_SIZE", "HOT_MIN_SIZE", "note_blas", "parallel_ok", "parallel_mode",
           "set_blas_on_pool"]

#: size from which the parallel kernels are used; below it threads cost more than they save.
#: Measured on the 2-core project machine (best of 9, float32, OpenMP layer with passive
#: waiting: a launch costs 40-60 us of thread wake-up), sequential vs parallel: ``mul`` 2^17:
#: 14 vs 59 us, 2^19: 65 vs 103 us, 2^20: 113 vs 104 us; ``tanh`` 2^18: 64 vs 88 us, 2^19: 136
#: vs 115 us, 2^20: 263 vs 200 us. The part-splitting pool of :mod:`.pool` costs the same per
#: launch (80 vs 75 us at 3e4 elements), so the threshold holds for kernels run on it too.
#: Compiled plans use the same threshold (asv: ``bench_eager.ParallelThreshold``).
PARALLEL_MIN_SIZE = 1 << 19

#: size from which eager element-wise kernels and sums run in parallel when the C pool's workers
#: are awake (spinning after a launch, ``kernels/native_launch.py``): a launch then costs ~1 us,
#: not a wake-up. Measured on the 2-core project machine (median, float32, sequential vs pool
#: with spinning workers): ``mul`` 2^15: 4.0 vs 2.9 us, 2^16: 8.3 vs 5.3, 2^17: 18.9 vs 10.2,
#: 2^18: 35 vs 21; ``tanh`` 2^16: 19.8 vs 11.9. Below PARALLEL_MIN_SIZE a kernel never waits
#: for a sleeping worker: it runs on the calling thread and wakes them for the next one.
HOT_MIN_SIZE = 1 << 16


# ---------------------------------------------------------------- BLAS-aware thread use
#: OpenBLAS's worker threads spin (``sched_yield``) for a while after every multi-threaded
#: GEMM (``OPENBLAS_THREAD_TIMEOUT``: 2**28 cycles, ~0.1 s, by default). A parallel kernel
#: launched meanwhile waits for a core that a spinner holds, up to a scheduler slice: 5-8 ms
#: per launch measured on the 2-core project machine (an MLP training step went from 1.1 ms
#: to 8-16 ms). So for BLAS_SPIN_S after a GEMM big enough to be threaded, kernels below
#: BLAS_PARALLEL_MIN elements run on the calling thread.
BLAS_SPIN_S = 0.1
BLAS_PARALLEL_MIN = 1 << 24
#: M*N*K from which OpenBLAS threads a GEMM (its GEMM_MULTITHREAD_THRESHOLD, 4 * 65536)
BLAS_THREADED_WORK = 1 << 18
_blas_at = [float("-inf")]


def note_blas(work: int) -> None:
    """Record a BLAS call of ``work`` = M*N*K multiply-adds (matmul, addmm...)."""
    if work >= BLAS_THREADED_WORK:
        _blas_at[0] = perf_counter()


#: whether OpenBLAS runs its threaded work on jitgrad's pool (``kernels/blas_threads.py``):
#: then no worker of its own spins after a GEMM, and the rule above does not apply
_blas_on_pool = [False]


def set_blas_on_pool(routed: bool) -> None:
    """Record whether OpenBLAS's threaded work runs on jitgrad's pool."""
    _blas_on_pool[0] = routed


def parallel_ok(n: int) -> bool:
    """Whether a parallel kernel over ``n`` elements (already above its size threshold) may
    run now: not while OpenBLAS's own workers may still be spinning, unless ``n`` is huge
    (always, when OpenBLAS runs on jitgrad's pool)."""
    return _blas_on_pool[0] or n >= BLAS_PARALLEL_MIN or \
        perf_counter() - _blas_at[0] > BLAS_SPIN_S


def parallel_mode(n: int) -> int:
    """How a kernel over ``n`` elements runs: 0 on the calling thread, 1 in parallel only on
    spinning workers (``run_parts(..., hot_only=True)``), 2 in parallel."""
    if n < HOT_MIN_SIZE or not parallel_ok(n):
        return 0
    return 2 if n >= PARALLEL_MIN_SIZE else 1
