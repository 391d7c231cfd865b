"""glibc allocator tuning so eager tensors reuse freed memory instead of page-faulting.

Eager ops allocate a fresh output per op. glibc serves blocks above its mmap threshold
(128 KiB, adapting upwards) with new ``mmap``s and returns freed memory above the trim
threshold to the OS, so a 4 MB output costs ~1000 page faults (1-2 ms) instead of ~0. Raising
both thresholds makes blocks up to 32 MiB (glibc's maximum mmap threshold) come from the heap
and stay there for reuse. Applied once, on the first kernel load; ``JITGRAD_MALLOC_TUNING=0``
leaves the allocator alone. No-op off glibc.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["tune_allocator"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc's ceiling on 64-bit
_TRIM_THRESHOLD = 1024 * 1024 * 1024     # keep up to 1 GiB of free heap for reuse
_done = False


def tune_allocator() -> bool:
    """Raise glibc's mmap and trim thresholds (once); returns whether it was applied."""
    global _done
    if _done:
        return False
    _done = True
    if os.environ.get("JITGRAD_MALLOC_TUNING", "1") == "0":
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    ok = libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
    ok &= libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    return bool(ok)
