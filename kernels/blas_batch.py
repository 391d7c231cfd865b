"""``a @ b`` of stacked matrices with the batch split across the pool (see
:mod:`.batched_gemm`), for the batches OpenBLAS would run one matrix at a time on one core.

:func:`batched_matmul` answers None where it does not apply, and the caller keeps
``np.matmul``: not NumPy arrays of one float dtype, fewer than two matrices, matrices big
enough for OpenBLAS to thread each one (more than ``BLAS_THREADED_WORK`` multiply-adds), a
batch too small to pay a launch, one thread, no 64-bit-integer ``cblas_?gemm`` in NumPy's
OpenBLAS. An operand whose matrices BLAS cannot read in place (no unit stride along
either axis: a strided slice, the expanded gradient of a sum) is copied to a contiguous
array first, where ``np.matmul`` would run its unvectorised loop. Whether it applies
depends on shapes, strides and dtypes only, so eager mode and a plan make the same choice;
each matrix is one single-threaded GEMM, so the result does not depend on the thread
count.

Imports nothing of Numba until the first product it runs.
"""

from __future__ import annotations

import ctypes
import math
import os

import numpy as np

from .parallel import BLAS_THREADED_WORK

__all__ = ["batched_matmul", "set_batched_gemm", "BATCH_MIN_WORK", "BATCH_WAKE_WORK"]

#: total multiply-adds from which a batch runs on the pool: below it a launch costs more
#: than it saves (NumPy's loop runs it)
BATCH_MIN_WORK = 1 << 16
#: ...and from which it wakes sleeping workers (~30 us); below it the batch is split only
#: while they are spinning after another launch (``run_parts``'s ``hot_only``)
BATCH_WAKE_WORK = 1 << 20

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_state: dict = {"off": os.environ.get("JITGRAD_BATCHED_GEMM", "1") == "0"}
_offsets: dict = {}   # (batch shape, batch strides) -> byte offsets of each matrix
_OFFSETS_MAX = 256


def _numpy_blas_library() -> str | None:
    """Path of the OpenBLAS NumPy's ``matmul`` calls (the one under NumPy's own tree)."""
    from .blas_threads import _openblas_libraries

    root = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    for path in _openblas_libraries():
        if os.path.abspath(path).startswith(root + os.sep) and "numpy" in path:
            return path
    return None


def _gemm_addresses() -> tuple | None:
    """(address of ``cblas_sgemm``, of ``cblas_dgemm``) with 64-bit integers, in NumPy's
    OpenBLAS; None where there is none (found once)."""
    if "gemm" not in _state:
        _state["gemm"] = None
        path = _numpy_blas_library()
        if path is not None:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                lib = None
            found = []
            for kind in ("s", "d"):
                for symbol in (f"scipy_cblas_{kind}gemm64_", f"cblas_{kind}gemm64_"):
                    fn = getattr(lib, symbol, None)
                    if fn is not None:
                        found.append(ctypes.cast(fn, ctypes.c_void_p).value)
                        break
            if len(found) == 2:
                _state["gemm"] = tuple(found)
    return _state["gemm"]


def _layout(strides: tuple, rows: int, cols: int, item: int) -> tuple | None:
    """(CBLAS transpose flag, leading dimension) of a ``rows x cols`` matrix with these byte
    strides, or None where BLAS cannot read it in place."""
    from .batched_gemm import NO_TRANS, TRANS

    s0, s1 = strides
    if rows == 1:
        s0 = cols * item
    if cols == 1:
        s1 = item
    if s1 == item and s0 > 0 and s0 % item == 0 and s0 // item >= cols:
        return NO_TRANS, s0 // item
    if s0 == item and s1 > 0 and s1 % item == 0 and s1 // item >= rows:
        return TRANS, s1 // item
    return None


def _batch_offsets(shape: tuple, strides: tuple) -> np.ndarray:
    """Byte offset of each matrix of a batch of ``shape`` with these batch strides."""
    key = (shape, strides)
    off = _offsets.get(key)
    if off is None:
        off = np.zeros(shape, np.int64)
        for d, (n, s) in enumerate(zip(shape, strides)):
            if s and n > 1:
                axis = [1] * len(shape)
                axis[d] = n
                off = off + (np.arange(n, dtype=np.int64) * s).reshape(axis)
        off = np.ascontiguousarray(off.reshape(-1))
        if len(_offsets) >= _OFFSETS_MAX:
            _offsets.clear()
        _offsets[key] = off
    return off


def _batch_strides(a: np.ndarray, shape: tuple) -> tuple:
    """``a``'s batch strides broadcast to ``shape`` (0 along broadcast dims)."""
    lead = len(shape) - (a.ndim - 2)
    st = [0] * lead
    for n, s in zip(a.shape[:-2], a.strides[:-2]):
        st.append(s if n > 1 else 0)
    return tuple(st)


def set_batched_gemm(enabled: bool) -> None:
    """Split batched products across the pool (the default) or leave them to ``np.matmul``
    (``JITGRAD_BATCHED_GEMM=0`` starts a process with them off); for A/B benchmarks. An
    operand BLAS cannot read in place is multiplied by NumPy's own loop while off: its
    products may then differ in the last bits from those computed while on."""
    _state["off"] = not enabled


def batched_matmul(a, b, out: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b`` of stacked matrices (``np.matmul``'s broadcasting) with the batch split
    across the pool, written into ``out`` if given (C-contiguous, the product's shape and
    dtype); None where it does not apply (module docstring)."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim < 2 or b.ndim < 2 \
            or (a.ndim < 3 and b.ndim < 3) or _state["off"]:
        return None
    dt = a.dtype
    if (dt != _F32 and dt != _F64) or b.dtype != dt or not (a.flags.aligned and b.flags.aligned):
        return None
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    work = m * n * k
    if k != k2 or work == 0 or work > BLAS_THREADED_WORK:
        return None
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None
    count = math.prod(batch)
    if count < 2 or count * work < BATCH_MIN_WORK:
        return None
    from .pool import pool_threads, run_parts

    if pool_threads() < 2:
        return None
    fns = _gemm_addresses()
    if fns is None:
        return None
    item = dt.itemsize
    la = _layout(a.strides[-2:], m, k, item)
    if la is None:  # e.g. an expanded gradient (stride 0): NumPy's loop would not use BLAS
        a = np.ascontiguousarray(a)
        la = _layout(a.strides[-2:], m, k, item)
    lb = _layout(b.strides[-2:], k, n, item)
    if lb is None:
        b = np.ascontiguousarray(b)
        lb = _layout(b.strides[-2:], k, n, item)
    shape = batch + (m, n)
    if out is None:
        out = np.empty(shape, dt)
    elif out.shape != shape or out.dtype != dt or not out.flags.c_contiguous:
        return None
    from .batched_gemm import gemm_slices

    a_off = _batch_offsets(batch, _batch_strides(a, batch))
    b_off = _batch_offsets(batch, _batch_strides(b, batch))
    c_off = _batch_offsets(batch, tuple(s for s in out.strides[:-2]))
    double = dt == _F64
    args = (fns[1] if double else fns[0], double, la[0], lb[0], m, n, k, la[1], lb[1],
            a.ctypes.data, b.ctypes.data, out.ctypes.data, a_off, b_off, c_off)
    run_parts(gemm_slices, count, args, count * work < BATCH_WAKE_WORK)
    return out
