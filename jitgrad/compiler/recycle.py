"""Reuse of large kernel outputs across calls of a plan.

glibc serves blocks above its mmap threshold (32 MiB once ``jitgrad._malloc`` raised it, the
most it allows) with fresh ``mmap``s, so every call that allocates a 40 MB output pays for
zeroed pages: for the 1e7-element W2 step, three gradients meant ~120 MB of page faults per
call and a step 1.6x slower than a kernel writing into preallocated arrays. A
:class:`Recycler` keeps the last few arrays it handed out for one output of one kernel and
gives back one that nothing else references any more (its reference count says so: the
previous step's gradients, once ``x.grad = None`` or a newer gradient replaced them). An
array still reachable in any way (a tensor, a view of it, a NumPy view, ``.numpy()``) is
never reused. Smaller outputs come from the tuned heap, which reuses freed memory already.
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["Recycler", "RECYCLE_MIN_BYTES"]

RECYCLE_MIN_BYTES = 32 * 1024 * 1024
_getrefcount = sys.getrefcount


class Recycler:
    """Arrays of one shape and dtype, reused once unreferenced elsewhere."""

    __slots__ = ("shape", "dtype", "ring", "keep", "reused")

    def __init__(self, shape: tuple, dtype, keep: int = 2) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ring: list = []
        self.keep = keep
        self.reused = 0

    def get(self) -> np.ndarray:
        """An array of the shape and dtype (contents undefined: the kernel overwrites it)."""
        for a in self.ring:
            # references: the ring, the loop variable and getrefcount's argument
            if _getrefcount(a) == 3:
                self.reused += 1
                return a
        a = np.empty(self.shape, self.dtype)
        if len(self.ring) >= self.keep:
            del self.ring[0]
        self.ring.append(a)
        return a
