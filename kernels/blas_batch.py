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

__all__ = ["batched_matmul", "set_batched_gemm", "BATCH_MIN_WORK", "BATCH_WAKE_WORK",
           "ROW_MAJOR", "NO_TRANS", "TRANS"]

#: total multiply-adds from which a batch runs on the pool: a call costs ~10 us more than
#: NumPy's loop (three arrays' addresses, the launch). Measured on the 2-core project
#: machine, pool / NumPy, back-to-back calls: 1.06-1.15 at 1M (8 x 64x32x64, 64 x 32x16x32),
#: 0.71-0.75 at 1-2M (256 x 16x16x16, 16 x 64x32x64), 0.55 at 4M, 0.54 at 16M
BATCH_MIN_WORK = 1 << 21
#: ...and from which it wakes sleeping workers (~30 us); below it the batch is split only
#: while they are spinning after another launch (``run_parts``'s ``hot_only``)
BATCH_WAKE_WORK = 1 << 22

#: CBLAS's enum values
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_state: dict = {"off": os.environ.get("JITGRAD_BATCHED_GEMM", "1") == "0"}
_plans: dict = {}   # (dtype, shapes, strides) -> _Plan, or None where it does not apply
_PLANS_MAX = 256


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


def _batch_offsets(batch: tuple, shape: tuple, strides: tuple) -> np.ndarray:
    """Byte offset of each matrix of a ``batch``-shaped batch in an operand of ``shape`` and
    ``strides`` (broadcast: its missing and size-1 batch dims advance by 0)."""
    lead = len(batch) - (len(shape) - 2)
    off = np.zeros(batch, np.int64)
    for d, n in enumerate(batch):
        if d < lead or shape[d - lead] == 1 or n == 1:
            continue
        axis = [1] * len(batch)
        axis[d] = n
        off = off + (np.arange(n, dtype=np.int64) * strides[d - lead]).reshape(axis)
    return np.ascontiguousarray(off.reshape(-1))


def _contiguous_strides(shape: tuple, item: int) -> tuple:
    """Byte strides of a C-contiguous array of ``shape``."""
    return tuple(math.prod(shape[d + 1:]) * item for d in range(len(shape)))


class _Plan:
    """How a batched product of one dtype and operand layout runs (found once per layout)."""

    __slots__ = ("shape", "count", "copy_a", "copy_b", "args", "offsets", "hot_only")

    def __init__(self, a_shape, a_strides, b_shape, b_strides, batch, dt, fn) -> None:
        item = dt.itemsize
        m, k = a_shape[-2:]
        n = b_shape[-1]
        self.shape = batch + (m, n)
        self.count = math.prod(batch)
        la = _layout(a_strides[-2:], m, k, item)
        self.copy_a = la is None  # e.g. an expanded gradient (stride 0): NumPy's loop
        if la is None:            # would not use BLAS; a contiguous copy does
            a_strides = _contiguous_strides(a_shape, item)
            la = _layout(a_strides[-2:], m, k, item)
        lb = _layout(b_strides[-2:], k, n, item)
        self.copy_b = lb is None
        if lb is None:
            b_strides = _contiguous_strides(b_shape, item)
            lb = _layout(b_strides[-2:], k, n, item)
        self.args = (fn, dt == _F64, la[0], lb[0], m, n, k, la[1], lb[1])
        self.offsets = (_batch_offsets(batch, a_shape, a_strides),
                        _batch_offsets(batch, b_shape, b_strides),
                        _batch_offsets(batch, self.shape,
                                       _contiguous_strides(self.shape, item)))
        self.hot_only = self.count * m * n * k < BATCH_WAKE_WORK


def _plan_for(a, b):
    """The :class:`_Plan` of ``a @ b``'s layout, or None where the pool does not take it."""
    dt = a.dtype
    if (dt != _F32 and dt != _F64) or b.dtype != dt or a.ndim < 2 or b.ndim < 2 \
            or (a.ndim < 3 and b.ndim < 3):
        return None
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    work = m * n * k
    if k != k2 or work == 0 or work > BLAS_THREADED_WORK:  # (OpenBLAS threads each one)
        return None
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None
    count = math.prod(batch)
    fns = _gemm_addresses()
    if count < 2 or count * work < BATCH_MIN_WORK or fns is None:
        return None
    return _Plan(a.shape, a.strides, b.shape, b.strides, batch, dt,
                 fns[1] if dt == _F64 else fns[0])


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
    if type(a) is not np.ndarray or type(b) is not np.ndarray or _state["off"]:
        return None
    key = (a.dtype, a.shape, a.strides, b.shape, b.strides)
    plan = _plans.get(key, False)
    if plan is False:
        if len(_plans) >= _PLANS_MAX:
            _plans.clear()
        plan = _plans[key] = _plan_for(a, b)
    if plan is None or not (a.flags.aligned and b.flags.aligned):
        return None
    if "run" not in _state:
        from .batched_gemm import gemm_slices
        from .pool import pool_threads, run_parts

        _state["run"] = (gemm_slices, pool_threads, run_parts)
    kernel, pool_threads, run_parts = _state["run"]
    if pool_threads() < 2:
        return None
    if out is None:
        out = np.empty(plan.shape, a.dtype)
    elif out.shape != plan.shape or out.dtype != a.dtype or not out.flags.c_contiguous:
        return None
    if plan.copy_a:
        a = np.ascontiguousarray(a)
    if plan.copy_b:
        b = np.ascontiguousarray(b)
    run_parts(kernel, plan.count, (*plan.args, a.ctypes.data, b.ctypes.data, out.ctypes.data,
                                   *plan.offsets), plan.hot_only)
    return out
