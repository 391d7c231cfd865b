"""Threading-layer selection for parallel (``prange``) kernels.

Numba's ``workqueue`` layer aborts the process when parallel kernels are launched from several
Python threads at once, so jitgrad selects a thread-safe layer (OpenMP, else TBB) before the
first parallel launch, unless ``NUMBA_THREADING_LAYER`` is set. When neither is loadable,
parallel launches are serialised with :data:`PARALLEL_LOCK`.
"""

from __future__ import annotations

import os
import threading

__all__ = ["configure_threading", "PARALLEL_LOCK", "needs_lock"]

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
