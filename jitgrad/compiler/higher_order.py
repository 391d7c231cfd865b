"""Higher-order gradients through compiled functions: the forward's autograd graph, rebuilt.

A compiled call's outputs carry one ``CompiledFunctionBackward`` node, whose first-order
backward is the compiled backward plan. Under ``create_graph=True`` the gradients it returns
must carry history: they are functions of the cotangents *and* of the forward values the
backward reads (residuals), which are themselves functions of the inputs. Eager autograd gets
this from the saved tensors' ``grad_fn``: the forward's own nodes.

When the backward is traced (``compiler/autodiff.py``), the traced forward's autograd graph
exists: every node between the outputs and the differentiable inputs, with its op, params,
edges and saved entries. :class:`ForwardTemplate` records that graph *without its arrays*:
each saved entry refers to the value it holds as a residual of the compiled backward, an
input/captured tensor it reads, or a *hole* (a value the backward never reads: only its shape
and dtype are kept). Under ``create_graph`` the node instantiates the template once per
call (:meth:`ForwardTemplate.rebuild`): new nodes of the same classes, over that call's
residual arrays, with edges to that call's inputs. Then :meth:`RebuiltForward.vjp` runs the
ops' VJP rules over them with grad mode on, exactly as the eager engine would
(latest node first), so the gradients get the history eager mode gives them -- through
``detach()``, ``no_grad`` regions and saved outputs alike -- and any order of derivative
follows. Nothing is recomputed, the forward plan keeps nothing more, and a first-order
backward never touches any of this.

Why not evaluate the backward graph's IR on tensors: the IR identifies values by their
array, so ``x.detach()`` and ``x`` are one value there, and ops run under ``no_grad`` look
like any other; the recorded autograd graph is the only faithful account of what a second
derivative must see.
"""

from __future__ import annotations

import numpy as np

from ..autograd.node import make_node, nodes_between
from ..ops.registry import OpNode
from ..tensor import Tensor, wrap

__all__ = ["ForwardTemplate", "RebuiltForward", "capture_template", "graph_intact"]


def _key(t: Tensor) -> tuple:
    """Where gradients for ``t`` arrive: its leaf, or its producing node's output."""
    fn = t._grad_fn
    return ("leaf", id(t)) if fn is None else ("fn", id(fn), t._output_nr)


class _TNode:
    """One recorded node: class, op, params, input metadata, routes of its edges, saved
    entries as references to values."""

    __slots__ = ("cls", "op", "params", "tensor_params", "in_meta", "n_outputs", "edges",
                 "saved")

    def __init__(self, node) -> None:
        self.cls = type(node)
        self.op = node.op
        self.params = node.params
        self.tensor_params: tuple = ()
        self.in_meta = node.in_meta
        self.n_outputs = node.n_outputs
        self.edges: tuple = ()
        self.saved = None


class ForwardTemplate:
    """The traced forward's autograd graph between the differentiable outputs and inputs,
    with value references instead of arrays (see the module docstring).

    ``nodes`` are in creation order (a node's inputs come before it); an edge route is
    ``None`` (no gradient), ``("node", j, nr)`` or ``("in", ks)`` (the differentiable inputs
    ``ks`` of the compiled node); ``roots[i]`` routes output ``i``'s cotangent.
    """

    def __init__(self, nodes: list, roots: dict, n_inputs: int) -> None:
        self.nodes = nodes
        self.roots = roots
        self.n_inputs = n_inputs

    def rebuild(self, residuals: list, ext: list, ext_versions: list, in_edges: tuple
                ) -> RebuiltForward:
        """New nodes for one call: ``residuals`` (the arrays the forward plan kept), ``ext``
        (the input/captured tensors the backward reads, ``ext_versions`` their versions when
        the call ran) and ``in_edges`` (the compiled node's edges, one per input)."""
        nodes = [make_node(tn.cls, (), None, tn.in_meta) for tn in self.nodes]
        for n, tn in zip(nodes, self.nodes):
            n.op = tn.op
            params = tn.params
            if tn.tensor_params:
                params = dict(params)
                for k, ref in tn.tensor_params:
                    params[k] = wrap(_value(ref, residuals, ext))
            n.params = params
            if tn.n_outputs != 1:
                n.n_outputs = tn.n_outputs
            n.next_edges = tuple(None if r is None else (nodes[r[1]], r[2]) if r[0] == "node"
                                 else in_edges[r[1][0]] for r in tn.edges)
            if tn.saved is not None:
                n.saved = tuple(_entry(s, nodes, residuals, ext, ext_versions)
                                for s in tn.saved)
        return RebuiltForward(self, nodes)


