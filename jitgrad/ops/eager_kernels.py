"""Eager element-wise ops and sums as one-equation kernels of the compiler's pipeline.

An eager ``x * y`` is a fused group of one equation: :func:`jitgrad.compiler.describe.
describe_op` describes it for the operands' layout, :func:`jitgrad.compiler.kernels.load`
renders, caches and loads it — the same generator, cache and thread pool as a compiled plan,
so an op computes the same bits eagerly and inside a fused kernel. Parameters (an exponent, a
clamp bound) are kernel arguments: one compiled kernel serves every value.

Layouts: contiguous operands of the output's shape and scalars run the ``flat`` kernel over
``n`` elements (Python numbers and one-element arrays are passed by value); broadcasting that
a split of the output shape expresses (a bias row, a column) runs the ``rows`` kernel; anything
else (more broadcast dims, non-contiguous operands) the ``strided`` kernel over 2-D views,
leading dims looped here. Integer and bool ops run on the op's NumPy reference. Large kernels
run on all cores (``kernels/pool.py``), from :data:`PARALLEL_MIN_SIZE` elements (from
:data:`HOT_MIN_SIZE` when the pool's workers are awake).

While ``jitgrad.compile`` traces, ops run on the NumPy references (:func:`use_kernels`): the
traced values only shape the graph, and the first call's results come from the plan.
"""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np

from ..kernels.parallel import HOT_MIN_SIZE, PARALLEL_MIN_SIZE
from ..kernels.pool import run_sized
from ..shapes import broadcast_shapes
from ..trace.state import STATE as _TRACE
from .registry import OpDef

__all__ = ["run", "PARALLEL_MIN_SIZE", "HOT_MIN_SIZE", "fast_kernels", "kernel_fn",
           "use_kernels", "run_kernel", "sum_kind", "on_device", "prepare_process", "PREPARED"]

CHUNK_SHIFT = 14                 # log2 of kernel_desc.CHUNK (parts of a flat kernel)

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_ndarray = np.ndarray
_empty = np.empty
_fns: dict = {}


def use_kernels() -> bool:
    """False while ``jitgrad.compile`` traces: the trace runs on the NumPy references (its
    values are not the results: the first call's come from the compiled plan)."""
    return _TRACE.tracer is None


def _elementwise_kernels() -> bool:
    """:func:`use_kernels` for :func:`run`'s element-wise kernels, which also run under a
    tracer whose graph eager ops replay (``vmap``'s: the replay runs the same kernels, and
    some references are slow -- ``np.vectorize`` of ``math.erf``)."""
    tr = _TRACE.tracer
    return tr is None or tr.eager_kernels


def kernel_fn(op: OpDef, cdt, patterns: tuple, mode: str, odt, into: bool = False):
    """The loaded kernel (Numba dispatcher) of ``op`` for this layout (cached); ``into``:
    the variant writing its result into its first operand."""
    key = (op.name, cdt, patterns, mode, odt, into)
    fn = _fns.get(key)
    if fn is None:
        from ..compiler import kernels
        from ..compiler.describe import describe_op

        prepare_process()
        fn = _fns[key] = kernels.load(describe_op(op, cdt, patterns, mode, odt, into)).fn
    return fn


def into_kernel(op: OpDef, dt, kinds: tuple):
    """The flat kernel updating its first operand in place with ``op``: ``kinds`` says, per
    input, "full" (an array of ``dt``, the first one the destination) or "arg" (a number).
    LLVM vectorises it, where the out-of-place kernel given the same array as input and
    output falls back to its scalar loop (its overlap check fails). None when ``op`` has no
    kernel for ``dt``, changes the dtype or takes another number of inputs."""
    if op.expr is None or (dt != _F32 and dt != _F64) or op.dtype_rule == "bool" \
            or op.nin != len(kinds):
        return None
    dt = _F32 if dt == _F32 else _F64
    return kernel_fn(op, dt, tuple(kinds), "flat", dt, True)


#: non-empty once :func:`prepare_process` ran
PREPARED: list = []


def prepare_process() -> None:
    """Once per process, before the first kernel or matrix product runs: glibc's allocator
    tuned to reuse freed blocks (``_malloc.py``) and OpenBLAS's threaded work routed to the
    kernels' pool (``kernels/blas_threads.py``). A script of matrix products only (attention
    scores) otherwise page-faulted on every fresh output (``compare.py --only attention``'s
    eager step: 1,760 faults and 5.4 ms a step before, none and 3.5 ms with it)."""
    if not PREPARED:
        from .._malloc import tune_allocator
        from ..kernels.blas_threads import route_blas_threads

        tune_allocator()  # fresh outputs reuse freed heap blocks instead of page-faulting
        route_blas_threads()  # OpenBLAS's threaded work on the kernels' pool
        PREPARED.append(True)


