"""Reference evaluator of the IR: every equation through its op's NumPy reference (or its
eager forward), no fusion. The test oracle for the compiler, and what ``JITGRAD_DISABLE_JIT=1``
runs."""

from __future__ import annotations

import numpy as np

from .ir import Graph, Lit, Var

__all__ = ["evaluate", "run_eqn", "read_inputs", "apply_effects"]


def run_eqn(e, env: dict, reference: bool = True) -> np.ndarray:
    """Compute one equation's output array from ``env`` (id(Var) -> array)."""
    if isinstance(e.op, str):
        return e.impl()
    op = e.op
    args = [env[id(i)] if isinstance(i, Var) else (i.value if isinstance(i, Lit) else i)
            for i in e.ins]
    if op.kind == "elementwise":
        return _elementwise(op, args, e, reference)
    fn = op.ref if reference or op.fwd is None else op.fwd
    with np.errstate(all="ignore"):
        out = fn(*args, **e.params)
    out = np.asarray(out)
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
        elif isinstance(a, np.ndarray):
            operands.append(a if a.dtype == cdt else a.astype(cdt))
        else:
            operands.append(cdt.type(a))
    if reference:
        with np.errstate(all="ignore"):
            out = op.ref(*operands, **{k: e.params[k] for k in op.params}) if op.params \
                else op.ref(*operands)
        out = np.asarray(out)
    else:
        from ..ops import eager_kernels

        out = eager_kernels.run(op, tuple(operands), e.params or None, cdt,
                                np.dtype(e.out.dtype))
    if out.shape != e.out.shape:  # every operand was a broadcast source: materialise
        out = np.array(np.broadcast_to(out, e.out.shape))
    return out if out.dtype == e.out.dtype else out.astype(e.out.dtype)


def read_inputs(graph: Graph, args: list) -> dict:
    """The environment's starting point: arguments, captured tensors and constants."""
    env = {}
    for v in graph.inputs:
        env[id(v)] = v.source.read(args)
    for v in graph.externals:
        env[id(v)] = v.source.read(args)
    return env


def apply_effects(graph: Graph, env: dict, args: list) -> None:
    """Write-backs into external arrays, then ``.grad`` replacements."""
    if not graph.writes and not graph.grad_sets:
        return
    from ..tensor import wrap

    for src, v in graph.writes:
        dst = src.read(args)
        np.copyto(dst, env[id(v)], casting="unsafe")
    for leaf, v in graph.grad_sets:
        if v is None:
            leaf._grad = None
        else:
            val = env[id(v)]
            leaf._grad = wrap(val if val.flags.owndata and val.flags.writeable else val.copy())


def evaluate(graph: Graph, args: list, reference: bool = True) -> list:
    """Run ``graph`` on ``args`` (flattened tensors); returns the output arrays."""
    env = read_inputs(graph, args)
    for v in graph.all_vars():
        if v.kind == "const":
            env[id(v)] = v.source
    for e in graph.eqns:
        env[id(e.out)] = run_eqn(e, env, reference)
    outs = [env[id(v)] for v in graph.outputs]
    apply_effects(graph, env, args)
    return outs