class RebuiltForward:
    """A template instantiated for one call: the nodes, and the first-order VJP over them."""

    def __init__(self, template: ForwardTemplate, nodes: list) -> None:
        self.template = template
        self.nodes = nodes

    def vjp(self, grads: list) -> list:
        """Gradients for the compiled node's inputs from the cotangents of its outputs
        (``grads[i]`` for output ``i``, or None): each node's rule runs once on the sum of
        its incoming gradients, latest node first (the engine's order); grad mode is on,
        so the results carry history. None where no gradient reaches an input."""
        tpl = self.template
        bufs: dict = {}
        out: list = [None] * tpl.n_inputs

        def deliver(route, g) -> None:
            if route[0] == "in":
                for k in route[1]:
                    out[k] = g if out[k] is None else out[k] + g
                return
            j, nr = route[1], route[2]
            buf = bufs.get(j)
            if buf is None:
                buf = bufs[j] = [None] * tpl.nodes[j].n_outputs
            buf[nr] = g if buf[nr] is None else buf[nr] + g

        for i, route in tpl.roots.items():
            g = grads[i]
            if g is not None and route is not None:
                deliver(route, g)
        for j in range(len(self.nodes) - 1, -1, -1):
            buf = bufs.pop(j, None)
            if buf is None:
                continue  # no gradient reached it: its rule does not run
            res = self.nodes[j].apply(buf)
            for route, g in zip(tpl.nodes[j].edges, res):
                if route is not None and g is not None:
                    deliver(route, g)
        return out

    def release(self) -> None:
        """Free the rebuilt nodes' saved values (the compiled node was released)."""
        for n in self.nodes:
            n.release()


# ------------------------------------------------------------------------ runtime values
def _value(ref: tuple, residuals: list, ext: list) -> np.ndarray:
    kind = ref[0]
    if kind == "res":
        return residuals[ref[1]]
    if kind == "ext":
        return ext[ref[1]]._data
    # a hole: a value no rule reads (only its shape/dtype); NaN so that a misuse shows
    fill = np.nan if np.dtype(ref[2]).kind in "fc" else 0
    return np.broadcast_to(np.array(fill, dtype=ref[2]), ref[1])


def _entry(s, nodes: list, residuals: list, ext: list, ext_versions: list):
    if type(s) is not tuple:
        return s  # None or a number
    if s[0] == "out":  # a saved output: unpacking gives it the owner as grad_fn
        _, ref, nr, req = s
        return (None, _value(ref, residuals, ext), [0], 0, nr, req)
    _, ref, grad, nr = s
    if grad is not None and grad[0] == "in":  # the input itself (with its own history)
        k = ref[1]
        return (ext[k], ext_versions[k])
    t = wrap(_value(ref, residuals, ext))
    if grad is not None:
        t._requires_grad = True
        t._grad_fn = nodes[grad[1]]
        if nr:
            t._output_nr = nr
    return (t, 0)


# --------------------------------------------------------------------------- trace time
class _Unsupported(Exception):
    pass


def capture_template(out_flat: list, diff_outputs: list, diff_tensors: list,
                     values: dict) -> tuple:
    """``(ForwardTemplate, None)`` for the traced outputs' autograd graph, or ``(None, why)``
    when it cannot be rebuilt (a custom ``autograd.Function``, a freed graph...).

    ``values``: ``id(array) -> ("res", r) | ("ext", k)`` for every array the traced
    backward read (residual ``r`` of the forward plan, input/captured tensor ``k`` of the
    compiled node's saved entries)."""
    try:
        return _Capture(diff_tensors, values).run(out_flat, diff_outputs), None
    except _Unsupported as e:
        return None, str(e)


