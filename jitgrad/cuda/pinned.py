"""Page-locked ("pinned") host memory: ``Tensor.pin_memory()`` / ``is_pinned()`` and the
DataLoader's ``pin_memory=True``.

On a GPU a pinned array is a NumPy array over CuPy's pinned memory pool
(``cupyx.empty_pinned``): the GPU copies from it by DMA, without the staging copy pageable
memory needs. Under Numba's CUDA simulator there is no page locking: a pinned array is a
host copy that remembers it was pinned, so the same code paths run and report the same.
An array is pinned when the buffer it views was made here (views of a pinned tensor are
pinned, as in PyTorch).
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from . import runtime

__all__ = ["pinned_copy", "is_pinned"]

_lock = threading.Lock()
_PINNED: dict[int, weakref.ref] = {}   # id(buffer) -> weakref to the pinned buffer


def pinned_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of host array ``a`` in pinned memory (PyTorch's error when there
    is no CUDA device to pin for)."""
    backend = runtime.backend()
    if backend is None:
        raise RuntimeError("Cannot access accelerator device when none is available.")
    if backend == "gpu":
        import cupyx

        out = cupyx.empty_pinned(a.shape, a.dtype)
        out[...] = a
    else:
        out = np.array(a, copy=True, order="C")
    key = id(out)
    with _lock:
        _PINNED[key] = weakref.ref(out, lambda _r, k=key: _PINNED.pop(k, None))
    return out


def is_pinned(a) -> bool:
    """Whether host array ``a`` views pinned memory made by :func:`pinned_copy`."""
    if not _PINNED or not isinstance(a, np.ndarray):
        return False
    while True:
        ref = _PINNED.get(id(a))
        if ref is not None and ref() is a:
            return True
        base = a.base
        if not isinstance(base, np.ndarray):
            return False
        a = base
