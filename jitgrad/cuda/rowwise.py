"""Row kernels on CUDA arrays: softmax, log_softmax, logsumexp and the two backward ops along
one dim, layer norm and its input gradient -- one kernel each (the CPU's are
``kernels/softmax.py`` and ``kernels/nn.py``), where the NumPy formulation would launch five
to ten kernels with a temporary per step.

A kernel is a grid-stride loop over the rows of an ``(R, C)`` array, a block per row. The
row's maximum and its float64 sums are lanes: lane ``q`` of :data:`LANES` visits positions
``q, q + LANES, ...`` (a thread computes lanes ``tid, tid + blockDim...``, so any block size
gives the same lanes), and every thread then combines the lanes in order -- no atomics, and
no result depends on the launch configuration. The arithmetic is the CPU kernels': the
maximum subtracted in the array's dtype, ``exp`` of the array's dtype, the sums in float64
(``sum(exp(x - m))``, ``sum(g * y)``, ``sum(g)``) rounded once to the dtype where the CPU
rounds them, softmax scaled by the float64 ``1 / sum``; a row holding +inf, or only -inf,
gives NaNs in softmax and log_softmax, and logsumexp masks an infinite maximum to 0, as
PyTorch. Layer norm is the
CPU's two-pass float64 mean and variance, ``(x - mean) * rstd * w + b`` in float64 rounded
once. What differs from the CPU: the sums' order (the CPU's kernels may reassociate them)
and ``exp``/``log`` (libdevice's on a GPU, NumPy's in the simulator, vmath's on the CPU), so
CUDA and CPU agree to a few ulp (``tests/cuda/test_rowwise_cuda.py``); eager and compiled
CUDA run the same kernels and have the same bits.

The kernels are rendered per dtype from one template and loaded through the compiler's
content-addressed cache (``compiler/cache.py``), so a warm process compiles nothing.
"""

from __future__ import annotations

import numpy as np

from . import fast_launch, runtime

__all__ = ["rowwise_cuda", "layer_norm_cuda", "LANES", "kernels", "row_grid"]

#: lanes of a row's maximum and sums
LANES = 128
#: threads per block in Numba's simulator, which runs a Python thread per CUDA thread: few
#: (the lanes make the bits independent of the block size; tests check 8 against this)
SIM_THREADS = 2

