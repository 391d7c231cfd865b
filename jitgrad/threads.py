"""How many threads jitgrad's parallel kernels use (PyTorch's ``set_num_threads`` API)."""

from __future__ import annotations

from .kernels import pool

__all__ = ["set_num_threads", "get_num_threads"]


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for parallel kernels: compiled plans' fused kernels, and (on the
    calling thread, as Numba counts them) eager kernels. At most ``NUMBA_NUM_THREADS`` for
    the eager ones; the default is every usable CPU.

    >>> import jitgrad
    >>> n = jitgrad.get_num_threads()
    >>> jitgrad.set_num_threads(1); jitgrad.get_num_threads()
    1
    >>> jitgrad.set_num_threads(n)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    pool.set_pool_threads(n)
    import numba

    from .kernels.parallel import configure_threading

    configure_threading()  # a thread-safe layer, before Numba starts its threads
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def get_num_threads() -> int:
    """Threads used by compiled plans' parallel kernels (see :func:`set_num_threads`)."""
    return pool.pool_threads()
