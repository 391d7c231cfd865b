"""Speculative VJP: a compiled loss computes its input gradients in the forward call.

When a compiled call's one differentiable output has one element (a loss) and grad mode is
on, the call runs the *joint* plan (``compiler/joint.py``): the forward and the backward for
a cotangent of 1 fused into the same kernels. Its node (``CompiledFunctionBackward``, as
without speculation) keeps those gradients instead of residuals, and ``backward()`` hands
them over:

* cotangent 1 (``loss.backward()``): the arrays themselves become (or are added to) the
  leaves' ``.grad``, exactly the values the separate backward plan computes;
* another cotangent (``(2 * loss).backward()``, ``backward(gradient=c)``): the forward plan
  recomputes the residuals from the saved inputs and the backward plan runs on that
  cotangent, the bits eager mode computes (scaling the speculated gradients by ``c``, as
  the VJP's linearity allows, would round differently); such a backward does not count as
  one that speculation served (below);
* ``retain_graph=True``: the node keeps its arrays and hands over copies, so a second
  backward gives the same gradients; without it a second backward raises eager's error;
* ``create_graph=True``: the forward plan runs again on the saved inputs (speculated calls
  have no effects and draw no random numbers, so it recomputes the same residuals) and the
  gradients are built with history as without speculation;
* inputs modified in place after the call raise eager's "modified by an inplace operation"
  error at backward, for the tensors the backward reads.

Whether it pays: the joint plan costs more than the forward plan alone (for an element-wise
loss about 1.3x; for an MLP about 3x: the weight-gradient GEMMs), and it saves the whole
separate backward when ``backward()`` follows. A call whose output is never differentiated
only pays. The rule: an entry speculates while its outputs get differentiated with the
cotangent 1; after :data:`IDLE_LIMIT` speculated calls in a row without such a backward it
runs the forward plan alone (separate backward plan, residuals), and the first such
backward through one of those calls turns speculation back on.
"""

from __future__ import annotations

import numpy as np

from .. import config
from ..autograd import grad_mode
from ..autograd.engine import is_ones_seed
from ..autograd.node import FREED_MESSAGE, next_seq, node_class, unpack
from ..compiler.partition import all_residuals
from ..tensor import Tensor
from .autograd_glue import CompiledFunctionBackwardBase, history_gradients, wrap_gradients

__all__ = ["IDLE_LIMIT", "attach_lines", "SpeculativeBackward", "node_class_for"]

#: speculated calls in a row without a backward before an entry stops speculating
IDLE_LIMIT = 32


class SpeculativeBackwardBase(CompiledFunctionBackwardBase):
    """The node of a speculated call's loss: hands over the gradients the call computed.
    Each entry has its own subclass (:func:`node_class_for`): ``_entry``, ``_out_index``
    (which output is the loss) and ``n_outputs`` are class attributes."""

    __slots__ = ()

    def apply(self, grads: list) -> tuple:  # the graph is kept (retain_graph): copies
        return self._gradients(grads, False)

    def apply_final(self, grads: list) -> tuple:  # freed right after: the arrays themselves
        return self._gradients(grads, True)

    def _gradients(self, grads: list, final: bool) -> tuple:
        arrays = self._arrays
        saved = self.saved
        if saved is None or arrays is None:  # freed, or handed over already
            raise RuntimeError(FREED_MESSAGE)
        entry = self._entry
        if grad_mode.STATE.enabled:  # create_graph=True: recompute, then gradients with history
            entry.spec_idle = 0
            return _with_history(entry, self, grads)
        for e in saved:  # eager's error for inputs modified in place since the call
            if e[0]._vc[0] != e[1]:
                unpack(e, self)
        g = grads[self._out_index]
        if g is None or not (is_ones_seed(g) or g._data.item() == 1.0):
            # not what was speculated: recompute exactly
            if final:
                self._arrays = None
            return _recomputed(entry, self, grads)
        entry.spec_idle = 0
        if final:
            self._arrays = None
        else:
            arrays = [a.copy() for a in arrays]
        return wrap_gradients(arrays)

    def release(self) -> None:
        if self.saved is not None:
            self.saved = None
            self._freed = True
        self._arrays = None
        self._flat = None
        if self.__dict__.get("_rebuilt") is not None:  # create_graph's rebuilt forward
            self.__dict__.pop("_rebuilt").release()


SpeculativeBackward = node_class("CompiledFunctionBackward", SpeculativeBackwardBase)


def node_class_for(entry, out_index: int, n_outputs: int) -> type:
    """The node class of one entry's speculated calls (its constants as class attributes:
    a call sets two slots, not five dict entries)."""
    out = entry.graph.outputs[out_index]
    return type("CompiledFunctionBackward", (SpeculativeBackward,), {
        "__slots__": ("_arrays", "_flat", "_versions"), "__module__": __name__,
        "__qualname__": "CompiledFunctionBackward", "_entry": entry,
        "_out_index": out_index, "n_outputs": n_outputs,
        "_out_shape": out.shape, "_out_dtype": out.dtype})


