"""Launching generated CUDA kernels, and eager CUDA element-wise ops and sums.

Eager CUDA ops are one-equation groups of the CUDA renderer, as eager CPU ops are of the CPU
renderer: :func:`elementwise` describes the op for the operands' layout
(:func:`jitgrad.compiler.describe.describe_op`), :func:`jitgrad.compiler.kernels.load` renders
it with ``target="cuda"`` and caches it, :func:`launch` runs it. Layouts: operands of the
output's shape and numbers run ``flat``; broadcasting that one split of the output shape
expresses (a bias row, a column) runs ``rows``; anything else is made contiguous on the
device first (CUDA kernels take every array as an argument, contiguous). Sums run the
renderer's one-reduction kernels and :func:`finish_sum` on the device.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float64

from ..compiler.kernel_desc import CHUNK, RBLOCK, KernelDesc
from . import fast_launch, runtime
from .ordered_sum import column_total

__all__ = ["launch", "resolve", "run", "read_only", "grid", "elementwise", "same_layout",
           "elementwise_into",
           "sum_float", "finish_sum", "kernel", "finish_all"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)
_kernels: dict = {}
_plans: dict = {}   # (op, dtypes, operand layouts) -> an eager op's launch (elementwise)
MAX_PLANS = 4096


def kernel(desc: KernelDesc):
    """The compiled CUDA kernel of ``desc`` (rendered and cached on first request)."""
    k = _kernels.get(desc)
    if k is None:
        from ..compiler import kernels

        k = _kernels[desc] = kernels.load(desc, target="cuda").fn
    return k


def grid(desc: KernelDesc, n: int, R: int, C: int) -> tuple[int, int]:
    """(blocks, threads) of a launch: enough blocks for the work, at most
    ``runtime.max_blocks()`` (grid-stride loops cover the rest)."""
    threads = runtime.THREADS[runtime.backend()]
    if desc.mode == "cols":
        work = col_segments(R) * C
    elif desc.reductions:
        work = ((n + CHUNK - 1) // CHUNK if desc.mode == "flat" else
                row_segments(C) * R) * threads
    else:
        work = n if desc.mode == "flat" else R * C
    return runtime.blocks_for(work, threads), threads


def col_segments(R: int) -> int:
    """Row segments of a ``cols`` sum over ``R`` rows (each a float64 partial per column)."""
    return (R + RBLOCK - 1) // RBLOCK


def row_segments(C: int) -> int:
    """Segments of a ``rows`` sum over ``C`` columns (each a float64 partial per row)."""
    return (C + CHUNK - 1) // CHUNK


def partials_size(desc: KernelDesc, kind: str, n: int, R: int, C: int) -> int:
    """Length of the float64 partials a CUDA kernel of ``desc`` writes for a sum of
    ``kind``: per segment and column (``cols``) or row (``rows``), per chunk (``all``)."""
    if kind == "cols":
        return col_segments(R) * C
    if kind == "rows":
        return row_segments(C) * R
    return desc.partials(kind, n, R, C)


def launch(desc: KernelDesc, args: tuple, n: int = 0, R: int = 0, C: int = 0) -> None:
    """Run the kernel of ``desc`` over its space (``n`` elements, or ``R x C``) with
    ``args`` (device arrays and NumPy scalars, in ``signature_cuda`` order after the
    sizes)."""
    if (n if desc.mode == "flat" else R * C) == 0 and not desc.reductions:
        return
    run(*resolve(desc, len(args), n, R, C), args)


def resolve(desc: KernelDesc, n_args: int, n: int = 0, R: int = 0, C: int = 0) -> tuple:
    """``(kernel, blocks, threads, sizes, read_only)``: what :func:`run` takes to launch
    ``desc``'s kernel with ``n_args`` arguments over ``n`` elements or ``R x C``, resolved
    once for launches that repeat (the kernel compiled, or loaded, now)."""
    blocks, threads = grid(desc, n, R, C)
    return (kernel(desc), blocks, threads, (n,) if desc.mode == "flat" else (R, C),
            read_only(desc, n_args))


def _remember(key, plan: tuple) -> None:
    """Keep an eager launch under ``key`` (a program of ever new shapes starts over)."""
    if len(_plans) >= MAX_PLANS:
        _plans.clear()
    _plans[key] = plan


def read_only(desc: KernelDesc, n_args: int) -> tuple:
    """Per argument of ``desc``'s kernel (after the sizes): whether the kernel only reads it
    (the simulator then copies nothing back into it)."""
    written = {0} if desc.into else {m for _, m in desc.aliases}
    reads = len(desc.operands)
    return tuple(i < reads and i not in written for i in range(n_args))


def run(k, blocks: int, threads: int, sizes: tuple, read_only: tuple, args) -> None:
    """Launch compiled kernel ``k`` over ``sizes`` with ``args`` (``read_only`` per arg)."""
    if runtime.backend() == "gpu":  # CuPy arrays are the kernel's arguments as they are
        fast_launch.call(k, blocks, threads, (*sizes, *args))
    else:
        argv = (*sizes, *[runtime.kernel_arg(a, ro) for a, ro in zip(args, read_only)])
        with np.errstate(all="ignore"):  # the simulator computes with NumPy scalars
            fast_launch.call(k, blocks, threads, argv)


def elementwise(op, operands: tuple, params, cdt, odt):
    """Element-wise ``op`` on CUDA: operands are device arrays of ``cdt`` or NumPy scalars
    (``no_promote`` inputs keep their dtype); a new device array of ``odt``.

    A call whose operands have the layout of an earlier call (each array's shape and
    contiguity, each number's place) reuses that call's launch (kernel, grid, sizes): an
    eager op's host work is then the output's allocation and the launch. A broadcast view
    (stride 0, as the backward of a sum or ``expand`` makes) is given to the kernel as the
    array it was made from, which the kernel broadcasts itself."""
    is_dev = runtime.is_device_array
    key = (op, cdt, odt, *[(x.shape, x.flags.c_contiguous) if is_dev(x) else None
                           for x in operands])
    plan = _plans.get(key)
    if plan is None:
        shape = None
        if any(is_dev(x) and not x.flags.c_contiguous and 0 in x.strides for x in operands):
            shape = np.broadcast_shapes(*[x.shape for x in operands if is_dev(x)])
            operands = tuple(_unexpanded(x) if is_dev(x) else x for x in operands)
            key = (op, cdt, odt, shape, *[(x.shape, x.flags.c_contiguous) if is_dev(x)
                                          else None for x in operands])
            plan = _plans.get(key)
        if plan is None:
            return _elementwise_first(op, operands, params, np.dtype(cdt), np.dtype(odt),
                                      key, shape)
    return _replay(plan, op, operands, params, cdt, odt)


def _replay(plan: tuple, op, operands: tuple, params, cdt, odt):
    """:func:`elementwise` through the launch ``plan`` an earlier call of the layout made."""
    is_dev = runtime.is_device_array
    k, blocks, threads, sizes, read_only, out_shape, dense = plan
    if dense:
        operands = _dense(operands, out_shape)
    out = runtime.empty(out_shape, odt)
    arrays = [x for x in operands if is_dev(x)]
    args = [x if x.ndim == 1 else x.reshape(-1) for x in arrays]
    if len(arrays) != len(operands):
        args += [x for x in operands if not is_dev(x)]  # numbers, in order
    if op.params:
        args += [cdt.type(params[p]) for p in op.params]
    args.append(out if out.ndim == 1 else out.reshape(-1))
    run(k, blocks, threads, sizes, read_only, args)
    return out


def same_layout(op, operands: tuple, params):
    """Eager ``op`` on ``operands`` -- a float32/float64 device array first, then device
    arrays of its shape and dtype or NumPy scalars of its dtype, which ``op`` computes in
    that dtype: the eager hot path of a CUDA op, :func:`elementwise` without the general
    path's promotion and device checks, its launch found by a key built in one pass. None,
    with nothing done, when an operand is a host array (the general path raises)."""
    is_dev = runtime.is_device_array
    x = operands[0]
    if not is_dev(x):
        return None
    dt = x.dtype
    key = [op, dt, _BOOL if op.dtype_rule == "bool" else dt]
    for y in operands:
        if is_dev(y):
            key.append((x.shape, y.flags.c_contiguous))
        elif isinstance(y, np.generic):
            key.append(None)
        else:
            return None
    plan = _plans.get(tuple(key))
    if plan is None:
        return elementwise(op, operands, params, dt, key[2])
    return _replay(plan, op, operands, params, dt, key[2])


def _unexpanded(x):
    """Device array ``x`` with each broadcast dimension (stride 0, length > 1) cut to
    length 1: the array a broadcast view was made from (a view, no copy)."""
    if x.flags.c_contiguous or 0 not in x.strides:
        return x
    return x[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None)
                   for n, st in zip(x.shape, x.strides))]


def _dense(operands: tuple, shape: tuple) -> tuple:
    """``operands`` with each device array of more than one element broadcast to ``shape``
    and made contiguous on the device (a layout no split of ``shape`` expresses)."""
    xp = runtime.xp()
    return tuple(xp.ascontiguousarray(xp.broadcast_to(x, shape))
                 if runtime.is_device_array(x) and x.size != 1 else x for x in operands)


def _elementwise_first(op, operands: tuple, params, cdt, odt, key, shape=None):
    """:func:`elementwise` for a layout not seen before: describes the op for it, launches
    it and remembers the launch under ``key`` (operands of a layout no split expresses, a
    transposed one say, are made contiguous first, at every call). ``shape``: the output's
    (default: the operands' broadcast). A reference implementation and an empty result are
    not remembered."""
    from ..compiler.describe import describe_op
    from ..compiler.fusion import operand_fits, pattern

    arrays = [x for x in operands if runtime.is_device_array(x)]
    if op.expr is None or cdt not in (_F32, _F64):
        with np.errstate(all="ignore"):
            r = op.ref(*operands, **{k: params[k] for k in op.params}) if op.params else \
                op.ref(*operands)
        r = r if runtime.is_device_array(r) else runtime.to_device(np.asarray(r))
        if r.shape != shape and shape is not None:  # unexpanded operands: broadcast back
            r = runtime.xp().ascontiguousarray(runtime.xp().broadcast_to(r, shape))
        return r if r.dtype == odt else r.astype(odt)
    if shape is None:
        shape = np.broadcast_shapes(*[x.shape for x in arrays]) if arrays else ()
    out = runtime.empty(shape, odt)
    if out.size == 0:
        return out
    pargs = tuple(cdt.type(params[p]) for p in op.params) if op.params else ()
    # a one-element array is read by the kernel ("item"; the CPU passes its value, the same
    # value): passing it by value would copy it to the host, a wait for the device per op
    big = [x for x in arrays if x.size != 1]
    dense = False
    split = len(shape)
    if not all(x.shape == shape and x.flags.c_contiguous for x in big):
        for p in range(len(shape) - 1, 0, -1):
            if all(operand_fits(x.shape, shape, p) and x.flags.c_contiguous for x in big):
                split = p
                break
        else:  # no split expresses the layout: made contiguous on the device
            dense = True
            operands = _dense(operands, shape)
    mode = "flat" if split == len(shape) else "rows"
    pats, args, numbers = [], [], []
    for x in operands:
        if runtime.is_device_array(x):
            pats.append("item" if x.size == 1 else
                        "full" if mode == "flat" else pattern(x.shape, shape, split))
            args.append(x.reshape(-1))
        else:  # a number
            pats.append("arg")
            numbers.append(x)
    desc = describe_op(op, cdt, tuple(pats), mode, odt)
    args = (*args, *numbers, *pargs, out.reshape(-1))
    plan = (*resolve(desc, len(args), out.size, math.prod(shape[:split]),
                     math.prod(shape[split:])), shape, dense)
    _remember(key, plan)
    run(*plan[:5], args)
    return out


def elementwise_into(op, a, rest: tuple, params) -> bool:
    """``a`` (a C-contiguous float32/float64 device array) becomes ``op(a, *rest)``,
    computed into its own memory by one kernel (no result array, no copy back): ``rest``
    holds device arrays of ``a``'s shape and dtype that do not overlap it (``a`` itself may
    be among them) and Python numbers. The out-of-place kernel's arithmetic (each element
    is read before it is written). False, with nothing done, when the case does not apply."""
    dt = a.dtype
    if op.expr is None or (dt != _F32 and dt != _F64) or op.dtype_rule == "bool" \
            or op.nin != 1 + len(rest) or not a.flags.c_contiguous:
        return False
    xp = runtime.xp()
    kinds, arrays, numbers = ["full"], [a.reshape(-1)], []
    for b in rest:
        if runtime.is_device_array(b):
            if b.dtype != dt or b.shape != a.shape or not b.flags.c_contiguous or (
                    b is not a and xp.may_share_memory(a, b)):
                return False
            kinds.append("full")
            arrays.append(b.reshape(-1))
        elif type(b) in (float, int):
            kinds.append("arg")
            numbers.append(dt.type(b))
        else:
            return False
    if op.params:
        numbers += [dt.type(params[p]) for p in op.params]
    n = a.size
    key = ("into", op, dt, n, *kinds)
    plan = _plans.get(key)
    if plan is None:
        from ..compiler.describe import describe_op

        desc = describe_op(op, dt, tuple(kinds), "flat", dt, into=True)
        plan = (*resolve(desc, len(arrays) + len(numbers), n), n == 0)
        _remember(key, plan)
    k, blocks, threads, sizes, ro, empty = plan
    if not empty:
        run(k, blocks, threads, sizes, ro, (*arrays, *numbers))
    return True


def sum_float(a, dims: tuple, keepdim: bool, scale: float = 1.0):
    """``scale * a.sum(dims)`` of a float32/float64 device array: the CPU's order of the same
    kind of sum (blocks in ``a``'s dtype, float64 across blocks), on the device. A sum of a
    C-contiguous array reuses the launch an earlier sum of its shape made."""
    dt = a.dtype
    key = ("sum", dt, a.shape, dims, keepdim)
    plan = _plans.get(key) if a.flags.c_contiguous else None
    if plan is None:
        return _sum_first(a, dims, keepdim, scale, key)
    k, blocks, threads, sizes, ro, n_partials, kind, out_shape = plan
    r = runtime.empty(n_partials, np.float64)
    run(k, blocks, threads, sizes, ro, (a if a.ndim == 1 else a.reshape(-1), r))
    return finish_sum(r, kind, scale, dt, out_shape)


def _sum_first(a, dims: tuple, keepdim: bool, scale: float, key: tuple):
    """:func:`sum_float` without a launch to reuse: describes and launches the sum, and
    remembers the launch under ``key`` when ``a`` is C-contiguous and not empty."""
    from ..compiler.describe import describe_sum
    from ..ops.eager_kernels import sum_kind, sum_layout

    dt = a.dtype
    out_shape = tuple(1 if i in dims else s for i, s in enumerate(a.shape)) if keepdim else \
        tuple(s for i, s in enumerate(a.shape) if i not in dims)
    kind = sum_kind(a.shape, dims)
    xp = runtime.xp()
    if kind is None:
        return (a.astype(np.float64) * scale).astype(dt).reshape(out_shape)
    if a.size == 0:
        with np.errstate(invalid="ignore"):
            r = xp.sum(a, axis=dims, keepdims=keepdim, dtype=np.float64) * scale
        return r.astype(dt).reshape(out_shape)
    reusable = kind != "general" and a.flags.c_contiguous
    a, kind, R, C = sum_layout(a, dims, kind, xp)
    n = a.size
    desc = describe_sum(dt, kind)
    n_partials = partials_size(desc, kind, n, R, C)
    plan = (*resolve(desc, 2, n, R, C), n_partials, kind, out_shape)
    if reusable:
        _remember(key, plan)
    r = runtime.empty(n_partials, np.float64)
    run(*plan[:5], (a.reshape(-1), r))
    return finish_sum(r, kind, scale, dt, out_shape)


def finish_sum(partials, kind: str, scale: float, dtype, shape):
    """A sum's value from its kernel's float64 partials, on the device: ``all`` adds the
    partials in order in float64 (one thread), ``cols`` and ``rows`` each column's or row's
    (a thread each); then ``* scale`` in float64, rounded once to ``dtype``."""
    dtype = np.dtype(dtype)
    if kind == "all":
        out = runtime.empty(1, dtype)
        with np.errstate(all="ignore"):
            threads = 1 if runtime.backend() == "sim" else runtime.THREADS["gpu"]
            fast_launch.call(finish_all, 1, threads,
                             (runtime.kernel_arg(partials, True),
                              np.float64(scale), runtime.kernel_arg(out)))
        return out.reshape(shape)
    count = math.prod(shape)  # columns or rows
    out = runtime.empty(count, dtype)
    if count:
        threads = runtime.THREADS[runtime.backend()]
        blocks = runtime.blocks_for(count, threads)
        with np.errstate(all="ignore"):
            parts = partials.reshape(partials.size // count, count)
            fast_launch.call(finish_segments, blocks, threads,
                             (runtime.kernel_arg(parts, True), np.float64(scale),
                              runtime.kernel_arg(out)))
    return out.reshape(shape)


#: partials staged in shared memory per pass of :func:`finish_all`
FINISH_SEGMENT = 1024


@cuda.jit(cache=True)
def finish_segments(partials, scale, out):
    """Output ``j``'s partials ``partials[:, j]`` (segments x outputs: a column's row
    segments, a row's column segments) added in segment order in float64 (a thread per
    output: neighbours read neighbouring partials), scaled, rounded once."""
    for j in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[j] = column_total(partials, j, 0.0) * scale


@cuda.jit(cache=True)
def finish_all(partials, scale, out):
    """The partials added in order in float64 by thread 0, scaled, rounded once. The block
    stages them in shared memory a segment at a time (coalesced loads), so thread 0's
    sequential adds read shared memory instead of waiting on each global load."""
    buf = cuda.shared.array(FINISH_SEGMENT, float64)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = partials.shape[0]
    s = 0.0
    for base in range(0, n, FINISH_SEGMENT):
        m = min(FINISH_SEGMENT, n - base)
        for q in range(tid, m, nt):
            buf[q] = partials[base + q]
        cuda.syncthreads()
        if tid == 0:
            for q in range(m):
                s += buf[q]
        cuda.syncthreads()
    if tid == 0:
        if scale != 1.0:
            s = s * scale
        out[0] = s
