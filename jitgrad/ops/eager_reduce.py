"""Eager float sums and means as one-reduction kernels of the compiler's pipeline (the order
of a fused sum of the same kind: eager and compiled sums are bit-identical; integer and bool
sums run on NumPy in int64), and the row-wise softmax family's kernels."""

from __future__ import annotations

import numpy as np

from ..kernels.parallel import HOT_MIN_SIZE
from ..kernels.pool import run_sized
from .eager_kernels import on_device, sum_kind, sum_layout, use_kernels

__all__ = ["sum_float", "sum_all_small"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_sum_fns: dict = {}
_mod = None


def _kernels():
    global _mod
    if _mod is None:
        from ..kernels import reduce as mod

        _mod = mod
    return _mod


def trig_out_of_domain(name: str, a: np.ndarray) -> bool:
    """Whether some element of float ``a`` lies outside the vectorised sin/cos domain."""
    from ..kernels.vmath import ACCURATE_DOMAIN

    limit = ACCURATE_DOMAIN.get((name, "float32" if a.dtype == _F32 else "float64"))
    if limit is None or not use_kernels() or on_device((a,)):  # CUDA: libdevice, any x
        return False
    m = _kernels().max_abs(np.ascontiguousarray(a).reshape(-1))
    return not m < limit  # NaN takes the libm path too (both give NaN)


def _sum_fn(dtype, kind: str):
    key = (dtype, kind)
    fn = _sum_fns.get(key)
    if fn is None:
        from ..compiler import kernels
        from ..compiler.describe import describe_sum

        fn = _sum_fns[key] = kernels.load(describe_sum(dtype, kind)).fn
    return fn


_all_entries: dict = {}
_CHUNK: list = []


def _all_entry(dt):
    """The compiled entry point of the ``all`` sum kernel for 1-D C-contiguous aligned
    arrays of float ``dt``: ``entry(lo, hi, n, a, partials)`` (see
    :func:`jitgrad.ops.eager_kernels.flat_entry`: the dispatcher's machine code without its
    per-call type resolution)."""
    from numba.core import types as nt

    from ..compiler.kernel_desc import CHUNK

    item = nt.float32 if dt == _F32 else nt.float64
    fn = _sum_fn(dt, "all")
    e = _all_entries[dt] = fn.compile((nt.int64, nt.int64, nt.int64, nt.Array(item, 1, "C"),
                                       nt.Array(nt.float64, 1, "C")))
    if not _CHUNK:
        _CHUNK.append(CHUNK)
    return e


def sum_all_small(a: np.ndarray) -> np.ndarray | None:
    """The sum of every element of ``a`` as :func:`sum_float` computes it (the same kernel
    and order: the same bits), without its general bookkeeping -- the hot call of eager code
    (a loss): a 0-dim array, or None where this is not the case (CUDA, another dtype, empty,
    not C-contiguous and aligned, ``HOT_MIN_SIZE`` elements or more, tracing)."""
    dt = a.dtype
    if type(a) is not np.ndarray or not (dt is _F32 or dt is _F64):
        return None
    n = a.size
    if n == 0 or n >= HOT_MIN_SIZE or not (a.flags.c_contiguous and a.flags.aligned) \
            or not use_kernels():
        return None
    entry = _all_entries.get(dt) or _all_entry(dt)
    chunk = _CHUNK[0]
    parts = (n + chunk - 1) // chunk
    r = np.empty(parts)
    entry(0, parts, n, a.reshape(-1), r)
    if parts == 1:  # its partial is the sum
        return np.asarray(r[0], dt)
    from ..compiler.kernels import ordered_total

    return np.asarray(ordered_total(r), dt)


#: ``(dtype, shape, dims, keepdim)`` of a C-contiguous host array -> what :func:`sum_float`
#: derived for it: ``(kernel, kind, R, C, parts, partials, out_shape)``. A repeated sum (a
#: training loop's) then skips the kind, layout and shape bookkeeping (and the imports): 14
#: -> 9 us of a 64x128 float32 row sum, whose kernel takes 6 us.
_layouts: dict = {}
_LAYOUTS_MAX = 512


def sum_float(a: np.ndarray, dims: tuple, keepdim: bool, scale: float = 1.0) -> np.ndarray:
    """``scale * a.sum(dims)`` for float ``a``: blocked in ``a``'s dtype, float64 across
    blocks, in the order a fused sum of the same kind uses (float16 in float32, rounded to
    float16 at the end)."""
    if type(a) is np.ndarray and a.flags.c_contiguous:
        lay = _layouts.get((a.dtype, a.shape, dims, keepdim))
        if lay is not None and use_kernels():
            fn, kind, R, C, parts, n_partials, out_shape, finish = lay
            r = np.empty(n_partials)
            run_sized(fn, parts, a.size, (R, C, a.reshape(-1), r) if kind != "all" else
                      (a.size, a.reshape(-1), r))
            return finish(r, kind, scale, a.dtype, out_shape)
    return _sum_float(a, dims, keepdim, scale)


def _sum_float(a: np.ndarray, dims: tuple, keepdim: bool, scale: float) -> np.ndarray:
    from ..compiler.kernel_desc import CHUNK, COLBLOCK
    from ..compiler.kernels import finish_sum

    dt = a.dtype
    if dt != _F32 and dt != _F64:  # float16: added in float32, as PyTorch's sums of halves
        return sum_float(a.astype(_F32), dims, keepdim, scale).astype(dt)
    if on_device((a,)):
        from ..cuda.launch import sum_float as sum_on_device

        return sum_on_device(a, dims, keepdim, scale)
    out_shape = tuple(1 if i in dims else s for i, s in enumerate(a.shape)) if keepdim else \
        tuple(s for i, s in enumerate(a.shape) if i not in dims)
    kind = sum_kind(a.shape, dims)
    if a.size == 0 or kind is None or not use_kernels():
        with np.errstate(invalid="ignore"):
            r = np.sum(a, axis=dims, keepdims=keepdim, dtype=np.float64) * scale
        return np.asarray(r, dtype=dt).reshape(out_shape)
    key = (dt, a.shape, dims, keepdim) if kind != "general" and type(a) is np.ndarray \
        and a.flags.c_contiguous else None
    a, kind, R, C = sum_layout(a, dims, kind)
    n = a.size
    fn = _sum_fn(dt, kind)
    flat = a.reshape(-1)
    if kind == "all":
        parts = (n + CHUNK - 1) // CHUNK
        r = np.empty(max(parts, 1))
        args = (n, flat, r)
    else:
        parts = R if kind == "rows" else (C + COLBLOCK - 1) // COLBLOCK
        r = np.empty(R if kind == "rows" else C)
        args = (R, C, flat, r)
    run_sized(fn, parts, n, args)  # same bits either way
    if key is not None:
        if len(_layouts) >= _LAYOUTS_MAX:
            _layouts.clear()
        _layouts[key] = (fn, kind, R, C, parts, r.size, out_shape, finish_sum)
    return finish_sum(r, kind, scale, dt, out_shape)