def attach_lines(entry, flat_sample: list, ns: dict, ts: list, outs: str) -> list:
    """Source lines (for ``call_path.entry_run``) making a speculated call's loss tensor
    (``ts[i]`` over ``outs[i]``: ``tensor.alias`` unrolled) and its node: ``make_node`` and
    ``edge`` unrolled for this entry's inputs (the key fixes which arguments require grad),
    the inputs the backward reads saved with their versions. ``outs``: the expression of
    the gradient arrays."""
    gi = entry.grad_info
    i = gi.diff_outputs[0]
    ns.update({"SPEC_NODE": node_class_for(entry, i, len(ts)), "NEW": object.__new__,
               "TENSOR": Tensor,
               "SEQ": next_seq, "IDLE": _went_idle, "IDLE_LIMIT": IDLE_LIMIT})

    def tensor(kind: str, k: int, obj, tag: str) -> str:
        if kind == "arg":
            return f"flat[{k}]"
        ns[tag] = obj
        return tag

    diff = [tensor(kind, k, obj, f"DIN{j}") for j, (kind, k, obj) in enumerate(gi.diff_inputs)]
    saved = [tensor(kind, k, obj, f"SIN{j}") for j, (kind, k, obj)
             in enumerate(gi.ext_residuals)]
    ns["SPEC_META"] = tuple((a._data.shape, a._data.dtype) for a in (
        flat_sample[k] if kind == "arg" else obj for kind, k, obj in gi.diff_inputs))
    t = ts[i]
    lines = [f"{t} = NEW(TENSOR)", f"{t}._data = outs[{i}]", f"{t}._grad = None",
             f"{t}._vc = [0]", "node = NEW(SPEC_NODE)"]
    edges = []
    for j, d in enumerate(diff):
        lines.append(f"d{j} = {d}")
        lines.append(f"f{j} = d{j}._grad_fn")
        edges.append(f"d{j} if f{j} is None else (f{j}, d{j}._output_nr)")
    lines.append(f"node.next_edges = ({''.join(e + ', ' for e in edges)})")
    lines.append(f"node.saved = ({''.join(f'({x}, {x}._vc[0]), ' for x in saved)})")
    # every input's version: recomputing the forward (another cotangent, create_graph)
    # reads them all, not only those the backward saves (``_forward_inputs``)
    ns["SPEC_CAPTURED"] = _captured(entry)
    versions = [f"flat[{k}]._vc[0]" for k in range(len(flat_sample))] + [
        f"SPEC_CAPTURED[{j}]._vc[0]" for j in range(len(ns["SPEC_CAPTURED"]))]
    lines += ["node.in_meta = SPEC_META", "node.seq = SEQ()", f"node._arrays = {outs}",
              "node._flat = flat", f"node._versions = ({''.join(v + ', ' for v in versions)})",
              f"{t}._requires_grad = True", f"{t}._grad_fn = node"]
    if i:
        lines.append(f"{t}._output_nr = {i}")
    lines += ["idle = ENTRY.spec_idle + 1", "ENTRY.spec_idle = idle",
              "if idle >= IDLE_LIMIT:", "    IDLE(ENTRY)"]
    return lines


def _went_idle(entry) -> None:
    entry.speculating = False
    if "recompiles" in config.log_topics():
        print(f"[jitgrad:recompiles] {entry.fn_name}: {entry.spec_idle} calls without a "
              "backward: stops speculating the gradients", flush=True)


def _captured(entry) -> tuple:
    """The captured tensors the forward plan reads."""
    return tuple(v.source.obj for v in entry.graph.externals if v.source.kind == "tensor")


def _forward_again(entry, node) -> list:
    """The residuals of a speculated call, recomputed by the forward plan from the saved
    inputs: the same bits the joint plan computed (speculated calls have no effects and
    draw no random numbers; fused kernels round as unfused ones). An input modified in
    place since the call (an optimizer step between the loss and its backward) raises
    eager's error: the forward would read its new values."""
    for t, version in zip(list(node._flat) + list(_captured(entry)), node._versions):
        if t._vc[0] != version:
            unpack((t, version), node)
    n_out = len(entry.graph.outputs)
    return entry.plan.run(node._flat)[n_out:n_out + len(entry.grad_info.saved)]


def _recomputed(entry, node, grads) -> tuple:
    """A cotangent other than 1: the backward plan on it and the recomputed residuals, the
    bits the separate backward computes (scaling the speculated gradients would round
    differently from eager mode)."""
    gi = entry.grad_info
    cots = []
    for i in gi.diff_outputs:
        g = grads[i]
        cots.append(np.zeros(node._out_shape, node._out_dtype) if g is None else g._data)
    ext = [e[0]._data for e in node.saved]
    return wrap_gradients(entry.bplan.run_arrays(cots + _forward_again(entry, node) + ext))


def _with_history(entry, node, grads) -> tuple:
    """``create_graph=True`` through a speculated call: the residuals recomputed, then the
    backward built with history."""
    ext = node.saved
    residuals = all_residuals(entry.grad_info, _forward_again(entry, node),
                              [e[0]._data for e in ext])
    return history_gradients(entry, node, grads, residuals, ext)
