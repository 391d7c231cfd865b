"""Classifier heads a plan runs as one step: the linear layer before a cross-entropy chain,
the chain, and the product that carries its gradient back.

A training step ends in ``x = addmm(b, h, w)`` (or ``h @ w``), the cross-entropy chain over
``x`` (``chains.py``: ``loss`` and ``gx``) and ``dh = gx @ w2`` (``w2`` the weight, for the
layer below). Where a plan holds these and nothing else reads ``x``, the ``addmm`` step runs
the three in one kernel over ranges of rows (``kernels/classifier_head``), each range's data
still in its core's cache, then the weight's gradient ``gx.T @ h`` in ranges of its
columns (MLP step, batch 1024: 375-454 us in the plan as four steps, 256-314 us as one).
The other steps do nothing. The bias's ``sum(gx)`` stays where it is: it reads ``gx``,
which the head sets.

The kernel's GEMMs are NumPy's own ``cblas_?gemm`` calls, so with one part (the whole batch)
the step computes what the separate calls do, bit for bit. Split into ranges of rows across
the pool, a GEMM of a range is only the same as the whole product's rows where OpenBLAS runs
both alike; :func:`head_parts` checks that once per shapes, layouts and part count by
running both on random data of those shapes, and uses one part where they differ. Anything
the kernel does not take at run time (a target out of range or ignored, another layout)
runs the separate functions: their results and errors. ``JITGRAD_FUSED_HEAD=0`` keeps the
separate steps (for A/B measurements).
"""

from __future__ import annotations

import os

import numpy as np

from ..trace.ir import Lit, Var
from .chains import is_2d_transpose, nothing, step_readers_and_positions

__all__ = ["fused_heads", "head_parts", "MIN_PART_ROWS"]

#: rows from which a part of its own is worth it: a part's GEMMs and its cross-entropy rows
#: (1024 x 256 -> 10 float32, two parts: ~170 us vs ~260 us for the separate calls); below
#: it the whole batch is one part on the calling thread
MIN_PART_ROWS = 256

_parts_checked: dict = {}
_CHECKED_MAX = 256


def fused_heads(steps: list, chains: list, ends: set, claimed: set = frozenset()
                ) -> tuple[dict, dict]:
    """``(runners, reads)`` for each head found around ``chains`` (``chains.fused_chains``'
    matches ``(e_in, mid, e_g, e_ig)``): id(eqn) -> its step's runner, and -> what the step
    reads now (for liveness). ``claimed``: indices of steps that write into arrays given
    to them (in-place writes, placements): no head takes those."""
    from ..ops.linalg import MATMUL
    from ..ops.nnops.linear import ADDMM

    if os.environ.get("JITGRAD_FUSED_HEAD", "1") == "0":
        return {}, {}
    readers, position = step_readers_and_positions(steps)
    runners: dict = {}
    reads: dict = {}
    for e_in, mid, e_g, e_ig in chains:
        x = e_in.ins[0]
        k_x = position.get(id(x))
        if k_x is None or steps[k_x].kind != "call" or id(x) in ends or \
                readers.get(id(x)) != [position[id(e_in.out)]]:
            continue
        prod = steps[k_x].eqn
        if prod.op is ADDMM:
            bias, h, w = prod.ins
            if not isinstance(bias, Var) or tuple(bias.shape) != (x.shape[1],):
                continue
        elif prod.op is MATMUL and not prod.params.get("bmm"):
            (h, w), bias = prod.ins, None
        else:
            continue
        t, g = mid.ins[1], e_g.ins[0]
        if x.shape[1] > _small_c():  # wide rows: the kernel would decline every call
            continue
        dt = np.dtype(x.dtype)
        if not all(isinstance(v, Var) and len(v.shape) == 2 and np.dtype(v.dtype) == dt
                   for v in (h, w)) or dt.kind != "f" or \
                mid.params.get("reduction") not in ("mean", "sum"):
            continue
        if not all(_before(v, k_x, position) for v in (h, w, t, g) + (
                () if bias is None else (bias,))):
            continue
        dh_eqn, w2 = _input_grad_product(steps, e_ig.out, k_x, position, MATMUL)
        mine = [k_x] + [position[id(e.out)] for e in (e_in, mid, e_g, e_ig) + (
            () if dh_eqn is None else (dh_eqn,))]
        if claimed.intersection(mine):
            continue
        dw_eqn = _weight_grad_product(steps, e_ig.out, h, MATMUL)
        if dw_eqn is not None and position[id(dw_eqn.out)] in claimed:
            dw_eqn = None  # (written into a given array: its own step)
        runner, read = _head_runner(prod, bias, h, w, t, g, mid, e_ig, dh_eqn, w2, dw_eqn)
        runners[id(prod)] = runner
        reads[id(prod)] = read
        for e in (e_in, mid, e_g, e_ig, dh_eqn, dw_eqn):
            if e is not None:
                runners[id(e)] = nothing
                reads[id(e)] = ()
    return runners, reads