_TEMPLATE = '''import math

import numpy as np
from numba import cuda, float64, int64, {F}

from jitgrad.cuda.device_math import exp_{s} as exp, log_{s} as log, mul_{s} as mul

F = np.{F}
L = {lanes}
NAN = F(np.nan)
NAN64 = np.float64(np.nan)
INF = F(np.inf)
ZERO = F(0.0)


@cuda.jit(device=True)
def row_max(x, r, mlanes):
    """Row r's largest element, NaN if it holds one (the same value in every thread)."""
    tid = cuda.threadIdx.x
    for q in range(tid, L, cuda.blockDim.x):
        m = -INF
        nan = False
        for c in range(q, x.shape[1], L):
            v = x[r, c]
            nan = nan or v != v
            m = v if v > m else m
        mlanes[q] = NAN if nan else m
    cuda.syncthreads()
    m = mlanes[0]
    for q in range(1, L):
        v = mlanes[q]
        if m == m and (v != v or v > m):
            m = v
    cuda.syncthreads()  # every thread has read the lanes before they are written again
    return m


@cuda.jit(device=True)
def lanes_total(slanes):
    """The float64 lanes (each written by its thread) added in order, in every thread."""
    cuda.syncthreads()
    s = float64(0.0)
    for q in range(L):
        s += slanes[q]
    cuda.syncthreads()
    return s


@cuda.jit(device=True)
def exp_sum(x, r, m, slanes, out):
    """sum(exp(x[r] - m)) in float64 lanes; exp(x[r] - m) stored in out[r] unless out is x."""
    store = out.shape[1] == x.shape[1]
    for q in range(cuda.threadIdx.x, L, cuda.blockDim.x):
        s = float64(0.0)
        for c in range(q, x.shape[1], L):
            e = exp(x[r, c] - m)
            if store:
                out[r, c] = e
            s += e
        slanes[q] = s
    return lanes_total(slanes)


@cuda.jit(device=True)
def row_max_log_sum(x, r, mlanes, slanes, mask_inf):
    """(the row's maximum -- an infinite one masked to 0 if mask_inf, as logsumexp's, not
    log_softmax's --, log(sum(exp(x[r] - max))))."""
    m = row_max(x, r, mlanes)
    m = ZERO if mask_inf and (m == INF or m == -INF) else m
    return m, log(F(exp_sum(x, r, m, slanes, x[:, :0])))


@cuda.jit(device=True)
def row_logsumexp(x, r, mlanes, slanes):
    """log(sum(exp(x[r]))) shifted by the row's maximum (an infinite one masked to 0)."""
    m, ls = row_max_log_sum(x, r, mlanes, slanes, True)
    return m + ls


@cuda.jit(cache=True)
def softmax(x, out):
    mlanes = cuda.shared.array(L, {F})
    slanes = cuda.shared.array(L, float64)
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        m = row_max(x, r, mlanes)
        inv = 1.0 / exp_sum(x, r, m, slanes, out)
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            out[r, c] = out[r, c] * inv


@cuda.jit(cache=True)
def log_softmax(x, out):
    mlanes = cuda.shared.array(L, {F})
    slanes = cuda.shared.array(L, float64)
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        m, ls = row_max_log_sum(x, r, mlanes, slanes, False)
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            out[r, c] = (x[r, c] - m) - ls  # (PyTorch's grouping, the CPU kernel's)


@cuda.jit(cache=True)
def logsumexp(x, out):
    mlanes = cuda.shared.array(L, {F})
    slanes = cuda.shared.array(L, float64)
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        v = row_logsumexp(x, r, mlanes, slanes)
        if cuda.threadIdx.x == 0:
            out[r] = v


@cuda.jit(device=True)
def row_sum(g, y, r, times_y, slanes):
    """sum(g[r] * y[r]) (or sum(g[r])) in float64 lanes, rounded to the dtype."""
    for q in range(cuda.threadIdx.x, L, cuda.blockDim.x):
        s = float64(0.0)
        for c in range(q, g.shape[1], L):
            s += g[r, c] * y[r, c] if times_y else g[r, c]
        slanes[q] = s
    return F(lanes_total(slanes))


@cuda.jit(cache=True)
def softmax_backward(g, y, out):
    slanes = cuda.shared.array(L, float64)
    for r in range(cuda.blockIdx.x, g.shape[0], cuda.gridDim.x):
        t = row_sum(g, y, r, True, slanes)
        for c in range(cuda.threadIdx.x, g.shape[1], cuda.blockDim.x):
            out[r, c] = y[r, c] * (g[r, c] - t)


@cuda.jit(cache=True)
def log_softmax_backward(g, y, out):
    slanes = cuda.shared.array(L, float64)
    for r in range(cuda.blockIdx.x, g.shape[0], cuda.gridDim.x):
        t = row_sum(g, y, r, False, slanes)
        for c in range(cuda.threadIdx.x, g.shape[1], cuda.blockDim.x):
            out[r, c] = g[r, c] - mul(exp(y[r, c]), t)  # (no FMA: the chain's bits)


@cuda.jit(device=True)
def count_targets(t, ignore_index, C, nlanes, blanes):
    """(targets not ignored, first row whose target is outside [0, C) and not ignored --
    the batch size if none), in every thread of the block."""
    R = t.shape[0]
    for q in range(cuda.threadIdx.x, L, cuda.blockDim.x):
        n = 0
        bad = R
        for r in range(q, R, L):
            v = t[r]
            if v != ignore_index:
                if v < 0 or v >= C:
                    bad = min(bad, r)
                else:
                    n += 1
        nlanes[q] = n
        blanes[q] = bad
    cuda.syncthreads()
    n = 0
    bad = R
    for q in range(L):
        n += nlanes[q]
        bad = min(bad, blanes[q])
    cuda.syncthreads()
    return n, bad


@cuda.jit(device=True)
def target_grad(gv, v, ignore_index, c, n, mean):
    """The NLL gradient at column c of a row whose target is v (``-g / n`` at the target,
    as the CPU computes it: an ignored row's weight 0 at column 0; NaN where a mean has no
    target), else 0; in float64."""
    valid = v != ignore_index
    if c != (v if valid else 0):
        return 0.0
    w = -gv if valid else -gv * 0.0
    if not mean:
        return w
    return NAN64 if n == 0 else w / n


@cuda.jit(device=True)
def ordered_loss(picked, n, mean, slanes):
    """The float64 picks added in lanes (lane q: rows q, q + L, ...) combined in order,
    divided by the count for a mean (NaN where nothing counts), rounded once to the dtype;
    in every thread of the block, once each pick is written."""
    cuda.syncthreads()
    for q in range(cuda.threadIdx.x, L, cuda.blockDim.x):
        s = float64(0.0)
        for r in range(q, picked.shape[0], L):
            s += picked[r]
        slanes[q] = s
    s = lanes_total(slanes)
    if mean:
        s = NAN64 if n == 0 else s / n
    return F(s)


@cuda.jit(cache=True)
def nll_targets(t, ignore_index, C, stats):
    """stats = (targets counted, first out-of-range row): one block."""
    nlanes = cuda.shared.array(L, int64)
    blanes = cuda.shared.array(L, int64)
    n, bad = count_targets(t, ignore_index, C, nlanes, blanes)
    if cuda.threadIdx.x == 0:
        stats[0] = n
        stats[1] = bad


@cuda.jit(cache=True)
def nll_forward(x, t, ignore_index, mean, stats, picked, out):
    """The NLL of log-probabilities x (N, C) at targets t: one block."""
    nlanes = cuda.shared.array(L, int64)
    blanes = cuda.shared.array(L, int64)
    slanes = cuda.shared.array(L, float64)
    C = x.shape[1]
    n, bad = count_targets(t, ignore_index, C, nlanes, blanes)
    for r in range(cuda.threadIdx.x, t.shape[0], cuda.blockDim.x):
        v = t[r]
        picked[r] = -float64(x[r, v]) if v != ignore_index and v >= 0 and v < C else 0.0
    loss = ordered_loss(picked, n, mean, slanes)
    if cuda.threadIdx.x == 0:
        stats[0] = n
        stats[1] = bad
        out[0] = loss


@cuda.jit(cache=True)
def nll_backward(g, t, ignore_index, mean, stats, out):
    """The NLL's input gradient (N, C) for output gradient g[0], stats from nll_targets."""
    n = stats[0]
    gv = float64(g[0])
    C = out.shape[1]
    start = cuda.grid(1)
    for e in range(start, out.shape[0] * C, cuda.gridsize(1)):
        r = e // C
        c = e - r * C
        out[r, c] = F(target_grad(gv, t[r], ignore_index, c, n, mean))


@cuda.jit(cache=True)
def cross_entropy_rows(x, t, ignore_index, mean, g, stats, picked, gx):
    """log_softmax -> nll_loss -> its backward -> log_softmax's backward, a block per row,
    with the bits of the four kernels: each row's picked -log-probability (for
    nll_sum) and its input gradient ``gy - exp(y) * sum(gy)``."""
    mlanes = cuda.shared.array(L, {F})
    slanes = cuda.shared.array(L, float64)
    n = stats[0]
    gv = float64(g[0])
    C = x.shape[1]
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        m, ls = row_max_log_sum(x, r, mlanes, slanes, False)
        v = t[r]
        valid = v != ignore_index and v >= 0 and v < C
        col = v if v != ignore_index else 0
        tot = ZERO  # log_softmax_backward's row sum of gy, float64 rounded once
        if col >= 0 and col < C:
            tot = F(float64(0.0) + float64(F(target_grad(gv, v, ignore_index, col, n, mean))))
        if cuda.threadIdx.x == 0:
            picked[r] = -float64((x[r, v] - m) - ls) if valid else 0.0
        for c in range(cuda.threadIdx.x, C, cuda.blockDim.x):
            gy = F(target_grad(gv, v, ignore_index, c, n, mean))
            gx[r, c] = gy - mul(exp((x[r, c] - m) - ls), tot)


@cuda.jit(cache=True)
def nll_sum(picked, stats, mean, out):
    """The loss from cross_entropy_rows' picks: one block."""
    slanes = cuda.shared.array(L, float64)
    loss = ordered_loss(picked, stats[0], mean, slanes)
    if cuda.threadIdx.x == 0:
        out[0] = loss


@cuda.jit(device=True)
def row_stats(x, r, eps, slanes):
    """Row r's float64 mean and 1 / sqrt(var + eps), two passes as the CPU's."""
    n = x.shape[1]
    for q in range(cuda.threadIdx.x, L, cuda.blockDim.x):
        s = float64(0.0)
        for c in range(q, n, L):
            s += x[r, c]
        slanes[q] = s
    mean = lanes_total(slanes) / n
    for q in range(cuda.threadIdx.x, L, cuda.blockDim.x):
        v = float64(0.0)
        for c in range(q, n, L):
            d = x[r, c] - mean
            v += d * d
        slanes[q] = v
    return mean, 1.0 / math.sqrt(lanes_total(slanes) / n + eps)


@cuda.jit(cache=True)
def layer_norm(x, w, b, has_w, has_b, eps, out):
    slanes = cuda.shared.array(L, float64)
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        mean, rstd = row_stats(x, r, eps, slanes)
        m, rs = F(mean), F(rstd)  # per element in the array's type, as the CPU's kernel
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            y = (x[r, c] - m) * rs
            if has_w:
                y = y * w[c]
            if has_b:
                y = y + b[c]
            out[r, c] = y


@cuda.jit(cache=True)
def layer_norm_backward(g, x, w, has_w, eps, out):
    slanes = cuda.shared.array(L, float64)
    s2lanes = cuda.shared.array(L, float64)
    n = x.shape[1]
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        mean, rstd = row_stats(x, r, eps, slanes)
        m, rs = F(mean), F(rstd)  # per element in the array's type, as the CPU's kernel
        for q in range(cuda.threadIdx.x, L, cuda.blockDim.x):
            s1 = float64(0.0)
            s2 = float64(0.0)
            for c in range(q, n, L):
                a = g[r, c] * w[c] if has_w else g[r, c]
                s1 += a
                s2 += a * ((x[r, c] - m) * rs)
            slanes[q] = s1
            s2lanes[q] = s2
        c1 = F(lanes_total(slanes) / n)
        c2 = F(lanes_total(s2lanes) / n)
        for c in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            a = g[r, c] * w[c] if has_w else g[r, c]
            out[r, c] = rs * (a - c1 - (x[r, c] - m) * rs * c2)
'''

