"""Which of a plan's write-backs its fused kernels store straight into their destination.

A graph's in-place effects (``p.sub_(lr * g)``, an optimizer's momentum update) are values
the plan computes and ``apply_effects`` copies into the caller's arrays at the end: a new
array, then a copy (an SGD step over an MLP: ~50 us of its ~1.1 ms). Where it is safe, the
fused kernel that computes such a value writes it into the destination array itself -- one
pass, as a hand-written ``p -= lr * g`` -- and the copy-back finds nothing to do.

Safe means the old contents are not needed after that kernel ran:

* the destination's current value is read by the kernel itself (an element-wise group
  without sums: every element is read before it is written, at its own index) with the
  value's shape and dtype;
* no later step, output, kept value or ``.grad`` reads the old value, nor anything that may
  share its memory (a view of it, or the result of a non-fused call on it);
* no other operand of the kernel is derived from it (e.g. its transpose).

* no later step may raise (:mod:`.value_checks`: an index or target out of range, a
  singular matrix, a check): a plan that raised before its first write to outside state
  runs the call again eagerly (``jit/function.py``), for eager mode's error and effects; a
  write done before the error would make that impossible (a batch norm's running
  statistics, Adam's step counters, ahead of a loss whose target is out of range).

At run time the destination must be writeable (else the plan raises before running any
step, as the copy-back would) and C-contiguous; one that is not (a strided parameter) gets
a fresh array and the copy-back, as before. Destinations that share memory with the
kernel's other external operands are checked when the kernel is called.
"""

from __future__ import annotations

import numpy as np

from ..trace.ir import Graph, Var
from .value_checks import may_raise as eqn_may_raise

__all__ = ["plan_inplace_writes", "sharing_memory", "source_key", "step_inputs",
           "step_reads", "may_raise"]

def may_raise(step) -> bool:
    """Whether a plan step may raise on the values it gets at run time
    (:func:`value_checks.may_raise` of its equation; a fused group never does)."""
    if step.kind == "group" or step.eqn is None:
        return False
    return eqn_may_raise(step.eqn)


def source_key(src) -> tuple:
    """What identifies the array a ``Source`` reads (two Vars reading one array match)."""
    return (src.kind, src.index, id(src.obj))


def plan_inplace_writes(graph: Graph, steps: list, keep: list) -> dict:
    """``{step index: {id(value): destination Var}}`` for the group steps that may store a
    written value straight into its destination (see the module docstring)."""
    if not graph.writes:
        return {}
    by_source = {}
    for v in list(graph.inputs) + list(graph.externals):
        if v.source is not None and v.source.kind != "scalar":
            by_source.setdefault(source_key(v.source), v)
    producer_step = {}
    for k, s in enumerate(steps):
        if s.kind == "group":
            for e in s.group.eqns:
                producer_step[id(e.out)] = k
    ends = {id(v) for v in graph.outputs} | {id(v) for v in keep} | {
        id(v) for _, v in graph.grad_sets if v is not None}
    written = [v for _, v in graph.writes]
    last_risky = max((k for k, s in enumerate(steps) if may_raise(s)), default=-1)
    out: dict = {}
    for src, v in graph.writes:
        d = by_source.get(source_key(src))
        k = producer_step.get(id(v))
        if d is None or k is None or id(v) in ends or written.count(v) != 1 or k < last_risky:
            continue
        group = steps[k].group
        if (group.reductions or tuple(v.shape) != tuple(d.shape) or
                tuple(group.shape) != tuple(v.shape) or
                np.dtype(v.dtype) != np.dtype(d.dtype)):
            continue
        operands = group.operands()
        if not any(o is d for o in operands):
            continue
        tainted = sharing_memory(d, steps)
        if id(d) in ends or any(id(o) in tainted for o in operands if o is not d):
            continue
        if any(step_reads(s, tainted) for s in steps[k + 1:]):
            continue
        if any(id(w) in tainted for w in written if w is not v):
            continue
        out.setdefault(k, {})[id(v)] = d
    return out


def _fresh(e) -> bool:
    """Whether ``e``'s result is always a new array (element-wise ops and reductions run as
    calls, matmuls, ops declaring ``extra["fresh_output"]``): never its input or a view."""
    op = e.op
    return not isinstance(op, str) and (op.kind in ("elementwise", "reduce") or op.matmul
                                         or op.extra.get("fresh_output", False))


def sharing_memory(d: Var, steps: list) -> set:
    """Ids of ``d`` and of every value a non-fused step made from it that may share its
    memory: views, and calls not known to return new arrays."""
    tainted = {id(d)}
    for s in steps:
        if s.kind != "group" and s.eqn is not None and not _fresh(s.eqn) and any(
                isinstance(i, Var) and id(i) in tainted for i in s.eqn.ins):
            tainted.add(id(s.eqn.out))
    return tainted


def step_inputs(step) -> list:
    """The values a plan step reads: a group's operands, a call's or view's Var inputs."""
    if step.kind == "group":
        return step.group.operands()
    return [i for i in step.eqn.ins if isinstance(i, Var)] if step.eqn is not None else []


def step_reads(step, ids: set) -> bool:
    return any(id(i) in ids for i in step_inputs(step))