def _small_c() -> int:
    from ..kernels.softmax import SMALL_C  # (the chain's kernels load these anyway)

    return SMALL_C


def _before(v, k: int, position: dict) -> bool:
    """Whether ``v`` exists when step ``k`` runs: a literal, an input or a constant, or the
    value of an earlier step."""
    if not isinstance(v, Var):
        return isinstance(v, Lit) or v is None
    made = position.get(id(v))
    return made is None or made < k


def _input_grad_product(steps, gx, k_x: int, position: dict, matmul):
    """``(eqn, w2)``: the 2-D product ``gx @ w2`` among the plan's calls and its right
    operand as ``(Var, transposed)`` available at step ``k_x`` (the value itself, or the
    input of a 2-D transpose that it is); ``(None, None)`` where there is none."""
    for s in steps:
        e = s.eqn
        if s.kind != "call" or e is None or e.op is not matmul or e.params.get("bmm") or \
                len(e.ins) != 2 or e.ins[0] is not gx:
            continue
        b = e.ins[1]
        if not isinstance(b, Var) or len(b.shape) != 2 or \
                np.dtype(b.dtype) != np.dtype(gx.dtype):
            return None, None
        if _before(b, k_x, position):
            return e, (b, False)
        k_b = position.get(id(b))
        src = steps[k_b].eqn if k_b is not None else None
        if is_2d_transpose(src) and _before(src.ins[0], k_x, position):
            return e, (src.ins[0], True)
        return None, None
    return None, None


def _weight_grad_product(steps, gx, h, matmul):
    """The 2-D product ``gx.T @ h`` (a linear layer's weight gradient in its ``(out, in)``
    layout, ``linalg.rhs_grad``) among the plan's calls, or None."""
    transposes = {id(s.eqn.out) for s in steps
                  if s.kind == "view" and is_2d_transpose(s.eqn) and s.eqn.ins[0] is gx}
    for s in steps:
        e = s.eqn
        if s.kind == "call" and e is not None and e.op is matmul and \
                not e.params.get("bmm") and len(e.ins) == 2 and e.ins[1] is h and \
                id(e.ins[0]) in transposes and \
                np.dtype(e.out.dtype) == np.dtype(gx.dtype):
            return e
    return None


def _head_runner(prod, bias, h, w, t, g, mid, e_ig, dh_eqn, w2, dw_eqn):
    """The step running the head (``plan_head``'s kernel or, where it does not apply, the
    separate functions: eager ``addmm``, the chain, ``linalg._blas_matmul``) and what it
    reads."""
    from ..kernels.classifier_head import plan_head
    from ..ops.linalg import _blas_matmul
    from ..ops.nnops.linear import ADDMM

    chain = mid.op.extra["chain"]
    params = {p: mid.params[p] for p in chain["params"]}
    run_chain = chain["run"]
    reduction, ignore_index = params["reduction"], params["ignore_index"]
    ih, iw, it = id(h), id(w), id(t)
    ib = None if bias is None else id(bias)
    g_var = isinstance(g, Var)
    ig = id(g) if g_var else g.value
    loss_id, gx_id = id(mid.out), id(e_ig.out)
    dh_id = None if dh_eqn is None else id(dh_eqn.out)
    dw_id = None if dw_eqn is None else id(dw_eqn.out)
    i2, flip = (None, False) if w2 is None else (id(w2[0]), w2[1])
    dtype = np.dtype(prod.out.dtype)
    addmm = ADDMM.fwd if bias is not None else None

    def separate(hv, wv, bv, tv, gv, w2v):
        x = addmm(bv, hv, wv) if addmm is not None else _blas_matmul(hv, wv)
        x = x if x.dtype == dtype else x.astype(dtype)
        loss, gx = run_chain(x, tv, gv, **params)
        dh = None if w2v is None else _blas_matmul(gx, w2v)
        dw = None if dw_id is None else _blas_matmul(gx.T, hv)
        return loss, gx, dh, dw

    plans: dict = {}  # operands' strides -> HeadPlan, or None: the separate functions

    def run(env):
        hv, wv, tv = env[ih], env[iw], env[it]
        bv = None if ib is None else env[ib]
        gv = env[ig] if g_var else np.asarray(ig, dtype)
        w2v = None if i2 is None else (env[i2].T if flip else env[i2])
        key = (hv.strides, wv.strides, tv.strides, None if bv is None else bv.strides,
               None if w2v is None else w2v.strides)
        plan = plans.get(key, False)
        if plan is False:
            if len(plans) >= 8:
                plans.clear()
            split = head_parts(hv, wv, bv, w2v, reduction, ignore_index, separate,
                               dw_id is not None)
            plan = plans[key] = plan_head(hv, wv, bv, tv, w2v, reduction, ignore_index, *split,
                                          dw_id is not None)
        out = None if plan is None else plan.run(hv, wv, bv, tv, gv, w2v)
        if out is None:
            out = separate(hv, wv, bv, tv, gv, w2v)
        env[loss_id], env[gx_id] = out[0], out[1]
        if dh_id is not None:
            env[dh_id] = out[2]
        if dw_id is not None:
            env[dw_id] = out[3]

    read = tuple(v for v in (bias, h, w, t, g) if isinstance(v, Var))
    if w2 is not None:
        read += (w2[0],)
    return run, read