def fast_kernels(op: OpDef, dt):
    """``[kernel of full operands, kernel of a tensor and a Python number, out dtype, entry
    of the first, entry of the second]`` for ``op`` on dtype ``dt`` (the dispatch fast
    paths; the entries, see :func:`flat_entry`, are loaded by :func:`load_entry` on first
    use), or None when the op has no kernel for it; cached on the op."""
    ks = None
    if op.expr is not None and (dt == _F32 or dt == _F64):
        dt = _F32 if dt == _F32 else _F64
        odt = np.dtype(np.bool_) if op.dtype_rule == "bool" else dt
        full = kernel_fn(op, dt, ("full",) * op.nin, "flat", odt)
        scalar = kernel_fn(op, dt, ("full", "arg"), "flat", odt) if op.nin == 2 else None
        ks = [full, scalar, odt, None, None]
    op.fast_kernels[dt] = ks
    return ks


def load_entry(op: OpDef, dt, ks: list, i: int):
    """``ks[i]`` of :func:`fast_kernels` for ``op`` on ``dt`` (3: the entry of full operands,
    4: of a tensor and a number), loaded."""
    e = ks[i] = flat_entry(op, dt, "full" if i == 3 else "arg")
    return e


def flat_entry(op: OpDef, dt, second: str = "full"):
    """The compiled entry point of ``op``'s flat kernel on float ``dt`` for one-dimensional
    C-contiguous aligned arrays (a two-input op's second input such an array, or a number of
    ``dt`` when ``second`` is "arg"), then the op's params as numbers of ``dt``, then the
    output array: ``entry(lo, hi, n, *inputs, *params, out)``.

    The entry is the machine code the kernel's Numba dispatcher runs for such arguments,
    without the dispatcher's type resolution (~0.2 us of a 16-element op): the same bits. It
    does not check its arguments: a caller passes exactly those types (an array of another
    ndim or dtype would be read out of bounds)."""
    from numba.core import types as nt

    dt = _F32 if dt == _F32 else _F64
    pats = ("full",) if op.nin == 1 else ("full", second)
    odt = np.dtype(np.bool_) if op.dtype_rule == "bool" else dt
    fn = kernel_fn(op, dt, pats, "flat", odt)
    item = nt.float32 if dt is _F32 else nt.float64
    arr = nt.Array(item, 1, "C")
    args = [arr if p == "full" else item for p in pats] + [item] * len(op.params)
    out = nt.Array(nt.boolean if odt == np.bool_ else item, 1, "C")
    return fn.compile((nt.int64, nt.int64, nt.int64, *args, out))


def run_kernel(fn, n: int, args: tuple) -> None:
    """A flat kernel over ``n`` elements: on the calling thread, or on the pool when large
    (same bits either way: the parts are fixed)."""
    run_sized(fn, (n + (1 << CHUNK_SHIFT) - 1) >> CHUNK_SHIFT, n, (n, *args))


def on_device(arrays) -> bool:
    """Whether one of ``arrays`` (arrays, numbers) is CUDA memory."""
    rt = sys.modules.get("jitgrad.cuda.runtime")
    if rt is None:
        return False
    for x in arrays:
        if rt.is_device_array(x):
            return True
    return False


def _param_args(op: OpDef, params, cdt) -> tuple:
    if not op.params:
        return ()
    t = cdt.type
    return tuple(t(params[p]) for p in op.params)


def run(op: OpDef, operands: tuple, params, cdt, odt) -> np.ndarray:
    """Compute element-wise ``op`` over ``operands`` (arrays of ``cdt``, or NumPy scalars;
    ``no_promote`` inputs keep their dtype)."""
    cdt = np.dtype(cdt)
    odt = np.dtype(odt)
    if on_device(operands):
        from ..cuda.launch import elementwise

        return elementwise(op, operands, params, cdt, odt)
    if op.expr is None or (cdt != _F32 and cdt != _F64) or not _elementwise_kernels():
        return _run_numpy(op, operands, params, odt)
    cdt = _F32 if cdt == _F32 else _F64
    shapes = [x.shape for x in operands if type(x) is _ndarray]
    out_shape = shapes[0] if shapes else ()
    for s in shapes:
        if s != out_shape:
            out_shape = _broadcast_all(shapes)
            break
    out = _empty(out_shape, odt)
    if out.size == 0:
        return out
    pargs = _param_args(op, params, cdt)
    pats, full, numbers = [], [], []
    for x in operands:
        if type(x) is _ndarray and x.shape == out_shape and x.flags.c_contiguous and \
                x.size != 1:  # (not by_value: a C-contiguous array of 2+ elements has a stride)
            pats.append("full")
            full.append(x.reshape(-1))
        elif type(x) is not _ndarray or by_value(x):
            # a number, a one-element array or a broadcast one: by value
            pats.append("arg")
            numbers.append(_value(x))
        else:  # broadcast or strided: not the flat kernel
            return _run_broadcast(op, operands, pargs, cdt, odt, out)
    fn = kernel_fn(op, cdt, tuple(pats), "flat", odt)
    run_kernel(fn, out.size, (*full, *numbers, *pargs, out.reshape(-1)))
    return out


