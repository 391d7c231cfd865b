"""Factories and exports beyond :mod:`jitgrad.creation`: the deprecated end-inclusive
``range``, ``frombuffer`` (a tensor over a Python buffer's memory) and the legacy DLPack
export ``to_dlpack``.

>>> import jitgrad
>>> jitgrad.frombuffer(bytearray(b"\\x01\\x02"), dtype=jitgrad.int8)
tensor([1, 2], dtype=jitgrad.int8)
"""

from __future__ import annotations

import builtins
import math
import warnings

import numpy as np

from . import creation, dtypes
from .tensor import Tensor

__all__ = ["range", "frombuffer", "to_dlpack"]

_RANGE_DEPRECATED = ("torch.range is deprecated and will be removed in a future release "
                     "because its behavior is inconsistent with Python's range builtin. "
                     "Instead, use torch.arange, which produces values in [start, end).")


def range(start: float = 0, end: float | None = None, step: float = 1, *,  # noqa: A001
          dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Deprecated ``torch.range``: the values ``start, start + step, ...`` up to and
    *including* ``end`` (``floor((end - start) / step) + 1`` of them), of the default
    floating dtype unless ``dtype`` says otherwise -- even for integer arguments. Warns
    (``UserWarning``) as PyTorch does; use :func:`jitgrad.arange`."""
    warnings.warn(_RANGE_DEPRECATED, UserWarning, stacklevel=2)
    start, end, step = creation.range_bounds(start, end, step)
    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    n = int(math.floor((end - start) / step)) + 1
    values = start + step * np.arange(n, dtype=np.float64)
    if dt.is_floating_point:
        arr = values.astype(dt.np)
    else:  # integer steps stay exact
        arr = (np.int64(start) + np.int64(step) * np.arange(n, dtype=np.int64)
               if all(float(v).is_integer() for v in (start, step)) else values
               ).astype(dt.np)
    return creation.tensor(arr, dtype=dt, device=device, requires_grad=requires_grad)


_warned_read_only = False


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0,
               requires_grad: bool = False) -> Tensor:
    """A 1-D tensor viewing the memory of ``buffer`` (any object with Python's buffer
    protocol: ``bytearray``, ``array.array``, ``memoryview``, ``mmap``...), skipping
    ``offset`` bytes and holding ``count`` elements of ``dtype`` (-1: as many as fit). The
    tensor shares the buffer's memory; a read-only buffer (``bytes``) gives a tensor whose
    in-place operations raise (PyTorch's would write to it), with a warning once."""
    global _warned_read_only
    try:
        view = memoryview(buffer)
    except TypeError:
        raise ValueError("object does not implement Python buffer protocol.") from None
    dt = dtypes.to_dtype(dtype)
    nbytes, elsize = view.nbytes, dt.itemsize
    count, offset = builtins.int(count), builtins.int(offset)
    if nbytes <= 0 or count == 0:
        raise ValueError(f"both buffer length ({nbytes}) and count ({count}) must not be 0")
    if not 0 <= offset < nbytes:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({nbytes} bytes) minus 1")
    if count < 0 and (nbytes - offset) % elsize:
        raise ValueError(f"buffer length ({nbytes - offset} bytes) after offset ({offset} "
                         f"bytes) must be a multiple of element size ({elsize})")
    n = (nbytes - offset) // elsize if count < 0 else count
    if offset + n * elsize > nbytes:
        raise ValueError(f"requested buffer length ({n} * {elsize} bytes) after offset "
                         f"({offset} bytes) must not be greater than actual buffer length "
                         f"({nbytes} bytes)")
    if view.readonly and not _warned_read_only:
        _warned_read_only = True
        warnings.warn("The given buffer is not writable: the tensor shares its memory "
                      "read-only, so in-place operations on it raise. You may want to copy "
                      "the buffer or make it writable before converting it to a tensor. "
                      "This type of warning will be suppressed for the rest of this program.",
                      UserWarning, stacklevel=2)
    arr = np.frombuffer(view.cast("B") if view.ndim != 1 or view.format != "B" else view,
                        dtype=dt.np, count=n, offset=offset)
    out = creation.from_numpy(arr)
    if requires_grad:
        out.requires_grad_(True)
    return out


def to_dlpack(tensor: Tensor):
    """The legacy DLPack export: a ``"dltensor"`` capsule of ``tensor``'s memory (no copy),
    which a consumer's ``from_dlpack`` takes once. Prefer passing the tensor itself to
    ``from_dlpack`` (``Tensor.__dlpack__``)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack(): argument 'tensor' (position 1) must be Tensor, not "
                        f"{type(tensor).__name__}")
    return tensor._data.__dlpack__()
