"""How compiled calls plug into eager autograd: the ``CompiledFunctionBackward`` node.

A compiled call whose outputs require grad gets one node for all of them; its backward runs
the entry's compiled backward plan on the cotangents and the residuals the forward plan kept.
Under ``create_graph=True`` it instead rebuilds the forward's autograd graph over those
residuals (``compiler/higher_order.py``) and runs the ops' VJP rules with grad mode on, so the
gradients carry history and can be differentiated again, to any order.
An output of a function that ran ``backward()`` itself (a *joint* entry) is differentiated the
same way when that backward kept its graph (``retain_graph``/``create_graph``); otherwise the
graph was consumed inside the plan and the output gets a node that refuses a second
differentiation.
"""

from __future__ import annotations

import numpy as np

from .._profiling import ACTIVE as _PROFILING
from ..autograd import grad_mode
from ..autograd.node import FREED_MESSAGE, Node, edge, make_node, node_class, save_input, unpack
from ..compiler.partition import all_residuals
from ..tensor import Tensor, wrap

__all__ = ["CompiledFunctionBackward", "attach_backward", "history_gradients",
           "mark_joint_output", "run_backward", "run_backward_with_history"]


class CompiledFunctionBackwardBase(Node):
    """The autograd node of a compiled call's outputs: runs the compiled backward plan, or
    under ``create_graph=True`` the VJP rules over the rebuilt forward graph."""

    __slots__ = ()

    def apply(self, grads: list) -> tuple:
        if self.saved is None:
            raise RuntimeError(FREED_MESSAGE)
        if grad_mode.STATE.enabled:  # create_graph=True: gradients with history
            return run_backward_with_history(self._entry, self, grads)
        return run_backward(self._entry, self, grads)

    def release(self) -> None:
        """Free the saved residuals, and the forward graph rebuilt from them (as eager
        autograd frees the forward's saved tensors: a later backward through a gradient
        computed with create_graph=True then raises, as it does in eager mode)."""
        super().release()
        rebuilt = self.__dict__.pop("_rebuilt", None)
        if rebuilt is not None:
            rebuilt.release()


CompiledFunctionBackward = node_class("CompiledFunctionBackward", CompiledFunctionBackwardBase)


class _JointOutputBase(Node):
    """Node of an output computed in a compiled function that itself ran backward()/grad()
    without keeping the graph: that backward consumed it inside the plan (eager mode would
    find it freed too)."""

    __slots__ = ()

    def apply(self, grads: list) -> tuple:
        raise RuntimeError(
            "jitgrad.compile: this output comes from a compiled function that calls "
            "backward()/autograd.grad() itself; its graph was already differentiated inside "
            "the compiled plan and freed (retain_graph=False): pass retain_graph=True or "
            "create_graph=True to that call to differentiate the result again"
        )


_JointOutput = node_class("CompiledFunctionBackward", _JointOutputBase)


def mark_joint_output(t: Tensor, edges: tuple) -> None:
    """Give ``t`` (an output of a joint entry) its refusing node."""
    t._requires_grad = True
    t._grad_fn = make_node(_JointOutput, edges, None, None)


def attach_backward(entry, flat: list, tensors: list, residual_arrays: list) -> None:
    """Attach one ``CompiledFunctionBackward`` to the differentiable outputs of a call."""
    gi = entry.grad_info
    diff = [flat[i] if kind == "arg" else obj for kind, i, obj in gi.diff_inputs]
    edges = tuple([edge(t) for t in diff])
    if not any(e is not None for e in edges):
        return
    # residuals: arrays computed by this call, plus inputs/captured tensors the backward
    # reads (saved with their version, so in-place changes before backward are caught)
    saved = tuple(residual_arrays)
    if gi.ext_residuals:
        saved += tuple(save_input(flat[i] if kind == "arg" else obj)
                       for kind, i, obj in gi.ext_residuals)
    meta = entry.__dict__.get("_node_meta")
    if meta is None:  # shapes and dtypes are fixed by the entry's key and guards
        meta = entry._node_meta = (
            tuple((t._data.shape, t._data.dtype) for t in diff),
            tuple((t._data.shape, t._data.dtype) for t in tensors))
    node = make_node(CompiledFunctionBackward, edges, saved, meta[0])
    node._entry = entry
    node.n_outputs = len(tensors)
    node._out_meta = meta[1]
    for i in gi.diff_outputs:
        t = tensors[i]
        t._requires_grad = True
        t._grad_fn = node
        if i:
            t._output_nr = i