def _broadcast_all(shapes: list) -> tuple:
    out = shapes[0]
    for s in shapes[1:]:
        out = broadcast_shapes(out, s)
    return out


def by_value(x) -> bool:
    """Whether the array operand ``x`` is passed to a kernel as a number: it has one element,
    or one element broadcast to its shape (every stride 0: the gradient of a full sum, an
    ``expand`` of a number) -- the same value in every position, so the same bits, and the
    kernel reads no array (a stride-0 array would run a kernel of any layout, unvectorised).
    """
    return x.size == 1 or not any(x.strides)


def _value(x):
    """The number a by-value operand passes (a NumPy scalar of its dtype)."""
    return x.flat[0] if type(x) is _ndarray else x


def _run_broadcast(op, operands, pargs, cdt, odt, out):
    """Broadcasting: a ``rows`` kernel when one split of the output shape makes every array
    full, a row or a column (contiguous); else the ``strided`` kernel over 2-D views. The
    choice (kernel, rows, columns) is made once per op, dtypes and operand layouts."""
    shape = out.shape
    key = (op, cdt, odt, shape, *[
        (x.shape, x.flags.c_contiguous) if type(x) is _ndarray and not by_value(x) else None
        for x in operands])
    plan = _broadcast_plans.get(key, _MISSING)
    if plan is _MISSING:
        if len(_broadcast_plans) >= 4096:  # (bounded: shapes that change every call)
            _broadcast_plans.clear()
        plan = _broadcast_plans[key] = _rows_plan(op, operands, cdt, odt, shape)
    if plan is None:
        return _run_strided(op, operands, pargs, cdt, odt, out)
    fn, R, C = plan
    args, numbers = [], []
    for x in operands:
        if type(x) is _ndarray and not by_value(x):
            args.append(x.reshape(-1))
        else:
            numbers.append(_value(x))
    _run_rows(fn, R, C, (*args, *numbers, *pargs, out.reshape(-1)))
    return out


_broadcast_plans: dict = {}
_MISSING = object()


def broadcast_pair(op: OpDef, a: np.ndarray, b: np.ndarray):
    """``op(a, b)`` for two host arrays of one float dtype and different shapes whose
    broadcast one ``rows`` kernel computes (a bias row, a column...), or None: the plan
    (kernel, rows, columns, output shape) is kept per op, shapes, strides and dtype, so a
    repeated call skips :func:`run`'s general preparation. The same kernel on the same
    views as :func:`run`'s: the same bits. (The caller checked the types and the dtype.)"""
    key = (op, a.shape, a.strides, b.shape, b.strides, a.dtype)
    plan = _pair_plans.get(key, _MISSING)
    if plan is _MISSING:
        if len(_pair_plans) >= 4096:
            _pair_plans.clear()
        plan = _pair_plans[key] = _pair_plan(op, a, b)
    if plan is None:
        return None
    fn, R, C, shape, odt = plan
    out = _empty(shape, odt)
    run_sized(fn, R, R * C, (R, C, a.reshape(-1), b.reshape(-1), out.reshape(-1)))
    return out


_pair_plans: dict = {}


def _pair_plan(op: OpDef, a: np.ndarray, b: np.ndarray):
    dt = a.dtype
    if op.expr is None or op.params or (dt != _F32 and dt != _F64) or \
            not _elementwise_kernels() or by_value(a) or by_value(b):
        return None
    shape = broadcast_shapes(a.shape, b.shape)  # (PyTorch's error where they do not)
    if not math.prod(shape):
        return None
    odt = np.dtype(np.bool_) if op.dtype_rule == "bool" else dt
    rows = _rows_plan(op, (a, b), _F32 if dt == _F32 else _F64, odt, shape)
    return None if rows is None else (*rows, shape, odt)


