"""The backward graph of a traced forward, traced by running the eager engine over it.

``autograd.grad`` of the traced outputs (cotangents of ones) runs the ops' VJP rules under a
second tracer, so the backward graph falls out of the same op registry the forward used. Its
inputs are the cotangents, the forward values it reads (*residuals*, which the forward plan
keeps) and the inputs / captured tensors it reads.
"""

from __future__ import annotations

from ..config import check_ir
from ..trace.ir import Var
from ..trace.state import STATE as _TRACE
from ..trace.tracer import Tracer
from .higher_order import capture_template, graph_intact
from .partition import recompute_cheap_residuals

__all__ = ["GradInfo", "trace_backward", "differentiable"]


class GradInfo:
    """How a forward entry's backward is wired: which outputs/inputs are differentiable and
    which forward values the backward graph reads."""

    def __init__(self):
        self.graph = None
        self.diff_outputs: list[int] = []
        self.diff_inputs: list = []      # ("arg", i, None) | ("ext", -1, tensor)
        self.residuals: list = []        # forward Vars the backward reads
        self.residual_vcs: list = []     # their traced tensors' version counters
        self.ext_residuals: list = []    # inputs/captured tensors the backward reads
        self.template = None             # ForwardTemplate (higher_order.py), for create_graph
        self.template_reason: str | None = None  # why there is none
        # save vs recompute (partition.py): the residuals the forward plan keeps, and the
        # ones the backward recomputes
        self.saved: list = []
        self.kept: list = []
        self.recomputed: list = []
        self.backward_inputs: list = []


def trace_backward(tracer: Tracer, graph, flat, out_flat) -> GradInfo:
    """Trace the backward of the traced forward by running the eager engine over it."""
    from ..autograd.engine import grad as autograd_grad
    from ..creation import ones_like, zeros_like

    gi = GradInfo()
    diff_tensors = []
    for i, t in enumerate(flat):
        if t._requires_grad and not any(u is t for u in flat[:i]):  # f(x, x): one input
            gi.diff_inputs.append(("arg", i, None))
            diff_tensors.append(t)
    for v in graph.externals:
        src = v.source
        if src.kind == "tensor" and src.obj._requires_grad:
            gi.diff_inputs.append(("ext", -1, src.obj))
            diff_tensors.append(src.obj)
    outs = [t for t in out_flat if t._requires_grad]
    gi.diff_outputs = [i for i, t in enumerate(out_flat) if t._requires_grad]
    bt = Tracer(name=graph.name + "_backward")
    cots = [ones_like(t) for t in outs]
    for i, c in enumerate(cots):
        bt.add_input(c, i)
    # (a non-leaf input that retains its grad gets one from this run: not the caller's)
    retained = [(t, t._grad) for t in diff_tensors if t._grad_fn is not None]
    _TRACE.tracer = bt
    try:
        grads = autograd_grad(outs, diff_tensors, grad_outputs=cots, retain_graph=True,
                              allow_unused=True, _raw_inputs=True)
        # unused inputs get zero gradients (a constant of the backward graph)
        grads = [g if g is not None else zeros_like(t) for g, t in zip(grads, diff_tensors)]
    finally:
        _TRACE.tracer = None
        for t, g in retained:
            t._grad = g
    bgraph = bt.finish(grads)
    # backward externals: forward values (residuals) or inputs / captured tensors
    fwd_vars = tracer.vars
    arg_pos = {id(t._data): i for i, t in enumerate(flat)}
    res_inputs, ext_inputs = [], []
    values: dict = {}  # id(array) -> where the node finds it: ("res", r) | ("ext", k)
    for v in bgraph.externals:
        arr = v.source.obj._data if v.source.kind == "tensor" else None
        fv = fwd_vars.get(id(arr)) if arr is not None else None
        if fv is not None and fv.kind in ("op", "const"):
            values[id(arr)] = ("res", len(gi.residuals))
            gi.residuals.append(fv)
            gi.residual_vcs.append(v.source.obj._vc)
            res_inputs.append(v)
        else:
            if arr is not None:
                values[id(arr)] = ("ext", len(gi.ext_residuals))
            if arr is not None and id(arr) in arg_pos:
                gi.ext_residuals.append(("arg", arg_pos[id(arr)], None))
            else:
                gi.ext_residuals.append(("ext", -1, v.source.obj))
            ext_inputs.append(v)
    # the forward's autograd graph, for gradients that carry history (create_graph=True)
    gi.template, gi.template_reason = capture_template(out_flat, gi.diff_outputs,
                                                       diff_tensors, values)
    _save_viewed_inputs(gi, flat, graph, ext_inputs, bt)
    # the backward graph's inputs: cotangents, residual arrays, input/captured arrays
    bgraph.inputs = list(bgraph.inputs) + res_inputs + ext_inputs
    bgraph.externals = []
    for k, v in enumerate(bgraph.inputs):
        v.kind = "in"
        v.source = None
        v.n_in = k
    gi.graph = bgraph
    gi.saved = list(gi.residuals)
    gi.kept = list(range(len(gi.residuals)))
    recompute_cheap_residuals(gi, graph)
    if check_ir():
        bgraph.check()
    return gi


def differentiable(tracer: Tracer, graph, flat, out_flat) -> bool:
    """Whether a traced call's outputs get a compiled backward: some output requires grad,
    and, for a function that ran ``backward()``/``autograd.grad()`` itself (a joint graph),
    nothing between the outputs and the inputs was freed by that backward (it ran with
    ``retain_graph=True`` or ``create_graph=True``): the outputs are then differentiated like
    any other, through the backward ops the function recorded."""
    outs = [t for t in out_flat if t._requires_grad]
    if not outs:
        return False
    if tracer.backward_runs == 0:
        return True
    stop = [t for t in flat if t._requires_grad] + [
        v.source.obj for v in graph.externals
        if v.source.kind == "tensor" and v.source.obj._requires_grad]
    return graph_intact(outs, stop)


def _save_viewed_inputs(gi: GradInfo, flat, graph, ext_inputs: list, bt: Tracer) -> None:
    """A residual that is a view of an argument or a captured tensor (``w.t()``, saved by a
    matmul) shares its version counter: that tensor is saved too (``ext_residuals``: saved
    with its version, an input the backward graph does not read), so writing into it
    before the backward raises eager's "modified by an inplace operation" error."""
    owners: dict = {}
    for i, t in enumerate(flat):
        owners.setdefault(id(t._vc), ("arg", i, None))
    for v in graph.externals:
        if v.source.kind == "tensor":
            owners.setdefault(id(v.source.obj._vc), ("ext", -1, v.source.obj))
    saved = {(kind, i, id(obj)) for kind, i, obj in gi.ext_residuals}
    for vc in gi.residual_vcs:
        o = owners.get(id(vc))
        if o is None or (o[0], o[1], id(o[2])) in saved:
            continue
        saved.add((o[0], o[1], id(o[2])))
        gi.ext_residuals.append(o)
        arr = flat[o[1]]._data if o[0] == "arg" else o[2]._data
        ext_inputs.append(Var(bt.n, tuple(arr.shape), arr.dtype))
        bt.n += 1
