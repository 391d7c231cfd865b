"""``max_abs``: the largest magnitude of an array (eager sin/cos check their domain with it).

Sums and means are generated kernels of the compiler's pipeline (``jitgrad/compiler``), the
same for eager ops and fused plans.
"""

from __future__ import annotations

import numpy as np

from .cached import cached_njit

__all__ = ["max_abs"]


# reassoc lets LLVM vectorise the running maximum; no nnan: NaN must be seen
@cached_njit(nogil=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def max_abs(a):
    """Largest ``|a[i]|`` of a 1-D array (NaN if any element is NaN); 0 for an empty array."""
    m = a.dtype.type(0)
    nan = False
    for i in range(a.shape[0]):
        v = abs(a[i])
        nan |= v != v
        m = v if v > m else m
    return np.nan if nan else m