def _rows_plan(op, operands, cdt, odt, shape):
    """``(rows kernel, R, C)`` for the first split of ``shape`` (from the right) at which
    every array operand is full, a row or a column and contiguous; None when there is none
    (the strided kernel runs)."""
    from ..compiler.fusion import operand_fits, pattern

    arrays = [x for x in operands if type(x) is _ndarray and not by_value(x)]
    for p in range(len(shape) - 1, 0, -1):
        if all(operand_fits(x.shape, shape, p) and x.flags.c_contiguous for x in arrays):
            pats = tuple(pattern(x.shape, shape, p) if type(x) is _ndarray and not by_value(x)
                         else "arg" for x in operands)
            return (kernel_fn(op, cdt, pats, "rows", odt), math.prod(shape[:p]),
                    math.prod(shape[p:]))
    return None


def _run_rows(fn, R: int, C: int, args: tuple) -> None:
    run_sized(fn, R, R * C, (R, C, *args))


def _run_strided(op, operands, pargs, cdt, odt, out):
    shape = out.shape
    views, numbers, pats = [], [], []
    for x in operands:
        if type(x) is _ndarray and not by_value(x):
            pats.append("strided")
            views.append(np.broadcast_to(x, shape))
        else:
            pats.append("arg")
            numbers.append(_value(x))
    fn = kernel_fn(op, cdt, tuple(pats), "strided", odt)
    shape2, strides = _collapse(shape, [out.strides] + [v.strides for v in views])
    if len(shape2) <= 2:
        shape2 = (1,) * (2 - len(shape2)) + shape2
        strides = [(0,) * (2 - len(s)) + s for s in strides]
    as_strided = np.lib.stride_tricks.as_strided
    o_full = as_strided(out, shape2, strides[0])
    v_full = [as_strided(v, shape2, st) for v, st in zip(views, strides[1:])]
    R, C = shape2[-2:]
    for idx in itertools.product(*(range(s) for s in shape2[:-2])):
        args = (*[v[idx] for v in v_full], *numbers, *pargs, o_full[idx])
        _run_rows(fn, R, C, args)
    return out


def _collapse(shape, strides_list):
    """Merge adjacent dims that are contiguous with each other in every operand."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    if not dims:
        return (1,), [(0,) for _ in strides_list]
    new_shape = [shape[dims[0]]]
    new_strides = [[st[dims[0]]] for st in strides_list]
    for d in dims[1:]:
        size = shape[d]
        if all(ns[-1] == st[d] * size for ns, st in zip(new_strides, strides_list)):
            new_shape[-1] *= size
            for ns, st in zip(new_strides, strides_list):
                ns[-1] = st[d]
        else:
            new_shape.append(size)
            for ns, st in zip(new_strides, strides_list):
                ns.append(st[d])
    return tuple(new_shape), [tuple(ns) for ns in new_strides]


def _run_numpy(op: OpDef, operands, params, odt) -> np.ndarray:
    with np.errstate(all="ignore"):
        # only the op's declared params reach the reference (others only name the node)
        r = op.ref(*operands, **{k: params[k] for k in op.params}) if op.params else \
            op.ref(*operands)
    r = np.asarray(r)
    if r.dtype != odt:
        r = r.astype(odt)
    return r


def sum_layout(a, dims: tuple, kind: str, xp=np) -> tuple:
    """``(contiguous array, kind, R, C)`` a sum kernel of ``kind`` ("all", "rows", "cols" or
    "general": the summed dims moved last, then "rows") runs over; ``xp`` makes the copy
    (NumPy, or the CUDA array module)."""
    if kind == "general":
        rest = [i for i in range(a.ndim) if i not in dims]
        a = xp.transpose(a, rest + sorted(dims))
        kind, cut = "rows", len(rest)
    elif kind != "all":
        active = [d for d in range(a.ndim) if a.shape[d] != 1]
        red = [d for d in active if d in dims]
        cut = red[0] if kind == "rows" else red[-1] + 1
    a = xp.ascontiguousarray(a)
    R = math.prod(a.shape[:cut]) if kind != "all" else 1
    return a, kind, R, a.size // R


def sum_kind(shape: tuple, dims: tuple) -> str | None:
    """How a sum over ``dims`` of ``shape`` is computed: "all" (every dim of size > 1
    summed), "rows" (a trailing block), "cols" (a leading block), None (a copy: only size-1
    dims summed) or "general" (anything else: moved last, then "rows"). Size-1 dims are
    ignored, as the fusion pass does, so the kind is the one a fused sum gets."""
    active = [d for d in range(len(shape)) if shape[d] != 1]
    red = [d for d in active if d in dims]
    if len(red) == len(active):
        return "all"
    if not red:
        return None
    k = len(red)
    if red == active[-k:]:
        return "rows"
    if red == active[:k]:
        return "cols"
    return "general"
