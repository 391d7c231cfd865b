"""The reference interpreter of the IR: every equation through its op's NumPy reference (or
its eager forward), no fusion, no generated code.

:func:`interpret` runs a graph's equations in order over an environment of arrays and frees
each value after its last reader (:func:`last_uses`), so its peak memory is the plan's, not
the whole graph's. It is what ``JITGRAD_DISABLE_JIT=1`` runs (``Plan``) and the oracle tests
compare compiled plans with. :func:`run_eqn` computes one equation; plans call it for the
equations they do not fuse. :func:`apply_effects` applies a graph's writes and ``.grad`` sets.
"""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace, as_array, is_cpu_array, is_writeable
from .effects import in_place
from .ir import Graph, Lit, Var

__all__ = ["interpret", "last_uses", "graph_ends", "run_eqn", "apply_effects"]


def _number_operand(x, np_dtype):
    """A recorded number as an operand of ``np_dtype`` (``dispatch.number_operand``,
    imported on use: ops import this package)."""
    from ..ops.dispatch import number_operand

    return number_operand(x, np_dtype)


def run_eqn(e, env: dict, reference: bool = True) -> np.ndarray:
    """Compute one equation's output array from ``env`` (id(Var) -> array): the op's NumPy
    reference (``reference``), else its eager implementation (the kernels eager mode runs)."""
    if isinstance(e.op, str):  # a fill, a random draw, an effect (a collective)
        return e.impl(*[env[id(i)] for i in e.ins]) if e.ins else e.impl()
    op = e.op
    args = [env[id(i)] if isinstance(i, Var) else (i.value if isinstance(i, Lit) else i)
            for i in e.ins]
    if op.kind == "elementwise":
        return _elementwise(op, args, e, reference)
    fn = op.ref if reference or op.fwd is None else op.fwd
    with np.errstate(all="ignore"):
        out = fn(*args, **e.params)
    out = as_array(out)  # (a CUDA plan's values stay on the device)
    if out.dtype != e.out.dtype:
        out = out.astype(e.out.dtype)
    return out


def _elementwise(op, args, e, reference: bool) -> np.ndarray:
    cdt = np.dtype(e.cdt) if e.cdt is not None else np.dtype(e.out.dtype)
    no_promote = op.extra.get("no_promote", ())
    operands = []
    for k, a in enumerate(args):
        if k in no_promote:
            operands.append(a)
        elif isinstance(a, np.ndarray) or not is_cpu_array(a):  # (a CUDA array too)
            operands.append(a if a.dtype == cdt else a.astype(cdt))
        else:  # a number (one out of an integer dtype's range was wrapped when traced)
            operands.append(_number_operand(a, cdt))
    if reference:
        with np.errstate(all="ignore"):
            out = op.ref(*operands, **{k: e.params[k] for k in op.params}) if op.params \
                else op.ref(*operands)
        out = as_array(out)
    elif op.fwd is not None:  # an eager forward of its own (sin/cos: libm for huge inputs)
        out = as_array(op.fwd(*operands, **{k: e.params[k] for k in op.params}))
    else:
        from ..ops import eager_kernels

        out = eager_kernels.run(op, tuple(operands), e.params or None, cdt,
                                np.dtype(e.out.dtype))
    if out.shape != e.out.shape:  # every operand was a broadcast source: materialise
        xp = array_namespace(out)
        out = xp.ascontiguousarray(xp.broadcast_to(out, e.out.shape))
    return out if out.dtype == e.out.dtype else out.astype(e.out.dtype)


def last_uses(reads: list, keep_ids: set) -> list:
    """Liveness: ``reads[k]`` lists the Vars step ``k`` reads (an equation, or a plan's step);
    returns for each step the ids of the values it is the last reader of -- never constants
    nor those in ``keep_ids`` (outputs, kept values, effects, inputs: see :func:`graph_ends`).
    Dropping each value after its last reader keeps a run's peak memory at or below eager
    mode's, which frees a saved activation as soon as its backward node has run."""
    last: dict = {}
    for k, vs in enumerate(reads):
        for v in vs:
            if isinstance(v, Var) and v.kind != "const":
                last[id(v)] = k
    drops: list = [[] for _ in reads]
    for vid, k in last.items():
        if vid not in keep_ids:
            drops[k].append(vid)
    return drops


def interpret(graph: Graph, env: dict, keep=(), drops: list | None = None) -> dict:
    """Run ``graph``'s equations over ``env`` (id(Var) -> array: inputs, externals and
    constants already in it); each value is dropped after its last reader unless it is an
    output, an effect's value or in ``keep``. ``drops``: a precomputed :func:`last_uses`
    schedule (a plan computes it once). Returns ``env``."""
    if drops is None:
        drops = last_uses([e.ins for e in graph.eqns], graph_ends(graph, keep))
    with np.errstate(all="ignore"):
        for e, drop in zip(graph.eqns, drops):
            env[id(e.out)] = run_eqn(e, env, reference=True)
            for k in drop:
                del env[k]
    return env


def graph_ends(graph: Graph, keep=()) -> set:
    """Ids of the values a run must not drop: outputs, kept values, effects' values, inputs
    and externals (the caller's arrays)."""
    ends = {id(v) for v in graph.outputs} | {id(v) for v in keep}
    ends |= {id(v) for _, v in graph.writes} | {id(v) for _, v in graph.grad_sets
                                               if v is not None}
    ends |= {id(v) for v in graph.inputs} | {id(v) for v in graph.externals}
    return ends


def check_writes(graph: Graph, args: list) -> list:
    """The arrays ``graph``'s write-backs go to; raises (PyTorch's error) if one is
    read-only -- before anything is written, so a call leaves no half-done effects."""
    dsts = [src.read(args) for src, _ in graph.writes]
    for src, dst in zip(graph.writes, dsts):
        if not is_writeable(dst):
            from ..ops.inplace import check_writeable

            check_writeable(src[0].tensor(args))
    return dsts


def apply_effects(graph: Graph, env: dict, args: list, bump=None) -> None:
    """Write-backs into external arrays and the written tensors' version bumps, then
    ``.grad`` replacements. A new ``.grad`` that is an argument, a captured tensor or
    another leaf's ``.grad`` is that tensor (as in eager mode); any other value is an array
    of its own (a constant or a view is copied: never shared with later calls). ``bump``:
    a function of ``args`` raising the versions (a plan's generated one), else a loop over
    ``graph.bumps``."""
    if not graph.writes and not graph.grad_sets:
        return
    from ..tensor import wrap

    dsts = check_writes(graph, args)
    for (_, v), dst in zip(graph.writes, dsts):
        val = env[id(v)]
        # (a plan's kernel may have stored it there, inplace_writes.py; or it is a view of
        # the destination's own memory, a DistributedDataParallel bucket's average)
        if val is not dst and not in_place(val, dst):
            np.copyto(dst, val, casting="unsafe")
    if bump is not None:
        bump(args)
    else:
        for src, n in graph.bumps:
            src.tensor(args)._vc[0] += n
    for ref, v in graph.grad_sets:
        leaf = ref.tensor(args)
        if v is None:
            leaf._grad = None
        elif v.kind in ("in", "ext") and v.source is not None and v.source.kind != "scalar":
            leaf._grad = v.source.tensor(args)
        else:
            val = env[id(v)]
            leaf._grad = wrap(val if val.flags.owndata and val.flags.c_contiguous
                              and is_writeable(val) and v.kind != "const" else val.copy())
