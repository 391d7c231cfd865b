"""The joint forward+backward graph of a compiled call whose one differentiable output has
one element: what a *speculative* call runs (``jit/speculation.py``).

A loss is almost always differentiated right after it is computed, with the implicit
cotangent 1. Running the forward graph and the backward graph (cotangent 1 as a constant)
as one graph lets fusion put both in the same kernels: the forward values the backward reads
stay in registers instead of being written as residuals and read back, and the call hands
the input gradients to ``backward()`` instead of its residuals.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..trace.ir import Eqn, Graph, Source, Var, is_effect

__all__ = ["joint_graph", "speculation_blocker"]


def speculation_blocker(graph: Graph, grad_info, out_sizes: list, aliases, escaped
                        ) -> str | None:
    """Why a traced call cannot be speculated (None when it can): the joint graph must
    compute exactly what the forward and backward plans would, whenever the backward runs,
    and recomputing its forward (for ``create_graph=True``) must give the same values.
    ``out_sizes``: each output's (size, dtype)."""
    if grad_info is None:
        return "no differentiable output"
    if len(grad_info.diff_outputs) != 1:
        return "more than one differentiable output"
    size, dtype = out_sizes[grad_info.diff_outputs[0]]
    if size != 1 or dtype.kind != "f":
        return "the differentiable output is not a one-element float tensor"
    if graph.writes or graph.grad_sets or graph.bumps:
        return "the call has effects (in-place writes, .grad updates)"
    if any(e.op == "random" for e in graph.eqns):
        return "the call draws random numbers"
    # (a value check -- ``trace.effects.run_check`` -- only raises: the joint plan runs it
    # in its place as the forward plan would, and again when it recomputes the forward)
    if any(is_effect(e) and e.op != "check" for e in graph.eqns):
        return "the call runs effects (collectives)"
    if escaped:
        return "outside state keeps arrays the call made"
    if aliases[0] and any(r is not None for r in aliases[0]):
        return "an output aliases an input"
    if aliases[1]:
        return "the backward reads memory the caller can write"
    return None


def joint_graph(graph: Graph, grad_info) -> Graph:
    """A new graph computing ``graph``'s outputs followed by the gradients of its
    differentiable inputs for a cotangent of ones (``grad_info``: the traced backward, see
    ``autodiff.py``). Both graphs are copied: the plans built from them optimise their
    graphs in place."""
    bg = grad_info.graph
    joint = Graph(graph.name + "_joint")
    joint.device = graph.device
    joint.names = graph.names
    count = itertools.count()
    new: dict = {}  # id(Var of graph or bg) -> its Var in the joint graph

    def var(v: Var) -> Var:
        nv = new.get(id(v))
        if nv is None:  # a constant (inputs, externals and eqn outputs are mapped first)
            nv = new[id(v)] = Var(next(count), v.shape, v.dtype, v.kind, v.source)
        return nv

    for v in graph.inputs:
        new[id(v)] = Var(next(count), v.shape, v.dtype, v.kind, v.source)
        joint.inputs.append(new[id(v)])
    for v in graph.externals:
        new[id(v)] = Var(next(count), v.shape, v.dtype, v.kind, v.source)
        joint.externals.append(new[id(v)])
    _copy_eqns(graph.eqns, joint, var, new, count)

    n_cot, n_res = len(grad_info.diff_outputs), len(grad_info.saved)
    for k, v in enumerate(bg.inputs):
        if k < n_cot:  # the cotangent: ones, as the implicit seed of backward()
            ones = np.ones(v.shape, v.dtype)
            ones.flags.writeable = False
            new[id(v)] = Var(next(count), v.shape, v.dtype, "const", ones)
        elif k < n_cot + n_res:  # a residual: the forward value itself
            new[id(v)] = var(grad_info.saved[k - n_cot])
        else:  # an input or captured tensor the backward reads
            kind, i, obj = grad_info.ext_residuals[k - n_cot - n_res]
            new[id(v)] = _input_var(joint, kind, i, obj, v, count)
    _copy_eqns(bg.eqns, joint, var, new, count)
    joint.outputs = [var(v) for v in graph.outputs] + [var(v) for v in bg.outputs]
    return joint


def _copy_eqns(eqns, joint: Graph, var, new: dict, count) -> None:
    for e in eqns:
        ins = [var(i) if isinstance(i, Var) else i for i in e.ins]
        out = Var(next(count), e.out.shape, e.out.dtype)
        new[id(e.out)] = out
        joint.eqns.append(Eqn(e.op, ins, out, dict(e.params), e.cdt, e.impl))


def _input_var(joint: Graph, kind: str, i: int, obj, like: Var, count) -> Var:
    """The joint graph's Var of argument ``i`` or captured tensor ``obj``; a captured tensor
    only the backward reads becomes a new external."""
    if kind == "arg":
        for v in joint.inputs:
            if v.source is not None and v.source.kind == "arg" and v.source.index == i:
                return v
    else:
        for v in joint.externals:
            if v.source.kind == "tensor" and v.source.obj is obj:
                return v
    src = Source("arg", index=i) if kind == "arg" else Source(
        "tensor", obj, name=joint.names.get(id(obj), "captured"))
    nv = Var(next(count), like.shape, like.dtype, "in" if kind == "arg" else "ext", src)
    (joint.inputs if kind == "arg" else joint.externals).append(nv)
    return nv