def run_backward(entry, node, grads) -> tuple:
    """The compiled backward: cotangents (zeros for outputs given none), residuals, the
    inputs/captured tensors it reads -> one gradient per differentiable input."""
    gi = entry.grad_info
    n_res = len(gi.saved)
    saved = node.saved
    ext = [unpack(e, node)._data for e in saved[n_res:]]
    cots = []
    for i in gi.diff_outputs:
        g = grads[i]
        if g is None:
            shape, dtype = node._out_meta[i]
            cots.append(np.zeros(shape, dtype))
        else:
            cots.append(g._data)
    bplan = entry.bplan
    arrays = (bplan.run_arrays if _PROFILING[0] is None else bplan.run_arrays_profiled)(
        cots + list(saved[:n_res]) + ext)
    if (not entry.speculating and entry.spec_plan is not None
            and cots[0].item() == 1.0):  # differentiated as speculation would: speculate again
        entry.speculating = True
        entry.spec_idle = 0
    return wrap_gradients(arrays)


def wrap_gradients(arrays: list) -> tuple:
    """One tensor per gradient array; an array given to two inputs (``x + y``: the same
    gradient) is one tensor, so the engine knows it is shared and copies it before making
    it a ``.grad`` (two leaves never share a ``.grad``'s memory)."""
    if len(arrays) == 1:
        a = arrays[0]
        return (None if a is None else wrap(a),)
    out = []
    seen: dict = {}
    for a in arrays:
        if a is None:
            out.append(None)
            continue
        t = seen.get(id(a))
        if t is None:
            t = seen[id(a)] = wrap(a)
        out.append(t)
    return tuple(out)


def run_backward_with_history(entry, node, grads) -> tuple:
    """The backward under ``create_graph=True``, from the residuals the forward plan kept
    (and those the backward recomputes, ``compiler/partition.py``)."""
    gi = entry.grad_info
    n_res = len(gi.saved)
    ext = node.saved[n_res:]
    residuals = all_residuals(gi, node.saved[:n_res], [e[0]._data for e in ext])
    return history_gradients(entry, node, grads, residuals, ext)


def history_gradients(entry, node, grads, residuals: list, ext_saved) -> tuple:
    """Gradients with history: the forward's autograd graph rebuilt over ``residuals`` and
    the saved inputs ``ext_saved`` (once per node, as eager autograd keeps one forward
    graph), then the ops' VJP rules over it with grad mode on; see
    ``compiler/higher_order.py``. Inputs no gradient reaches get zeros, as from the
    compiled backward."""
    gi = entry.grad_info
    if gi.template is None:
        raise RuntimeError(
            "jitgrad.compile: double backward (create_graph=True) through this compiled "
            f"function is not supported: {gi.template_reason}; call the function uncompiled "
            "for higher-order gradients")
    ext = [unpack(e, node) for e in ext_saved]  # version checks: modified inputs raise
    rebuilt = node.__dict__.get("_rebuilt")
    if rebuilt is None:
        rebuilt = gi.template.rebuild(residuals, ext, [e[1] for e in ext_saved],
                                      node.next_edges)
        node._rebuilt = rebuilt
    out = rebuilt.vjp(grads)
    from ..creation import zeros

    return tuple(g if g is not None else zeros(shape, dtype=_jdtype(dtype))
                 for g, (shape, dtype) in zip(out, node.in_meta))


def _jdtype(np_dtype):
    from ..dtypes import from_numpy_dtype

    return from_numpy_dtype(np_dtype)
