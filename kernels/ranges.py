"""``linspace``'s values as PyTorch's CPU kernel computes them (``linspace_kernel``).

PyTorch steps from ``start`` over the first half and back from ``end`` over the second, each
value ``start + step * i`` / ``end - step * (steps - i - 1)`` in the result's dtype, which
its compiler contracts into one FMA: ``float32`` values are not NumPy's (float64, rounded
once) ones, so a grid built on them (``affine_grid`` with ``mode="nearest"``) could pick
other pixels. ``i`` is converted to the dtype first, as C++ converts it.
"""

from __future__ import annotations

from .cached import cached_njit
from .vmath._llvm import fma

__all__ = ["linspace_fill"]


@cached_njit(nogil=True)
def linspace_fill(out, start, end, step):  # pragma: no cover - compiled
    """Fill the 1-D float array ``out`` (``len(out) >= 2``); ``start``, ``end`` and ``step``
    are scalars of its dtype."""
    n = out.shape[0]
    half = n // 2
    for i in range(n):
        out[i] = i if i < half else n - i - 1  # the multiplier, converted as C++ does
        k = out[i]
        out[i] = fma(step, k, start) if i < half else fma(-step, k, end)
