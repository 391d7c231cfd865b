"""A CUDA device function adding a column of a 2-D array in row order, four loads ahead.

The CPU's float64 sums over rows (a convolution's bias gradient over the samples, a column
sum's segment partials) add one term after another; a thread doing the same on a GPU waits
on each load unless several are in flight. :func:`column_total` loads four rows' terms
before adding them, in the same order: the same bits, four loads in flight.
"""

from __future__ import annotations

from numba import cuda

__all__ = ["column_total"]


@cuda.jit(device=True)
def column_total(a, j, s):
    """``s + a[0, j] + a[1, j] + ...``, added in row order."""
    n = a.shape[0]
    i = 0
    while i + 3 < n:
        v0 = a[i, j]
        v1 = a[i + 1, j]
        v2 = a[i + 2, j]
        v3 = a[i + 3, j]
        s += v0
        s += v1
        s += v2
        s += v3
        i += 4
    for r in range(i, n):
        s += a[r, j]
    return s
