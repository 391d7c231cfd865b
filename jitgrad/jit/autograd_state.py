"""Autograd state a compiled plan cannot give its outputs.

A plan gives the outputs of a call the autograd state its key and trace fix: under grad mode,
one backward node whose edges are the arguments and captured tensors that require grad; none
without grad mode. Two things eager mode can do inside a function fall outside that, and the
call then runs eagerly (a graph break):

* a *leaf made inside* the function that requires grad (``x.detach().requires_grad_()``,
  ``zeros(3, requires_grad=True)``) reached by an output's history or returned itself: eager
  gives it a ``.grad`` and keeps it a leaf; the plan's node has no edge to it;
* an output that requires grad although grad mode was off at the call (``enable_grad()``
  inside a function called under ``no_grad``).

A function that runs ``backward()`` itself (its outputs get joint-output marks) is checked
for returning such a leaf only, not for histories reaching one: a saliency map or an
adversarial step makes such leaves and differentiates them inside, and what it returns is
detached or is a gradient.
"""

from __future__ import annotations

from ..autograd.node import nodes_between
from ..tensor import Tensor

__all__ = ["unreproducible_autograd"]


def unreproducible_autograd(flat: list, out_flat: list, graph, tracer,
                            grad_enabled: bool) -> str | None:
    """Why the plan cannot give ``out_flat`` (the traced call's outputs) their eager
    autograd state, or None."""
    outside = list(flat) + [v.source.obj for v in graph.externals if v.source.kind == "tensor"]
    own = {id(t) for t in outside}
    needs = [o for o in out_flat if o._requires_grad and id(o) not in own]
    if not needs:
        return None
    if not grad_enabled:
        return ("an output requires grad although grad mode is off at the call "
                "(enable_grad() inside a function called under no_grad)")
    if any(o._grad_fn is None for o in needs):
        return "an output is a leaf that requires grad, made inside the function"
    if tracer.backward_runs:
        return None
    stop = {id(t._grad_fn) for t in outside if t._grad_fn is not None}
    for node in nodes_between([o._grad_fn for o in needs], stop):
        if any(isinstance(e, Tensor) and id(e) not in own for e in node.next_edges):
            return ("an output's history reaches a leaf that requires grad, made inside "
                    "the function (its .grad would stay unset)")
    return None
