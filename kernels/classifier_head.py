"""A classifier head's forward and backward over ranges of rows: ``logits = h @ w (+ bias)``,
cross-entropy's loss terms and gradient, and ``dh = gx @ w2``, one range at a time.

A training step's head is a linear layer of a few outputs (an MLP's 10 classes) and its loss:
in a plan, an ``addmm`` call, the cross-entropy chain (``compiler/chains.py``) and the input
gradient's product, each a pass over the batch with a cold start of its own (a 1024-row
batch: ~430 us in the plan, ~200 us run back to back). :func:`head_rows` computes them for a
range of rows in one go, while the range's data is in the core's cache:

1. ``logits[r0:r1] = h[r0:r1] @ w`` by NumPy's own OpenBLAS ``cblas_?gemm`` (called through
   its address, see :mod:`.batched_gemm`) with the transpose flags and leading dimensions
   NumPy's ``matmul`` passes, then ``+= bias`` (what eager ``addmm`` computes: the product,
   then the bias added in place);
2. cross-entropy of those rows by the code of :func:`.softmax.cross_entropy_small` (its
   inlined row functions, compiled with its flags);
3. ``dh[r0:r1] = gx[r0:r1] @ w2`` by the same GEMM;

then (:func:`head_weight_grad`, a second launch) the weight's gradient ``gx.T @ h`` over
ranges of its columns.

With one part the GEMMs are the whole products, NumPy's own calls (OpenBLAS threads them on
the pool as it does for ``np.matmul``). With more, each part's GEMMs run single-threaded on
its pool thread (OpenBLAS's thread count is 1 during the launch: a product another Python
thread runs meanwhile is single-threaded too, with the same bits; its
``openblas_set_num_threads_local`` sets the count of every thread, so it is no help). A
product of a range of rows computes each row as the whole product does only where OpenBLAS
takes the same path for both (its small-matrix kernels round differently: 1024 x 256 x 10
float32 on SkylakeX kernels, ranges of <= 120 rows differ in the last bits, of >= 124 rows
do not), so a plan checks that once per shape, layout and part count against the separate
calls before it uses more than one part (``compiler/classifier_head.py``).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
from numba import njit

from .batched_gemm import _dgemm, _sgemm
from .blas_batch import TRANS, _gemm_addresses, _layout, _numpy_blas_library
from .blas_threads import _function
from .cached import cached_njit
from .parallel import note_blas
from .pool import run_sized
from .scratch import scratch_f64
from .softmax import BLOCK, SMALL_C, _log_softmax_block, _log_softmax_bwd_row
from .vmath import KERNEL_FASTMATH

__all__ = ["plan_head", "HeadPlan", "blas_thread_count", "SMALL_C"]

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_state: dict = {}


def blas_thread_count() -> tuple | None:
    """``(get, set)``: NumPy's OpenBLAS's ``openblas_get_num_threads`` and
    ``openblas_set_num_threads``; None where it has none (another BLAS)."""
    if "threads" not in _state:
        _state["threads"] = None
        path = _numpy_blas_library()
        lib = None
        if path is not None:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                pass
        get = _function(lib, "get_num_threads") if lib is not None else None
        put = _function(lib, "set_num_threads") if lib is not None else None
        if get is not None and put is not None:
            get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
            _state["threads"] = (get, put)
    return _state["threads"]


_one_thread = {"depth": 0, "before": 1}
_one_thread_lock = threading.Lock()


def _one_blas_thread(threads: tuple, enter: bool) -> None:
    """OpenBLAS's thread count set to 1 by the first of the heads running at once (Python
    threads may run plans concurrently) and set back by the last."""
    get, put = threads
    with _one_thread_lock:
        if enter:
            if _one_thread["depth"] == 0:
                _one_thread["before"] = get()
                put(1)
            _one_thread["depth"] += 1
        else:
            _one_thread["depth"] -= 1
            if _one_thread["depth"] == 0:
                put(_one_thread["before"])


# the kernel's int64 ``geo`` vector: the GEMMs' CBLAS flags, leading dimensions and sizes
(TA, TB, LDA, LDB, K, N, P, TA2, TB2, LDA2, LDB2, HAS_BIAS, HAS_DH, ROWS) = range(14)


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH, error_model="numpy")
def head_rows(lo, hi, parts, fn, double, geo, h, w, w2, bias, t, ignore_index, scale, x, y,
              gy, gx, picked, dh, bad):
    """Parts ``[lo, hi)`` of the head: part ``u`` is rows ``[u * rows, (u + 1) * rows)``,
    the last one all rows left. ``geo`` (int64, indices above): the GEMMs' flags, leading
    dimensions and sizes (``h`` is ``M x K``, ``w`` ``K x N``, ``w2`` ``N x P``) and the
    rows of a part; ``x`` (logits), ``y``, ``gy``, ``gx``, ``dh``: C-contiguous;
    ``fn``: ``cblas_dgemm``'s address if ``double`` else ``cblas_sgemm``'s. A part whose
    rows hold a target out of range or equal to ``ignore_index`` sets ``bad[u]`` and
    computes nothing (the caller then runs the separate functions)."""
    for u in range(lo, hi):
        r0 = u * geo[ROWS]
        r1 = x.shape[0] if u == parts - 1 else r0 + geo[ROWS]
        bad[u] = 0
        for r in range(r0, r1):
            c = t[r]
            if c == ignore_index or c < 0 or c >= geo[N]:
                bad[u] = 1
        if bad[u] == 0:
            _head_range(r0, r1, fn, double, geo, h, w, w2, bias, t, scale, x, y, gy, gx,
                        picked, dh)


@njit(inline="always")
def _address(a, r, row_bytes):
    return np.int64(a.ctypes.data) + r * row_bytes


@njit(inline="always")
def _head_range(r0, r1, fn, double, geo, h, w, w2, bias, t, scale, x, y, gy, gx, picked,
                dh):
    rows = r1 - r0
    k, n, p = geo[K], geo[N], geo[P]
    item = x.itemsize
    ha, wa, xa = _address(h, r0, h.strides[0]), _address(w, 0, 0), _address(x, r0, n * item)
    if double:
        _dgemm(fn, geo[TA], geo[TB], rows, n, k, ha, geo[LDA], wa, geo[LDB], xa, n)
    else:
        _sgemm(fn, geo[TA], geo[TB], rows, n, k, ha, geo[LDA], wa, geo[LDB], xa, n)
    if geo[HAS_BIAS]:
        for r in range(r0, r1):
            for c in range(n):
                x[r, c] += bias[c]
    # cross_entropy_small's body over the range's rows (gy: zero but at the targets)
    xs, ys, gys, gxs = x[r0:r1], y[r0:r1], gy[r0:r1], gx[r0:r1]
    m, s = scratch_f64(BLOCK), scratch_f64(BLOCK)
    for b0 in range(0, rows, BLOCK):
        _log_softmax_block(xs, ys, b0, m, s)
        for r in range(b0, min(b0 + BLOCK, rows)):
            c = t[r0 + r]
            picked[r0 + r] = -np.float64(ys[r, c])
            for j in range(n):
                gys[r, j] = 0.0
            gys[r, c] = scale
            _log_softmax_bwd_row(gys, ys, gxs, r)
    if geo[HAS_DH]:
        ga, da, w2a = _address(gx, r0, n * item), _address(dh, r0, p * item), _address(w2, 0, 0)
        if double:
            _dgemm(fn, geo[TA2], geo[TB2], rows, p, n, ga, geo[LDA2], w2a, geo[LDB2], da, p)
        else:
            _sgemm(fn, geo[TA2], geo[TB2], rows, p, n, ga, geo[LDA2], w2a, geo[LDB2], da, p)


@cached_njit(nogil=True)
def head_weight_grad(lo, hi, parts, fn, double, geo, gx, h, dw):
    """Parts ``[lo, hi)`` of ``dw = gx.T @ h`` (``gx``: ``M x N`` C-contiguous, ``h``:
    ``M x K``, ``dw``: ``N x K`` C-contiguous): part ``u`` is columns ``[u * cols, (u + 1) *
    cols)`` of ``dw``, the last one all columns left (``geo``: ``[tb, ldb, cols]``, the flags
    of ``h`` as NumPy passes them for the whole product)."""
    m, n = gx.shape
    k = dw.shape[1]
    item = dw.itemsize
    for u in range(lo, hi):
        c0 = u * geo[2]
        c1 = k if u == parts - 1 else c0 + geo[2]
        ga, ha = _address(gx, 0, 0), _address(h, 0, 0) + c0 * h.strides[1]
        da = _address(dw, 0, 0) + c0 * item
        if double:
            _dgemm(fn, TRANS, geo[0], n, c1 - c0, m, ga, n, ha, geo[1], da, k)
        else:
            _sgemm(fn, TRANS, geo[0], n, c1 - c0, m, ga, n, ha, geo[1], da, k)


class HeadPlan:
    """How the head of one set of shapes, layouts and dtype runs (:func:`plan_head`):
    ``run(h, w, bias, t, g, w2)`` -> ``(loss, gx, dh)``, or None where a target is out of
    range or ignored (nothing returned is computed: run the separate functions)."""

    __slots__ = ("parts", "geo", "fn", "double", "dtype", "m", "n", "k", "p", "total",
                 "free", "threads", "size", "ignore_index", "dw_geo", "dw_parts")

    def __init__(self, h, w, w2, has_bias, reduction, ignore_index, parts, layouts,
                 dw_parts) -> None:
        (m, k), n = h.shape, w.shape[1]
        p = 0 if w2 is None else w2.shape[1]
        dt = h.dtype
        fns = _gemm_addresses()
        la, lb, lg, l2 = layouts
        self.parts, self.dtype, self.m, self.n, self.k, self.p = parts, dt, m, n, k, p
        self.fn, self.double = (fns[1], True) if dt == _F64 else (fns[0], False)
        self.geo = np.array([la[0], lb[0], la[1], lb[1], k, n, p, lg[0], l2[0], lg[1], l2[1],
                             has_bias, w2 is not None, m // parts], np.int64)
        self.total = m if reduction == "mean" else 1
        self.ignore_index = ignore_index
        # dw = gx.T @ h in column ranges: h's flags as for the whole product
        self.dw_parts = dw_parts  # 0: no weight gradient
        self.dw_geo = np.array([la[0], la[1], k // max(dw_parts, 1)], np.int64)
        # logits, log_softmax, its gradient's seed, the loss terms, the parts' target
        # checks: arrays of the plan's own, reused by the next call (a call running meanwhile
        # on another thread takes new ones)
        self.free = [self._scratch()]
        self.threads = blas_thread_count() if parts > 1 else None
        self.size = m * (k + p)

    def _scratch(self) -> tuple:
        m, n, dt = self.m, self.n, self.dtype
        return (np.empty((m, n), dt), np.empty((m, n), dt), np.empty((m, n), dt),
                np.empty(m, np.float64), np.zeros(self.parts, np.int64))

    def run(self, h, w, bias, t, g, w2):
        """``(loss, gx, dh, dw)`` (``dh`` None without ``w2``, ``dw`` -- ``gx.T @ h`` --
        None unless planned), or None where a target is out of range or ignored."""
        scratch = self.free.pop() if self.free else self._scratch()
        x, y, gy, picked, bad = scratch
        gx = np.empty((self.m, self.n), self.dtype)
        dh = np.empty((self.m, self.p), self.dtype) if w2 is not None else None
        scale = self.dtype.type(-float(g) / self.total)
        args = (self.parts, self.fn, self.double, self.geo, h, w, w if w2 is None else w2,
                x[0] if bias is None else bias, t, self.ignore_index, scale, x, y, gy, gx,
                picked, gx if dh is None else dh, bad)
        dw = np.empty((self.n, self.k), self.dtype) if self.dw_parts else None
        dw_args = (self.dw_parts, self.fn, self.double, self.dw_geo, gx, h, dw)
        if self.threads is not None:  # each part's GEMMs on its own thread: OpenBLAS
            _one_blas_thread(self.threads, True)  # threads none meanwhile
            try:
                run_sized(head_rows, self.parts, self.size, args)
                if self.dw_parts > 1 and not bad.any():
                    run_sized(head_weight_grad, self.dw_parts, self.size, dw_args)
            finally:
                _one_blas_thread(self.threads, False)
        else:
            head_rows(0, 1, *args)
        ok = not bad.any()
        if self.dw_parts == 1 and ok:  # the whole product (OpenBLAS threads it)
            head_weight_grad(0, 1, *dw_args)
        note_blas(self.m * self.n * self.k)  # as the separate products would
        loss = np.asarray(picked.sum() / self.total, dtype=self.dtype) if ok else None
        self.free.append(scratch)
        return (loss, gx, dh, dw) if ok else None


def plan_head(h, w, bias, t, w2, reduction: str, ignore_index: int, parts: int = 1,
              dw_parts: int = 1, weight_grad: bool = False):
    """The :class:`HeadPlan` of a classifier head over these operands: ``x = h @ w
    (+ bias)`` (``bias`` 1-D or None), ``cross_entropy(x, t)`` (``reduction`` "mean" or
    "sum") and its gradient ``gx``, ``dh = gx @ w2`` (``w2`` None: no ``dh``) -- what
    ``addmm``/``matmul``, the cross-entropy chain and ``np.matmul`` compute -- in ``parts``
    ranges of rows, and with ``weight_grad`` ``dw = gx.T @ h`` in ``dw_parts`` ranges of its
    columns (1 or ``parts``; see the module docstring for when more than one part gives
    their bits). None where it does not apply: not NumPy float arrays of one dtype,
    operands BLAS cannot read in place, fewer than two rows or columns in a product (NumPy
    runs those as GEMV), rows wider than ``SMALL_C``, no ``cblas_?gemm``, or (``parts > 1``)
    no way to set OpenBLAS's thread count. Its layouts are those of these operands: a plan
    keys it by their strides."""
    arrays = (h, w, t) + (() if bias is None else (bias,)) + (() if w2 is None else (w2,))
    if any(type(a) is not np.ndarray for a in arrays) or reduction not in ("mean", "sum"):
        return None
    dt = h.dtype
    if (dt != _F32 and dt != _F64) or w.dtype != dt or h.ndim != 2 or w.ndim != 2:
        return None
    (m, k), (k2, n) = h.shape, w.shape
    if k2 != k or m < 2 or n < 2 or k < 1 or n > SMALL_C or t.dtype != np.int64 \
            or t.shape != (m,):
        return None
    if bias is not None and (bias.dtype != dt or bias.shape != (n,)):
        return None
    if weight_grad and k < 2:  # (NumPy runs a one-column product as GEMV)
        return None
    if w2 is not None and (w2.dtype != dt or w2.ndim != 2 or w2.shape[0] != n or
                           w2.shape[1] < 2):
        return None
    parts = max(1, min(parts, m // 2))
    dw_parts = 1 if dw_parts < 2 else max(1, min(parts, k // 2))
    item = dt.itemsize
    layouts = (_layout(h.strides, m, k, item), _layout(w.strides, k, n, item),
               _layout((n * item, item), m, n, item),
               (0, 0) if w2 is None else _layout(w2.strides, n, w2.shape[1], item))
    if _gemm_addresses() is None or None in layouts or \
            (parts > 1 and blas_thread_count() is None) or \
            not all(a.flags.aligned for a in arrays):
        return None
    return HeadPlan(h, w, w2, bias is not None, reduction, ignore_index, parts, layouts,
                    dw_parts if weight_grad else 0)
