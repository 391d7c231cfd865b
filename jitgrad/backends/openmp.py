"""``jitgrad.backends.openmp``: jitgrad's parallel kernels run on its own thread pool
(``jitgrad.set_num_threads``), not OpenMP."""

from __future__ import annotations

__all__ = ["is_available"]


def is_available() -> bool:
    """Whether jitgrad uses OpenMP: no."""
    return False
