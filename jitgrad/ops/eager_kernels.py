"""Runs element-wise ops eagerly on the generated Numba kernels of ``jitgrad.kernels.eager``.

Float32/float64 ops with a scalar expression run on kernels generated from that expression
(see :mod:`jitgrad.ops.gen_kernels`): a 1-D loop for contiguous same-shape operands (scalars
and one-element operands are passed by value), its ``prange`` twin above
:data:`PARALLEL_MIN_SIZE` elements, and a 2-D strided loop for broadcasting. Integer and bool
ops run on the op's NumPy reference. The kernel modules import (and Numba loads its disk
cache) on the first element-wise op, never at ``import jitgrad``.
"""

from __future__ import annotations

import importlib
import itertools

import numpy as np

from ..kernels.parallel import parallel_ok
from ..trace.state import STATE as _TRACE
from .registry import OpDef

__all__ = ["run", "PARALLEL_MIN_SIZE", "kernel", "fast_kernels", "param_args"]

#: size from which the parallel (``prange``) kernels are used; below it threads cost more
#: than they save. Measured on the 2-core project machine (best of 9, float32, OpenMP layer
#: with passive waiting: a launch costs 40-60 us of thread wake-up), sequential vs parallel:
#: ``mul`` 2^17: 14 vs 59 us, 2^19: 65 vs 103 us, 2^20: 113 vs 104 us; ``tanh`` 2^18: 64 vs
#: 88 us, 2^19: 136 vs 115 us, 2^20: 263 vs 200 us. Compiled plans use the same threshold
#: (asv: ``bench_eager.ParallelThreshold``).
PARALLEL_MIN_SIZE = 1 << 19

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_MODULES = {_F32: "jitgrad.kernels.eager.f32", _F64: "jitgrad.kernels.eager.f64"}
_loaded: dict = {}
_cache: dict = {}
_ndarray = np.ndarray
_empty = np.empty


def _module(dt):
    m = _loaded.get(dt)
    if m is None:
        from .._malloc import tune_allocator
        from ..kernels.parallel import configure_threading

        configure_threading()
        tune_allocator()
        m = _loaded[dt] = importlib.import_module(_MODULES[dt])
    return m


def kernel(name: str, dt, variant: str):
    """The generated kernel ``{name}_{variant}`` for dtype ``dt`` (``1d``, ``1d_par``, ``2d``)."""
    key = (name, dt, variant)
    k = _cache.get(key)
    if k is None:
        k = _cache[key] = getattr(_module(dt), f"{name}_{variant}")
    return k


def use_kernels() -> bool:
    """False while ``jitgrad.compile`` traces: the trace runs on the NumPy references (the
    compiled plan computes the values; loading or compiling eager kernels would only add
    first-call latency)."""
    return _TRACE.tracer is None


def fast_kernels(op: OpDef, dt):
    """``(kernel_1d, kernel_1d_par, out_dtype)`` for ``op`` on dtype ``dt``, or None when the
    op has no kernel for it (cached on the op)."""
    ks = None
    if op.expr is not None and (dt == _F32 or dt == _F64):
        dt = _F32 if dt == _F32 else _F64
        odt = np.dtype(np.bool_) if op.dtype_rule == "bool" else dt
        ks = (kernel(op.name, dt, "1d"), kernel(op.name, dt, "1d_par"), odt)
    op.fast_kernels[dt] = ks
    return ks


def param_args(op: OpDef, params, cdt) -> tuple:
    """The op's params as kernel arguments of the compute dtype, in declaration order."""
    t = cdt.type
    return tuple(t(params[p]) for p in op.params)


def _param_args(op: OpDef, params, cdt) -> tuple:
    if not op.params:
        return ()
    t = cdt.type
    return tuple(t(params[p]) for p in op.params)


def run(op: OpDef, operands: tuple, params, cdt, odt) -> np.ndarray:
    """Compute element-wise ``op`` over ``operands`` (arrays of ``cdt`` or scalars)."""
    if op.expr is None or (cdt is not _F32 and cdt is not _F64 and cdt != _F32
                           and cdt != _F64) or not use_kernels():
        return _run_numpy(op, operands, params, odt)
    shape = None
    same = True
    for x in operands:
        if type(x) is _ndarray:
            s = x.shape
            if shape is None:
                shape = s
            elif s != shape:
                same = False
                break
            if not x.flags.c_contiguous:
                same = False
                break
    if shape is None:
        shape = ()
    if same:
        out = _empty(shape, odt)
        n = out.size
        args = tuple(x.reshape(-1) if type(x) is _ndarray else x for x in operands)
        args += _param_args(op, params, cdt)
        variant = "1d_par" if n >= PARALLEL_MIN_SIZE and parallel_ok(n) else "1d"
        kernel(op.name, cdt, variant)(*args, out.reshape(-1))
        return out
    return _run_broadcast(op, operands, params, cdt, odt)


def _run_broadcast(op, operands, params, cdt, odt):
    shapes = [x.shape for x in operands if type(x) is _ndarray]
    out_shape = np.broadcast_shapes(*shapes)
    out = _empty(out_shape, odt)
    if out.size == 0:
        return out
    # one-element operands are scalars; the rest are broadcast (zero-stride) views
    args = []
    views = []
    for x in operands:
        if type(x) is _ndarray and x.size == 1:
            args.append(x.reshape(())[()])
        elif type(x) is _ndarray:
            v = np.broadcast_to(x, out_shape)
            args.append(None)
            views.append((len(args) - 1, v))
        else:
            args.append(x)
    extra = _param_args(op, params, cdt)
    if not views:  # everything was one element
        return run(op, tuple(args), params, cdt, odt).reshape(out_shape)
    shape2, strides = _collapse(out_shape, [out.strides] + [v.strides for _, v in views])
    k2 = kernel(op.name, cdt, "2d")
    if len(shape2) <= 2:
        shape2 = (1,) * (2 - len(shape2)) + shape2
        strides = [(0,) * (2 - len(s)) + s for s in strides]
        o2 = np.lib.stride_tricks.as_strided(out, shape2, strides[0])
        for (i, v), st in zip(views, strides[1:]):
            args[i] = np.lib.stride_tricks.as_strided(v, shape2, st)
        k2(*args, *extra, o2)
        return out
    # more than two non-mergeable dims: loop over the leading ones
    lead = shape2[:-2]
    o_full = np.lib.stride_tricks.as_strided(out, shape2, strides[0])
    v_full = [np.lib.stride_tricks.as_strided(v, shape2, st) for (_, v), st in
              zip(views, strides[1:])]
    for idx in itertools.product(*(range(s) for s in lead)):
        for (i, _), vf in zip(views, v_full):
            args[i] = vf[idx]
        k2(*args, *extra, o_full[idx])
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