def _layout_key(a) -> tuple:
    return (a.shape, a.strides) if a is not None else None


def head_parts(h, w, bias, w2, reduction: str, ignore_index: int, separate,
               weight_grad: bool = False) -> tuple[int, int]:
    """``(rows, columns)``: how many ranges of rows the head of these operands runs in, and
    of columns its weight gradient (with ``weight_grad``): the pool's threads (at most one
    per ``MIN_PART_ROWS`` rows) where that gives the bits of ``separate`` (the separate
    calls) on random data of the same shapes and layouts -- first with the weight gradient
    split too, then whole -- else ``(1, 1)``. Checked once per shapes, layouts, dtype and
    part counts."""
    from ..kernels.classifier_head import blas_thread_count, plan_head
    from ..kernels.pool import pool_threads

    parts = min(pool_threads(), h.shape[0] // MIN_PART_ROWS)
    if parts < 2 or type(h) is not np.ndarray or blas_thread_count() is None:
        return 1, 1
    for split in ((parts, parts), (parts, 1)) if weight_grad else ((parts, 1),):
        key = (h.dtype, split, reduction, ignore_index, _layout_key(h), _layout_key(w),
               _layout_key(bias), _layout_key(w2), weight_grad)
        same = _parts_checked.get(key)
        if same is None:
            if len(_parts_checked) >= _CHECKED_MAX:
                _parts_checked.clear()
            same = _parts_checked[key] = _same_bits(h, w, bias, w2, reduction, ignore_index,
                                                    split, separate, plan_head, weight_grad)
        if same:
            return split
    return 1, 1


def _same_bits(h, w, bias, w2, reduction, ignore_index, split, separate, plan_head,
               weight_grad) -> bool:
    """Whether the head (``plan_head``) in ``split`` ranges (rows, columns) gives
    ``separate``'s bits on random operands of the layouts of ``h``, ``w``, ``bias``, ``w2``
    (``np.empty_like`` keeps a transposed operand transposed; a view into a wider array is
    checked as a compact one)."""
    rng = np.random.default_rng(0)
    dt = h.dtype

    def like(a):
        if a is None:
            return None
        b = np.empty_like(a)
        b[...] = rng.standard_normal(a.shape)
        return b

    hp, wp, bp, w2p = like(h), like(w), like(bias), like(w2)
    np.maximum(hp, 0, out=hp)  # a ReLU's output, as a head's input mostly is
    tp = rng.integers(0, w.shape[1], h.shape[0]).astype(np.int64)
    gp = np.asarray(1.0, dt)
    plan = plan_head(hp, wp, bp, tp, w2p, reduction, ignore_index, *split, weight_grad)
    fused = None if plan is None else plan.run(hp, wp, bp, tp, gp, w2p)
    if fused is None:
        return False
    with np.errstate(all="ignore"):
        ref = separate(hp, wp, bp, tp, gp, w2p)
    return all((a is None and b is None) or (a is not None and b is not None and
                                             np.array_equal(a, b))
               for a, b in zip(fused, ref))
