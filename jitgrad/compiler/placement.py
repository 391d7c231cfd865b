"""Which values a plan computes straight into the arrays an effect asked for (``places``).

An effect equation may name, per input, an array that lives across calls where it wants
that input (``trace.effects.run_effect``'s ``places``): DistributedDataParallel's
``allreduce_start`` names its bucket's views, so the gradients are computed inside the
bucket's flat buffer and the allreduce runs on it in place -- no copy in. The plan does so
where it is safe; elsewhere the value is a fresh array as usual and the effect copies it.

A value ``v`` is placed when

* the effect is its only reader, and it is no output, kept value, write-back or ``.grad``;
* it is computed by a fused group (an element-wise output, or a sum whose finished value
  lands there), or by a call whose op can write into a given array (``extra["into"]``:
  BLAS matmul, ``np.matmul(a, b, out=...)``), possibly through reshapes read only by the
  next one (a bias gradient: ``sum(g, 0, keepdim) -> reshape``);
* it has the place's shape (up to those reshapes) and dtype, and the place is C-contiguous
  and writeable;
* no step from its producer on reads an external array that may share the place's memory
  (a ``.grad`` that already is a bucket view, read by a later step), nor a view of one.

At run time a group writing a placed output checks that no argument it reads shares the
place's memory (else it writes a fresh array; the effect copies it).
"""

from __future__ import annotations

import numpy as np

from ..trace.ir import Graph, Var, is_effect
from .inplace_writes import sharing_memory, step_reads

__all__ = ["plan_placements"]


def plan_placements(graph: Graph, steps: list, keep: list) -> dict:
    """``{step index: {id(value): array}}``: the values steps compute into the arrays the
    graph's effects asked for (see the module docstring)."""
    if graph.device == "cuda" or not any(
            is_effect(e) and e.params.get("places") for e in graph.eqns):
        return {}
    producers = _producers(steps)
    ends = {id(v) for v in graph.outputs} | {id(v) for v in keep} | {
        id(v) for _, v in graph.writes} | {id(v) for _, v in graph.grad_sets if v is not None}
    outside = [v for v in list(graph.inputs) + list(graph.externals)
               if v.source is not None and v.source.kind in ("tensor", "grad")]
    out: dict = {}
    for e in graph.eqns:
        places = e.params.get("places") if is_effect(e) else None
        for v, place in zip(e.ins, places or ()):
            found = _placeable(v, place, e, producers, ends)
            if found is None:
                continue
            k, u = found
            if any(id(u) in m for m in out.values()):  # (an input given twice)
                continue
            tainted = set().union(*[sharing_memory(x, steps) for x in outside
                                    if _may_share(x, place)])
            if any(step_reads(s, tainted) for s in steps[k:]):
                continue
            out.setdefault(k, {})[id(u)] = place.reshape(u.shape)
    return out


def _producers(steps: list) -> dict:
    """id(value) -> (step index, step) for the values a step can compute into an array:
    fused groups' values and sums, calls of ops with ``extra["into"]``, reshapes."""
    out = {}
    for k, s in enumerate(steps):
        if s.kind == "group":
            for e in s.group.eqns + s.group.reductions:
                out[id(e.out)] = (k, s)
        elif s.eqn is not None and not isinstance(s.eqn.op, str) and (
                "into" in s.eqn.op.extra or s.kind == "view"):
            out[id(s.eqn.out)] = (k, s)
    return out


def _placeable(v, place, effect, producers: dict, ends: set):
    """``(step index, value computed there)`` when ``v`` can be computed into ``place``
    (through reshapes: the reshaped value), else None."""
    if place is None or not isinstance(v, Var) or v.kind != "op" or not isinstance(
            place, np.ndarray) or not (place.flags.c_contiguous and place.flags.writeable):
        return None
    if tuple(v.shape) != place.shape or np.dtype(v.dtype) != place.dtype:
        return None
    reader = effect
    while True:
        if id(v) in ends or list(v.users) != [reader]:
            return None
        found = producers.get(id(v))
        if found is None:
            return None
        k, s = found
        if s.kind == "group":
            return k, v
        e = s.eqn
        if s.kind != "view":  # a call writing into an array: its operands of that dtype
            if any(not isinstance(i, Var) or np.dtype(i.dtype) != place.dtype
                   for i in e.ins):
                return None
            return k, v
        if not (e.op.keeps_order and "node" in e.params and not e.params.get("copy")
                and isinstance(e.ins[0], Var)):
            return None  # only reshapes: the same elements in the same order
        reader, v = e, e.ins[0]


def _may_share(x: Var, place: np.ndarray) -> bool:
    """Whether the external ``x`` reads (now) an array that may share ``place``'s memory."""
    try:
        arr = x.source.read([])
    except (RuntimeError, AttributeError, IndexError):
        return True  # (a .grad gone, or an argument's: be safe)
    return type(arr) is not np.ndarray or np.may_share_memory(arr, place)