class _Capture:
    def __init__(self, diff_tensors: list, values: dict) -> None:
        self.values = values
        self.inputs: dict = {}       # boundary key -> indices among the compiled node's inputs
        for k, t in enumerate(diff_tensors):
            self.inputs.setdefault(_key(t), []).append(k)
        self.inputs = {key: tuple(ks) for key, ks in self.inputs.items()}
        self.n_inputs = len(diff_tensors)
        self.boundary = {key[1] for key in self.inputs if key[0] == "fn"}
        self.found: dict = {}        # id(node) -> node, every node reached

    def run(self, out_flat: list, diff_outputs: list) -> ForwardTemplate:
        roots_raw = {i: self._route_of_tensor(out_flat[i]) for i in diff_outputs}
        stack = [r for r in roots_raw.values() if r is not None and r[0] == "node"]
        seen: set = set()
        while stack:
            _, node, _nr = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            self.found[id(node)] = node
            for r in self._edge_routes(node):
                if r is not None and r[0] == "node":
                    stack.append(r)
            for t in _saved_tensors(node):
                r = self._route_of_tensor(t)
                if r is not None and r[0] == "node":
                    stack.append(r)
        # as the engine does, only nodes from which an input is reachable take part; a
        # node's inputs were made before it, so one pass in creation order decides
        needed: set = set()
        for n in sorted(self.found.values(), key=lambda n: n.seq):
            if any(r is not None and (r[0] == "in" or id(r[1]) in needed)
                   for r in self._edge_routes(n)):
                needed.add(id(n))
        order = sorted((self.found[k] for k in needed), key=lambda n: n.seq)
        index = {id(n): j for j, n in enumerate(order)}
        nodes = [self._record(n, index) for n in order]
        roots = {i: _index_route(r, index) for i, r in roots_raw.items()}
        return ForwardTemplate(nodes, roots, self.n_inputs)

    # routes: None | ("in", ks) | ("node", node, nr) (made ("node", j, nr) once indexed)
    def _route_of_tensor(self, t: Tensor):
        if not t._requires_grad:
            return None
        ks = self.inputs.get(_key(t))
        if ks is not None:
            return ("in", ks)
        fn = t._grad_fn
        if fn is None or id(fn) in self.boundary:
            return None  # a leaf made inside the function: its gradient is not returned
        return ("node", fn, t._output_nr)

    def _edge_routes(self, node) -> list:
        out = []
        for e in node.next_edges:
            if e is None:
                out.append(None)
            elif type(e) is tuple:
                fn, nr = e
                ks = self.inputs.get(("fn", id(fn), nr))
                out.append(("in", ks) if ks is not None else
                           None if id(fn) in self.boundary else ("node", fn, nr))
            else:
                ks = self.inputs.get(("leaf", id(e)))
                out.append(("in", ks) if ks is not None else None)
        return out

    @staticmethod
    def _check(node) -> None:
        if not isinstance(node, OpNode):
            raise _Unsupported(
                f"its graph contains a {node.name()} node (a custom autograd.Function, or an "
                "output of another compiled call that differentiates itself): only the "
                "registry's ops can be differentiated twice through a compiled function")
        if node.saved is None and node._freed:
            raise _Unsupported(
                f"its graph was freed inside the function ({node.name()}: backward() ran "
                "without retain_graph=True/create_graph=True)")

    def _ref(self, arr: np.ndarray) -> tuple:
        ref = self.values.get(id(arr))
        if ref is None:
            return ("hole", tuple(arr.shape), arr.dtype)
        return ref

    def _record(self, node, index: dict) -> _TNode:
        self._check(node)
        tn = _TNode(node)
        tn.edges = tuple(_index_route(r, index) for r in self._edge_routes(node))
        tps = []
        for k, v in (node.params or {}).items():
            if isinstance(v, Tensor):
                if v._requires_grad:
                    raise _Unsupported(f"{node.name()} has a parameter that requires grad")
                tps.append((k, self._ref(v._data)))
            elif isinstance(v, (tuple, list)) and any(isinstance(x, Tensor) for x in v):
                raise _Unsupported(f"{node.name()} has a tuple of tensors as a parameter")
        tn.tensor_params = tuple(tps)
        if tps:  # the trace's tensors are not kept: each rebuild puts the call's values in
            tn.params = {k: (None if isinstance(v, Tensor) else v)
                         for k, v in node.params.items()}
        if node.saved is not None:
            tn.saved = tuple(self._saved_entry(s, node, index) for s in node.saved)
        return tn

    def _saved_entry(self, s, node, index: dict):
        if type(s) is not tuple:
            if isinstance(s, Tensor):
                raise _Unsupported(f"{node.name()} saves a bare tensor")
            return s
        if s[0] is None:  # save_output: (None, data, vc, version, nr, req)
            return ("out", self._ref(s[1]), s[4], s[5])
        t = s[0]
        ref = self._ref(t._data)
        route = _index_route(self._route_of_tensor(t), index)
        if route is not None and route[0] == "in":
            if ref[0] == "hole":
                route = None  # never read: no history needed
            elif ref[0] != "ext":
                raise _Unsupported(f"{node.name()} saves an input under another value")
        return ("in", ref, route, t._output_nr)


def _index_route(r, index: dict):
    """A route with its node replaced by the node's index; None for a node that reaches no
    input (no gradient it gets could reach one, and its history carries none)."""
    if r is None or r[0] == "in":
        return r
    j = index.get(id(r[1]))
    return None if j is None else ("node", j, r[2])


def _saved_tensors(node) -> list:
    out = []
    for s in node.saved or ():
        if type(s) is tuple and s[0] is not None and isinstance(s[0], Tensor):
            out.append(s[0])
    for v in (getattr(node, "params", None) or {}).values():
        if isinstance(v, Tensor):
            out.append(v)
    return out


def graph_intact(outputs: list, stop: list) -> bool:
    """Whether no node between ``outputs`` and the tensors ``stop`` was freed (a backward
    without ``retain_graph`` ran through it): then the outputs can be differentiated."""
    boundary = {id(t._grad_fn) for t in stop if t._grad_fn is not None}
    roots = [t._grad_fn for t in outputs if t._grad_fn is not None]
    return not any(n.saved is None and n._freed for n in nodes_between(roots, boundary))
