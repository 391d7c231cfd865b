"""How compiled calls plug into eager autograd: the ``CompiledFunctionBackward`` node.

A compiled call whose outputs require grad gets one node for all of them; its backward runs
the entry's compiled backward plan on the cotangents and the residuals the forward plan kept.
An output of a function that ran ``backward()`` itself (a *joint* entry: its graph was
differentiated inside the plan) gets a node that refuses a second differentiation.
"""

from __future__ import annotations

from ..autograd import grad_mode
from ..autograd.node import FREED_MESSAGE, Node, edge, make_node, node_class, save_input, unpack
from ..tensor import Tensor, wrap

__all__ = ["CompiledFunctionBackward", "attach_backward", "mark_joint_output", "run_backward"]


class CompiledFunctionBackwardBase(Node):
    """The autograd node of a compiled call's outputs: runs the compiled backward plan."""

    __slots__ = ()

    def apply(self, grads: list) -> tuple:
        if grad_mode.STATE.enabled:
            raise RuntimeError(
                "jitgrad.compile: double backward (create_graph=True) through a compiled "
                "function is not supported; call the function uncompiled for higher-order "
                "gradients"
            )
        if self.saved is None:
            raise RuntimeError(FREED_MESSAGE)
        return run_backward(self._entry, self, grads)


CompiledFunctionBackward = node_class("CompiledFunctionBackward", CompiledFunctionBackwardBase)


class _JointOutputBase(Node):
    """Node of an output computed in a compiled function that itself ran backward()/grad():
    its graph was differentiated inside the plan; differentiating it again needs the
    uncompiled function."""

    __slots__ = ()

    def apply(self, grads: list) -> tuple:
        raise RuntimeError(
            "jitgrad.compile: this output comes from a compiled function that calls "
            "backward()/autograd.grad() itself; its graph was already differentiated inside "
            "the compiled plan (higher-order gradients through a compiled function are not "
            "supported): call the function uncompiled to differentiate its result again"
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
    if not any(t._requires_grad for t in diff):
        return
    # residuals: arrays computed by this call, plus inputs/captured tensors the backward
    # reads (saved with their version, so in-place changes before backward are caught)
    saved = tuple(residual_arrays) + tuple(
        save_input(flat[i] if kind == "arg" else obj) for kind, i, obj in gi.ext_residuals)
    node = make_node(CompiledFunctionBackward, tuple(edge(t) for t in diff), saved,
                     tuple((t._data.shape, t._data.dtype) for t in diff))
    node._entry = entry
    node.n_outputs = len(tensors)
    node._out_meta = tuple((t._data.shape, t._data.dtype) for t in tensors)
    for i, t in enumerate(tensors):
        if i in gi.diff_outputs:
            t._requires_grad = True
            t._grad_fn = node
            if i:
                t._output_nr = i


def run_backward(entry, node, grads) -> tuple:
    """The compiled backward: cotangents (zeros for outputs given none), residuals, the
    inputs/captured tensors it reads -> one gradient per differentiable input."""
    import numpy as np

    gi = entry.grad_info
    n_res = len(gi.residuals)
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
    arrays = entry.bplan.run_arrays(cots + list(saved[:n_res]) + ext)
    return tuple(None if a is None else wrap(a) for a in arrays)
