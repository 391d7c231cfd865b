"""Step order: fused groups whose values only leave the plan run as early as they can.

``partition`` keeps the graph's order, so a training step's optimizer updates run after the
whole backward pass: by then the gradient a backward GEMM wrote (and the parameter) have
left the caches that GEMM filled (the MLP step's 256 x 256 update, min over calls: 11-15
us at the end, 9.5 us right after its gradient's GEMM). :func:`hoist_sinks` moves such a
group -- a *sink*: no other step reads what it computes; its values are written back, set
as ``.grad`` or returned -- to just after the last step it must follow:

* the steps computing its operands;
* every step reading an operand the plan writes back (a parameter, a momentum buffer), or
  a value that may share its memory (``inplace_writes.sharing_memory``): the group may
  store into it in place (``inplace_writes``, decided on the new order), so the old
  value's readers come first. (Inputs only read, such as the learning rate, order
  nothing.)

Only the order changes, and data dependencies are kept: every value is computed before it
is read, inputs are unchanged until the group that writes them, so the results are the
same bits.
"""

from __future__ import annotations

from ..trace.ir import Graph
from .fusion import Step
from .inplace_writes import sharing_memory, source_key, step_inputs, step_reads

__all__ = ["hoist_sinks"]


def _outputs(s: Step) -> list:
    if s.kind == "group":
        return [e.out for e in s.group.eqns + s.group.reductions]
    return [s.eqn.out] if s.eqn is not None else []


def hoist_sinks(graph: Graph, steps: list) -> list:
    """``steps`` with each sink group moved up to just after the last step it must follow
    (see the module docstring); group indices are renumbered."""
    read_by_steps = {id(v) for s in steps for v in step_inputs(s)}
    written = {source_key(src) for src, _ in graph.writes}
    # what may share the memory of each array the plan writes back (any order that
    # computes values before their readers finds the same set)
    tainted = {id(v): sharing_memory(v, steps) for v in list(graph.inputs) + list(
        graph.externals) if v.source is not None and source_key(v.source) in written}
    order = list(steps)
    for s in steps:
        if s.kind != "group" or any(id(v) in read_by_steps for v in _outputs(s)):
            continue
        k = order.index(s)
        made_at = {id(v): j for j, t in enumerate(order[:k]) for v in _outputs(t)}
        after = -1
        for o in s.group.operands():
            after = max(after, made_at.get(id(o), -1))
            if id(o) in tainted:
                after = max([after] + [j for j, t in enumerate(order[:k])
                                       if step_reads(t, tainted[id(o)])])
        if after + 1 < k:
            order.insert(after + 1, order.pop(k))
    for j, s in enumerate(order):
        if s.group is not None:
            s.group.index = j
    return order
