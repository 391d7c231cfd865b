"""The backward engine: iterative, dependency-counted graph traversal with PyTorch's semantics.

Each node runs once, with the sum of the gradients flowing into each of its outputs, in
priority order (most recently created first, leaves' accumulation as soon as ready), so a
100,000-node chain needs no recursion. Accumulation into ``.grad`` is in place unless a graph
is being built (``create_graph=True``).
"""

from __future__ import annotations

import heapq

import numpy as np

from ..shapes import fmt_shape
from ..tensor import Tensor, wrap
from . import grad_mode
from .node import Node

__all__ = ["backward", "grad", "accumulate_into_leaf"]


def _size_str(shape) -> str:
    return f"jitgrad.Size({fmt_shape(shape)})"


def _make_grads(outputs, grad_outputs, is_grads_batched=False):
    """Validate/create the initial gradients (PyTorch's ``_make_grads``)."""
    out = []
    for i, (t, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if t._requires_grad:
                if t._data.size != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if t._data.dtype.kind != "f":
                    raise RuntimeError(
                        "grad can be implicitly created only for real scalar outputs but got "
                        f"{t.dtype}"
                    )
                out.append((wrap(np.ones_like(t._data)), True))
            else:
                out.append((None, True))
            continue
        if not isinstance(g, Tensor):
            if isinstance(g, (int, float)):
                g = wrap(np.full(t._data.shape, g, dtype=t._data.dtype))
                out.append((g, True))
                continue
            raise TypeError(
                f"gradients can be either Tensors or None, but got {type(g).__name__}"
            )
        if g._data.shape != t._data.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {_size_str(g._data.shape)} "
                f"and output[{i}] has a shape of {_size_str(t._data.shape)}."
            )
        if g._data.dtype.kind not in "fc" and t._data.dtype.kind == "f":
            g = wrap(g._data.astype(t._data.dtype))
            out.append((g, True))
            continue
        out.append((g, False))
    return out


def _check_roots(tensors):
    for i, t in enumerate(tensors):
        if not t._requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves of their graph."""
    tensors = _as_tuple(tensors)
    if grad_tensors is None:
        grad_tensors = (None,) * len(tensors)
    else:
        grad_tensors = _as_tuple(grad_tensors)
        if len(grad_tensors) != len(tensors):
            raise RuntimeError(
                f"grad_tensors has {len(grad_tensors)} elements but tensors has {len(tensors)}"
            )
    if retain_graph is None:
        retain_graph = create_graph
    inputs = _as_tuple(inputs)
    if inputs is not None:
        if len(inputs) == 0:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        for t in inputs:
            if not isinstance(t, Tensor):
                raise TypeError("inputs to backward() must be Tensors")
            if not t._requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
    _check_roots(tensors)
    grads = _make_grads(tensors, grad_tensors)
    _Run(tensors, grads, retain_graph, create_graph, inputs, capture=False).run()


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated).

    >>> import jitgrad
    >>> x = jitgrad.tensor(3.0, requires_grad=True)
    >>> jitgrad.autograd.grad(x ** 2, x)
    (tensor(6.),)
    """
    if is_grads_batched:
        raise NotImplementedError("is_grads_batched=True is not supported")
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _as_tuple(outputs)
    single = isinstance(inputs, Tensor)
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
        if len(grad_outputs) != len(outputs):
            raise RuntimeError(
                f"grad requires one grad_output per output: got {len(grad_outputs)} "
                f"grad_outputs for {len(outputs)} outputs"
            )
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError("inputs to grad() must be Tensors")
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    _check_roots(outputs)
    grads = _make_grads(outputs, grad_outputs)
    run = _Run(outputs, grads, retain_graph, create_graph, inputs, capture=True)
    run.run()
    result = []
    for i, t in enumerate(inputs):
        g = run.captured[i]
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:
                g = wrap(np.zeros_like(t._data))
        result.append(g)
    del single
    return tuple(result)


def _call_tensor_hooks(hooks, g):
    for fn in list(hooks.values()):
        r = fn(g)
        if r is not None:
            if not isinstance(r, Tensor):
                raise TypeError(f"hook returned {type(r).__name__}; expected a Tensor or None")
            if r._data.shape != g._data.shape:
                raise RuntimeError(
                    f"hook returned a gradient of shape {fmt_shape(r._data.shape)} for a tensor "
                    f"gradient of shape {fmt_shape(g._data.shape)}"
                )
            g = r
    return g


def accumulate_into_leaf(t: Tensor, g: Tensor, shared: bool) -> None:
    """AccumulateGrad: add ``g`` into ``t.grad`` (in place unless building a graph)."""
    create = grad_mode.STATE.enabled
    if g._data.dtype != t._data.dtype:
        g = wrap(g._data.astype(t._data.dtype)) if not create else g.to(t.dtype)
        shared = False
    old = t._grad
    if old is None:
        if create:
            t._grad = g
        else:
            gd = g._data
            if shared or gd.base is not None or not gd.flags.writeable or g._requires_grad:
                gd = gd.copy()
            elif not gd.flags.c_contiguous:
                gd = np.ascontiguousarray(gd)
            t._grad = wrap(gd)
    elif create or old._requires_grad:
        t._grad = old + g
    else:
        od = old._data
        np.add(od, g._data, out=od)
        old._vc[0] += 1
    hooks = t._post_acc_hooks
    if hooks:
        for fn in list(hooks.values()):
            fn(t)


