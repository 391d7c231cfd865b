"""Threading-layer selection for parallel (``prange``) kernels.

Numba's ``workqueue`` layer aborts the process when parallel kernels are launched from several
Python threads at once, so jitgrad selects a thread-safe layer (OpenMP, else TBB) before the
first parallel launch, unless ``NUMBA_THREADING_LAYER`` is set. When neither is loadable,
parallel launches are serialised with :data:`PARALLEL_LOCK`.
"""

from __future__ import annotations

import os
import threading
from time import perf_counter

__all__ = ["configure_threading", "PARALLEL_LOCK", "needs_lock", "note_blas", "parallel_ok",
           "PARALLEL_MIN_SIZE"]

#: size from which the parallel kernels are used; below it threads cost more than they save.
#: Measured on the 2-core project machine (best of 9, float32, OpenMP layer with passive
#: waiting: a launch costs 40-60 us of thread wake-up), sequential vs parallel: ``mul`` 2^17:
#: 14 vs 59 us, 2^19: 65 vs 103 us, 2^20: 113 vs 104 us; ``tanh`` 2^18: 64 vs 88 us, 2^19: 136
#: vs 115 us, 2^20: 263 vs 200 us. The part-splitting pool of :mod:`.pool` costs the same per
#: launch (80 vs 75 us at 3e4 elements), so the threshold holds for kernels run on it too.
#: Compiled plans use the same threshold (asv: ``bench_eager.ParallelThreshold``).
PARALLEL_MIN_SIZE = 1 << 19

PARALLEL_LOCK = threading.Lock()
_configured = False
_needs_lock = False


def _loadable(module: str) -> bool:
    try:
        __import__(module)
        return True
    except Exception:  # a missing libgomp/libtbb raises OSError/ImportError/ValueError
        return False


def configure_threading() -> None:
    """Pick a thread-safe threading layer once (idempotent; call before parallel kernels)."""
    global _configured, _needs_lock
    if _configured:
        return
    _configured = True
    import numba

    if os.environ.get("NUMBA_THREADING_LAYER"):
        _needs_lock = os.environ["NUMBA_THREADING_LAYER"] == "workqueue"
        return
    # OpenMP's default busy-wait costs 4-16 ms per parallel launch whenever another process
    # holds a core (measured on the 2-core project machine); passive waiting costs ~nothing
    # when idle. Must be set before libgomp loads; a user's own setting wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if _loadable("numba.np.ufunc.omppool"):
        numba.config.THREADING_LAYER = "omp"
    elif _loadable("numba.np.ufunc.tbbpool"):
        numba.config.THREADING_LAYER = "tbb"
    else:
        numba.config.THREADING_LAYER = "workqueue"
        _needs_lock = True


def needs_lock() -> bool:
    """Whether parallel launches must hold :data:`PARALLEL_LOCK` (workqueue layer)."""
    return _needs_lock


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


def parallel_ok(n: int) -> bool:
    """Whether a parallel kernel over ``n`` elements (already above its size threshold) may
    run now: not while OpenBLAS's workers may still be spinning, unless ``n`` is huge."""
    return n >= BLAS_PARALLEL_MIN or perf_counter() - _blas_at[0] > BLAS_SPIN_S
