"""``np.add.at`` on CUDA arrays, deterministic and with the CPU's bits.

CuPy has no ``ufunc.at`` through NumPy's protocol, and its own ``cupy.add.at`` adds with
float atomics (an order that changes from run to run). Here every destination element is
owned by one thread, which adds its values in their order of appearance, as NumPy's
``np.add.at`` does on the CPU: the same roundings, so the same bits. The values are grouped
by destination with one sort of unique keys (destination, then position), so no stable
sort is needed.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from . import fast_launch, runtime

__all__ = ["add_at"]


def add_at(out, index, values) -> None:
    """``np.add.at(out, index, values)`` for a CUDA array ``out`` (``index`` as NumPy's:
    integers, slices, device index arrays; ``values`` broadcast to the indexed shape)."""
    xp = runtime.xp()
    dest = _destinations(xp, out.shape, index)
    m = dest.size
    if m == 0:
        return
    vals = xp.ascontiguousarray(
        xp.broadcast_to(xp.asarray(values).astype(out.dtype, copy=False), dest.shape))
    key = xp.sort(dest.reshape(-1) * m + xp.arange(m, dtype=np.int64))
    pos, owner = key % m, key // m
    starts = xp.searchsorted(owner, xp.arange(out.size + 1, dtype=np.int64))
    target = out if out.flags.c_contiguous else xp.ascontiguousarray(out)
    flat = target.reshape(-1)
    threads = runtime.THREADS[runtime.backend()]
    blocks = runtime.blocks_for(out.size, threads)
    with np.errstate(all="ignore"):  # the simulator computes with NumPy scalars
        fast_launch.call(_add_grouped, blocks, threads,
                         (runtime.kernel_arg(flat), runtime.kernel_arg(starts, True),
                          runtime.kernel_arg(pos, True),
                          runtime.kernel_arg(vals.reshape(-1), True)))
    if target is not out:
        out[...] = target


def _destinations(xp, shape: tuple, index):
    """The flat position in an array of ``shape`` of every element ``index`` selects (the
    indexed shape). Rows picked by one integer array (embedding and index gradients) are
    computed from the rows; anything else indexes a range over the whole array."""
    if type(index) is tuple and len(index) == 1:
        index = index[0]
    if runtime.is_device_array(index) and index.dtype.kind in "iu" and index.ndim >= 1 \
            and len(shape) >= 1:
        row = math.prod(shape[1:])
        rows = index.astype(np.int64)
        if index.dtype.kind == "i":
            rows = xp.where(rows < 0, rows + shape[0], rows)
        return (rows.reshape(-1, 1) * row + xp.arange(row, dtype=np.int64)).reshape(
            index.shape + tuple(shape[1:]))
    return xp.arange(math.prod(shape), dtype=np.int64).reshape(shape)[index]


@cuda.jit(cache=True)
def _add_grouped(out, starts, pos, vals):
    """Destination ``d`` adds ``vals[pos[starts[d]:starts[d + 1]]]`` in order."""
    d = cuda.grid(1)
    stride = cuda.gridsize(1)
    while d < out.shape[0]:
        a = starts[d]
        b = starts[d + 1]
        if a < b:
            s = out[d]
            for k in range(a, b):
                s += vals[pos[k]]
            out[d] = s
        d += stride