_modules: dict = {}


def kernels(dtype):
    """The module of the five row kernels for float ``dtype`` (rendered, cached, loaded)."""
    dt = np.dtype(dtype)
    mod = _modules.get(dt)
    if mod is None:
        from ..compiler import cache

        F = "float32" if dt == np.float32 else "float64"
        source = _TEMPLATE.format(F=F, s="f32" if F == "float32" else "f64", lanes=LANES)
        mod = _modules[dt] = cache.load_module(source)
    return mod


def row_grid(R: int) -> tuple[int, int]:
    """(blocks, threads) of a launch over ``R`` rows: a block per row, at most
    ``runtime.max_blocks()`` (grid-stride over the rest)."""
    backend = runtime.backend()
    threads = SIM_THREADS if backend == "sim" else min(runtime.THREADS[backend], LANES)
    return max(1, min(R, runtime.max_blocks())), threads


def rowwise_cuda(name: str, arrays: tuple, dim: int, reduce_out: bool = False):
    """Row kernel ``name`` along ``dim`` of float device arrays of one shape and dtype (the
    CUDA counterpart of ``ops.rowwise.rowwise``): another ``dim`` is moved last (one copy on
    the device) and moved back; ``reduce_out``: the result drops ``dim``."""
    xp = runtime.xp()
    a0 = arrays[0]
    last = dim == a0.ndim - 1
    arrs = [xp.ascontiguousarray(a if last else xp.moveaxis(a, dim, -1)) for a in arrays]
    mshape = arrs[0].shape
    C = mshape[-1]
    R = a0.size // C
    out = runtime.empty((R,) if reduce_out else (R, C), a0.dtype)
    fn = getattr(kernels(a0.dtype), name)
    blocks, threads = row_grid(R)
    with np.errstate(all="ignore"):  # the simulator computes with NumPy scalars
        fast_launch.call(fn, blocks, threads,
                         (*[runtime.kernel_arg(a.reshape(R, C), True) for a in arrs],
                          runtime.kernel_arg(out)))
    if reduce_out:
        return out.reshape(mshape[:-1])
    out = out.reshape(mshape)
    return out if last else xp.ascontiguousarray(xp.moveaxis(out, -1, dim))  # row-major


def layer_norm_cuda(name: str, rows, w, b, eps: float, g=None):
    """Layer norm (``name`` "layer_norm") or its input gradient ("layer_norm_backward", for
    the output gradient ``g``) of the ``(R, n)`` device array ``rows`` with the flat weight
    and bias (None: absent); the CUDA counterpart of the CPU's ``kernels/nn.py``."""
    R, n = rows.shape
    out = runtime.empty((R, n), rows.dtype)
    dummy = rows.reshape(-1)[:1]
    wa = dummy if w is None else w
    fn = getattr(kernels(rows.dtype), name)
    blocks, threads = row_grid(R)
    arg = runtime.kernel_arg
    if name == "layer_norm":
        args = (arg(rows, True), arg(wa, True), arg(dummy if b is None else b, True),
                w is not None, b is not None, np.float64(eps))
    else:
        args = (arg(g, True), arg(rows, True), arg(wa, True), w is not None, np.float64(eps))
    with np.errstate(all="ignore"):
        fast_launch.call(fn, blocks, threads, (*args, arg(out)))
    return out