_LEAF_PRIORITY = float("-inf")


class _Run:
    """One backward pass over the graph reachable from ``roots``."""

    __slots__ = ("roots", "grads", "retain", "create", "inputs", "capture", "captured",
                 "_input_slots", "_needed")

    def __init__(self, roots, grads, retain, create, inputs, capture):
        self.roots = roots
        self.grads = grads
        self.retain = retain
        self.create = create
        self.inputs = inputs
        self.capture = capture
        self.captured = [None] * len(inputs) if inputs is not None else None
        # where to intercept gradients of the requested inputs
        self._input_slots = None
        if inputs is not None:
            slots = {}
            for i, t in enumerate(inputs):
                key = (id(t),) if t._grad_fn is None else (id(t._grad_fn), t._output_nr)
                slots.setdefault(key, []).append(i)
            self._input_slots = slots

    def run(self) -> None:
        prev = grad_mode.STATE.enabled
        grad_mode.STATE.enabled = self.create
        try:
            self._run()
        finally:
            grad_mode.STATE.enabled = prev

    # -------------------------------------------------------------------- bookkeeping
    def _dependencies(self, root_nodes):
        """In-degree of every node (and leaf) reachable from the roots; iterative DFS."""
        deps: dict = {}
        seen = set()
        stack = list(root_nodes)
        for n in stack:
            seen.add(id(n))
        while stack:
            n = stack.pop()
            for e in n.next_edges:
                if e is None:
                    continue
                tgt = e[0] if type(e) is tuple else e
                k = id(tgt)
                deps[k] = deps.get(k, 0) + 1
                if k not in seen:
                    seen.add(k)
                    if type(e) is tuple:
                        stack.append(tgt)
        return deps

    def _needed_nodes(self, root_nodes):
        """ids of nodes/leaves from which some requested input is reachable."""
        slots = self._input_slots
        needed = set()
        # post-order iterative DFS
        visited = set()
        for r in root_nodes:
            if id(r) in visited:
                continue
            stack = [(r, iter(r.next_edges))]
            visited.add(id(r))
            while stack:
                node, it = stack[-1]
                advanced = False
                for e in it:
                    if e is None:
                        continue
                    if type(e) is tuple:
                        child = e[0]
                        if id(child) not in visited:
                            visited.add(id(child))
                            stack.append((child, iter(child.next_edges)))
                            advanced = True
                            break
                    elif (id(e),) in slots:
                        needed.add(id(e))
                if advanced:
                    continue
                stack.pop()
                nid = id(node)
                if any(k[0] == nid for k in slots if len(k) == 2):
                    needed.add(nid)
                else:
                    for e in node.next_edges:
                        if e is None:
                            continue
                        tgt = e[0] if type(e) is tuple else e
                        if id(tgt) in needed:
                            needed.add(nid)
                            break
        return needed

    # ------------------------------------------------------------------------ the run
    def _run(self) -> None:
        buffers: dict = {}   # id(node) -> list of per-output grads
        objs: dict = {}      # id -> node or leaf tensor (keeps them alive during the run)
        shared_ids = set()   # ids of grad tensors that we don't own (or routed twice)
        root_nodes = []
        leaf_roots = []
        for t, (g, owned) in zip(self.roots, self.grads):
            if g is None:
                continue
            if not owned:
                shared_ids.add(id(g))
            fn = t._grad_fn
            if fn is None:
                leaf_roots.append((t, g))
                continue
            k = id(fn)
            buf = buffers.get(k)
            if buf is None:
                buf = buffers[k] = [None] * fn.n_outputs
                objs[k] = fn
                root_nodes.append(fn)
            nr = t._output_nr
            if buf[nr] is None:
                buf[nr] = g
            else:
                buf[nr] = buf[nr] + g
        deps = self._dependencies(root_nodes)
        needed = self._needed_nodes(root_nodes) if self.inputs is not None else None

        heap = []
        counter = 0
        for n in root_nodes:
            if deps.get(id(n), 0) == 0:
                heap.append((-n.seq, counter, n))
                counter += 1
        heapq.heapify(heap)
        for t, g in leaf_roots:
            self._deliver_leaf(t, g, True)

        leaf_bufs: dict = {}
        retain = self.retain
        slots = self._input_slots
        while heap:
            _, _, obj = heapq.heappop(heap)
            k = id(obj)
            if type(obj) is Tensor:  # a leaf: all contributions have arrived
                g = leaf_bufs.pop(k)
                self._deliver_leaf(obj, g, id(g) in shared_ids)
                continue
            node = obj
            grads = buffers.pop(k, None)
            objs.pop(k, None)
            edges = node.next_edges
            run_node = needed is None or any(
                e is not None and id(e[0] if type(e) is tuple else e) in needed for e in edges)
            out_grads = None
            if grads is not None and any(g is not None for g in grads):
                grads = self._pre_node(node, grads, slots, shared_ids)
                if run_node:
                    out_grads = self._apply(node, grads)
            if not retain:
                node.release()
            if out_grads is not None:
                seen_here = set()
                for e, g in zip(edges, out_grads):
                    if g is None or e is None:
                        continue
                    gid = id(g)
                    if gid in seen_here:
                        shared_ids.add(gid)
                    seen_here.add(gid)
            for i, e in enumerate(edges):
                if e is None:
                    continue
                g = out_grads[i] if out_grads is not None else None
                if type(e) is tuple:
                    tgt, nr = e
                    tk = id(tgt)
                    if needed is not None and tk not in needed:
                        continue
                    if g is not None:
                        buf = buffers.get(tk)
                        if buf is None:
                            buf = buffers[tk] = [None] * tgt.n_outputs
                            objs[tk] = tgt
                        if buf[nr] is None:
                            buf[nr] = g
                        else:
                            buf[nr] = buf[nr] + g
                    d = deps[tk] - 1
                    deps[tk] = d
                    if d == 0:
                        if tk in buffers:
                            heapq.heappush(heap, (-tgt.seq, counter, tgt))
                            counter += 1
                        else:
                            self._skip(tgt, deps, buffers, needed)
                else:  # leaf tensor
                    tk = id(e)
                    if needed is not None and tk not in needed:
                        continue
                    if g is not None:
                        prev = leaf_bufs.get(tk)
                        leaf_bufs[tk] = g if prev is None else prev + g
                    d = deps[tk] - 1
                    deps[tk] = d
                    if d == 0 and tk in leaf_bufs:
                        heapq.heappush(heap, (_LEAF_PRIORITY, counter, e))
                        counter += 1

    def _skip(self, node, deps, buffers, needed):
        """A node reached with no gradient at all: release it and propagate 'nothing'."""
        stack = [node]
        while stack:
            n = stack.pop()
            if not self.retain:
                n.release()
            for e in n.next_edges:
                if e is None:
                    continue
                tgt = e[0] if type(e) is tuple else e
                tk = id(tgt)
                if needed is not None and tk not in needed:
                    continue
                d = deps[tk] - 1
                deps[tk] = d
                if d == 0 and type(e) is tuple and tk not in buffers:
                    stack.append(tgt)

    def _pre_node(self, node, grads, slots, shared_ids):
        """Tensor hooks, retain_grad, captures for grad(), node pre-hooks."""
        th = node._tensor_hooks
        if th:
            for nr, hooks in th.items():
                g = grads[nr]
                if g is not None and hooks:
                    ng = _call_tensor_hooks(hooks, g)
                    if ng is not g:
                        shared_ids.add(id(ng))
                        grads[nr] = ng
        rt = node._retain
        if rt:
            for nr, ref in rt.items():
                t = ref()
                g = grads[nr]
                if t is None or g is None:
                    continue
                if t._grad is None:
                    t._grad = g if self.create else wrap(g._data.copy())
                else:
                    t._grad = t._grad + g
        if slots is not None:
            nid = id(node)
            for nr in range(node.n_outputs):
                idx = slots.get((nid, nr))
                if idx is not None and grads[nr] is not None:
                    for i in idx:
                        self._capture(i, grads[nr])
        ph = node._pre_hooks
        if ph:
            for fn in list(ph.values()):
                r = fn(tuple(grads))
                if r is not None:
                    grads = list(r)
        return grads

    def _capture(self, i, g):
        t = self.inputs[i]
        if self.capture:
            prev = self.captured[i]
            self.captured[i] = g if prev is None else prev + g
        else:  # backward(inputs=[non-leaf]): accumulate into its .grad
            if t._grad_fn is not None:
                accumulate_into_leaf(t, g, True)

    def _apply(self, node: Node, grads):
        out = node.apply(grads)
        ph = node._post_hooks
        if ph:
            for fn in list(ph.values()):
                r = fn(tuple(out), tuple(grads))
                if r is not None:
                    out = tuple(r)
        return out

    def _deliver_leaf(self, t: Tensor, g: Tensor, shared: bool) -> None:
        hooks = t._hooks
        if hooks:
            ng = _call_tensor_hooks(hooks, g)
            if ng is not g:
                g, shared = ng, True
        slots = self._input_slots
        if slots is not None:
            idx = slots.get((id(t),))
            if idx is None:
                return
            if self.capture:
                for i in idx:
                    prev = self.captured[i]
                    self.captured[i] = g if prev is None else prev + g
                return
        acc = t._accumulator
        acc = acc() if acc is not None else None
        if acc is not None and (acc._pre_hooks or acc._post_hooks):
            grads = [g]
            if acc._pre_hooks:
                grads = self._pre_node(acc, grads, None, set())
            accumulate_into_leaf(t, grads[0], True)
            if acc._post_hooks:
                for fn in list(acc._post_hooks.values()):
                    fn((), tuple(grads))
            return
        accumulate_into_leaf(t, g, shared)
