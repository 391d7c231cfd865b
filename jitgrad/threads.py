"""How many threads jitgrad's parallel kernels use (PyTorch's ``set_num_threads`` API)."""

from __future__ import annotations

from .kernels import pool
from .trace.state import STATE as _TRACE

__all__ = ["set_num_threads", "get_num_threads"]


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
