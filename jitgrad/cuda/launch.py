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

__all__ = ["launch", "run", "read_only", "grid", "elementwise", "elementwise_into",
           "sum_float", "finish_sum", "kernel", "finish_all"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
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
    blocks, threads = grid(desc, n, R, C)
    sizes = (n,) if desc.mode == "flat" else (R, C)
    run(kernel(desc), blocks, threads, sizes, read_only(desc, len(args)), args)


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
    eager op's host work is then the output's allocation and the launch."""
    is_dev = runtime.is_device_array
    key = (op, cdt, odt, *[(x.shape, x.flags.c_contiguous) if is_dev(x) else None
                           for x in operands])
    plan = _plans.get(key)
    if plan is None:
        return _elementwise_first(op, operands, params, np.dtype(cdt), np.dtype(odt), key)
    k, blocks, threads, sizes, read_only, out_shape = plan
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


def _elementwise_first(op, operands: tuple, params, cdt, odt, key):
    """:func:`elementwise` for a layout not seen before (or one it cannot reuse: a reference
    implementation, an empty result, a broadcast copied first); remembers the launch under
    ``key`` where it can be reused."""
    from ..compiler.describe import describe_op
    from ..compiler.fusion import operand_fits, pattern

    arrays = [x for x in operands if runtime.is_device_array(x)]
    if op.expr is None or cdt not in (_F32, _F64):
        with np.errstate(all="ignore"):
            r = op.ref(*operands, **{k: params[k] for k in op.params}) if op.params else \
                op.ref(*operands)
        r = r if runtime.is_device_array(r) else runtime.to_device(np.asarray(r))
        return r if r.dtype == odt else r.astype(odt)
    shape = np.broadcast_shapes(*[x.shape for x in arrays]) if arrays else ()
    out = runtime.empty(shape, odt)
    if out.size == 0:
        return out
    pargs = tuple(cdt.type(params[p]) for p in op.params) if op.params else ()
    # a one-element array is read by the kernel ("item"; the CPU passes its value, the same
    # value): passing it by value would copy it to the host, a wait for the device per op
    big = [x for x in arrays if x.size != 1]
    reusable = True
    split = len(shape)
    if not all(x.shape == shape and x.flags.c_contiguous for x in big):
        for p in range(len(shape) - 1, 0, -1):
            if all(operand_fits(x.shape, shape, p) and x.flags.c_contiguous for x in big):
                split = p
                break
        else:  # no split expresses the broadcast: made contiguous on the device
            reusable = False
            xp = runtime.xp()
            operands = tuple(xp.ascontiguousarray(xp.broadcast_to(x, shape))
                             if runtime.is_device_array(x) and x.size != 1 else x
                             for x in operands)
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
    R = math.prod(shape[:split])
    C = math.prod(shape[split:])
    args = (*args, *numbers, *pargs, out.reshape(-1))
    n = out.size
    blocks, threads = grid(desc, n, R, C)
    sizes = (n,) if mode == "flat" else (R, C)
    plan = (kernel(desc), blocks, threads, sizes, read_only(desc, len(args)), shape)
    if reusable:
        if len(_plans) >= MAX_PLANS:  # a program of ever new shapes: start over
            _plans.clear()
        _plans[key] = plan
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
    key = ("into", op, dt, tuple(kinds))
    desc = _plans.get(key)
    if desc is None:
        from ..compiler.describe import describe_op

        desc = _plans[key] = describe_op(op, dt, tuple(kinds), "flat", dt, into=True)
    launch(desc, (*arrays, *numbers), n=a.size)
    return True


def sum_float(a, dims: tuple, keepdim: bool, scale: float = 1.0):
    """``scale * a.sum(dims)`` of a float32/float64 device array: the CPU's order of the same
    kind of sum (blocks in ``a``'s dtype, float64 across blocks), on the device."""
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
    a, kind, R, C = sum_layout(a, dims, kind, xp)
    n = a.size
    desc = describe_sum(dt, kind)
    r = runtime.empty(partials_size(desc, kind, n, R, C), np.float64)
    launch(desc, (a.reshape(-1), r), n=n, R=R, C=C)
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
