"""Save or recompute: which forward values (residuals) the forward plan keeps for the
backward plan.

The backward graph reads forward values; each one kept costs a write in the forward kernel
and a read in the backward kernel, and memory until the backward runs. A residual that one
cheap element-wise op (no transcendental call: ``tanh**2`` from ``tanh``, ``x * w``) computes
from values the backward reads anyway (other kept residuals, inputs it reads) is not kept:
the backward graph recomputes it, and fusion puts that op in the backward kernel, where it
costs a few instructions per element instead of a write and a read. Nothing the backward did
not read before is read: bytes moved only go down (torch.compile's min-cut partitioner
decides the same trade in general; this is its rule for the common case).

Gradients keep their bits: the recomputing op is the forward's own equation (same op, compute
dtype and parameters), and fused kernels round every op as unfused ones do.
"""

from __future__ import annotations

import re

import numpy as np

from ..trace.interpreter import run_eqn
from ..trace.ir import Eqn, Var
from .describe import _equation_line
from .kernel_desc import _MATH_CALL

__all__ = ["recompute_cheap_residuals", "all_residuals", "cheap_op"]


def cheap_op(op, params: dict, cdt) -> bool:
    """An element-wise op whose kernel expression (with these params, computing in
    ``cdt``) calls no transcendental function: cheaper to recompute than to read."""
    if isinstance(op, str) or op.kind != "elementwise" or op.expr is None or not op.fusable:
        return False
    if np.dtype(cdt).name not in ("float32", "float64"):  # integer index maths:
        return False  # no kernel expression of their own (they run on NumPy's functions)
    line = _equation_line(op, params, [f"a{k}" for k in range(len(op.inputs))], cdt, True)
    return _MATH_CALL.search(line) is None and not re.search(r"\bpow\(", line)


def _cheap(e: Eqn) -> bool:
    return cheap_op(e.op, e.params, e.cdt if e.cdt is not None else e.out.dtype)


def recompute_cheap_residuals(gi, graph) -> None:
    """Drop the residuals of ``gi`` (``autodiff.GradInfo``) that the backward graph can
    recompute with one cheap op from what it reads anyway (see the module docstring).

    ``gi.residuals`` stays the list of every forward value the backward uses (the
    ``create_graph`` template refers to them by index); ``gi.saved`` becomes the ones the
    forward plan keeps, in the order the backward graph's inputs take them, and
    ``gi.recomputed`` lists (index, recipe) of the dropped ones, in computing order."""
    bg = gi.graph
    n_cot, n_res = len(gi.diff_outputs), len(gi.residuals)
    res_in = bg.inputs[n_cot:n_cot + n_res]
    ext_in = bg.inputs[n_cot + n_res:]
    producer = {id(e.out): e for e in graph.eqns}
    outputs = {id(v) for v in graph.outputs}
    readable = {id(gi.residuals[r]): res_in[r] for r in range(n_res)}  # forward -> backward
    for (kind, i, obj), v in zip(gi.ext_residuals, ext_in):
        fv = _forward_input(graph, kind, i, obj)
        if fv is not None:
            readable.setdefault(id(fv), v)
    n = max([v.n for v in bg.all_vars()], default=0) + 1
    recomputed: dict = {}
    for r, fv in enumerate(gi.residuals):
        e = producer.get(id(fv))
        if e is None or id(fv) in outputs or not _cheap(e):
            continue
        ins = []
        for x in e.ins:
            if isinstance(x, Var) and x.kind == "const":
                ins.append(Var(n, x.shape, x.dtype, "const", x.source))
                n += 1
            elif isinstance(x, Var):
                if id(x) not in readable or x is fv:
                    break
                ins.append(readable[id(x)])
            else:
                ins.append(x)
        else:
            out = Var(n, fv.shape, fv.dtype)
            n += 1
            eqn = Eqn(e.op, ins, out, dict(e.params), e.cdt, e.impl)
            _replace_uses(bg, res_in[r], out)  # (before eqn joins: it does not read it)
            readable[id(fv)] = out
            recomputed[r] = eqn
    if not recomputed:
        return
    bg.eqns = _in_order(list(recomputed.values())) + bg.eqns
    kept = [r for r in range(n_res) if r not in recomputed]
    bg.inputs = list(bg.inputs[:n_cot]) + [res_in[r] for r in kept] + list(ext_in)
    for k, v in enumerate(bg.inputs):
        v.n_in = k
    gi.saved = [gi.residuals[r] for r in kept]
    gi.kept = kept
    gi.backward_inputs = list(bg.inputs)  # as the recipes name them
    # the recipes, in the order the backward graph computes them (plans optimise it later)
    index = {id(e): r for r, e in recomputed.items()}
    gi.recomputed = [(index[id(e)], _Recipe(e)) for e in bg.eqns if id(e) in index]


class _Recipe:
    """An equation's operation without its place in a graph (evaluated by ``run_eqn``)."""

    __slots__ = ("op", "ins", "out", "params", "cdt", "impl")

    def __init__(self, e: Eqn) -> None:
        self.op, self.ins, self.out = e.op, tuple(e.ins), e.out
        self.params, self.cdt, self.impl = e.params, e.cdt, e.impl


def _in_order(eqns: list) -> list:
    """The recomputing equations, each after those whose values it reads (one may read
    another's: ``x*w`` then ``(x*w)**2``; the forward graph is acyclic, so they are too)."""
    made = {id(e.out) for e in eqns}
    done: set = set()
    out: list = []
    while eqns:
        ready = [e for e in eqns if all(not isinstance(x, Var) or id(x) not in made
                                        or id(x) in done for x in e.ins)]
        if not ready:
            raise AssertionError("recomputed residuals depend on each other in a cycle")
        out += ready
        done |= {id(e.out) for e in ready}
        eqns = [e for e in eqns if id(e.out) not in done]
    return out


def _forward_input(graph, kind: str, i: int, obj):
    if kind == "arg":
        return next((v for v in graph.inputs if v.source is not None
                     and v.source.kind == "arg" and v.source.index == i), None)
    return next((v for v in graph.externals if v.source.kind == "tensor"
                 and v.source.obj is obj), None)


def _replace_uses(bg, old: Var, new: Var) -> None:
    for e in list(old.users):
        e.ins = [new if x is old else x for x in e.ins]
    bg.outputs = [new if v is old else v for v in bg.outputs]


def all_residuals(gi, saved: list, ext: list) -> list:
    """Every residual of ``gi`` in ``gi.residuals`` order (what the ``create_graph`` template
    reads): the ``saved`` arrays the forward plan kept, the dropped ones recomputed from
    them and the inputs' arrays ``ext`` (eager kernels: the bits the backward kernel
    computes)."""
    if not gi.recomputed:
        return list(saved)
    n_cot = len(gi.diff_outputs)
    env = {id(v): a for v, a in zip(gi.backward_inputs[n_cot:], list(saved) + list(ext))}
    out: list = [None] * len(gi.residuals)
    for r, a in zip(gi.kept, saved):
        out[r] = a
    for r, e in gi.recomputed:
        for x in e.ins:
            if isinstance(x, Var) and x.kind == "const":
                env[id(x)] = x.source
        out[r] = env[id(e.out)] = run_eqn(e, env, reference=False)
    return out
