"""How many threads jitgrad's parallel kernels use (PyTorch's ``set_num_threads`` API), and
PyTorch's inter-op thread setting (``set_num_interop_threads``)."""

from __future__ import annotations

import os

from .kernels import pool
from .trace.state import STATE as _TRACE

__all__ = ["set_num_threads", "get_num_threads", "set_num_interop_threads",
           "get_num_interop_threads"]

#: the inter-op thread count: None until set (then the default, every usable CPU)
_interop_threads: int | None = None


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for parallel kernels (every kernel of jitgrad, eager or compiled, runs
    its parts on one thread pool, ``kernels/pool.py``) and, where NumPy's OpenBLAS runs its
    products on that pool (``kernels/blas_threads.py``), for matrix products too, as
    PyTorch's ``set_num_threads`` governs its BLAS; the default is every usable CPU, or
    ``NUMBA_NUM_THREADS`` when set.

    >>> import jitgrad
    >>> n = jitgrad.get_num_threads()
    >>> jitgrad.set_num_threads(1); jitgrad.get_num_threads()
    1
    >>> jitgrad.set_num_threads(n)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    pool.set_pool_threads(n)


def get_num_threads() -> int:
    """Threads the parallel kernels use (see :func:`set_num_threads`). Read inside a
    compiled function, the value is checked at every call (a change retraces)."""
    n = pool.pool_threads()
    tr = _TRACE.tracer
    if tr is not None:
        tr.on_read_setting(get_num_threads, n)
    return n


def set_num_interop_threads(n: int) -> None:
    """Set the inter-op thread count (PyTorch's pool for running independent ops side by
    side). As in PyTorch it can be set once, before it is read: a second call raises.
    jitgrad runs ops one after another (each op's kernel uses :func:`get_num_threads`
    threads), so the value is recorded and reported, not used."""
    global _interop_threads
    if isinstance(n, bool) or not isinstance(n, int):
        raise RuntimeError(f"set_num_interop_threads expects an int, but got "
                           f"{type(n).__name__}")
    if n <= 0:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    if _interop_threads is not None:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work "
                           "has started or set_num_interop_threads called")
    _interop_threads = n


def get_num_interop_threads() -> int:
    """The inter-op thread count (see :func:`set_num_interop_threads`): by default the
    number of usable CPUs, as PyTorch's."""
    if _interop_threads is not None:
        return _interop_threads
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
