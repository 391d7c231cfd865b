"""The backward engine: iterative, dependency-counted graph traversal with PyTorch's semantics.

Each node runs once, with the sum of the gradients flowing into each of its outputs, in
priority order (most recently created first, leaves' accumulation as soon as ready), so a
100,000-node chain needs no recursion. Accumulation into ``.grad`` is in place unless a graph
is being built (``create_graph=True``). Callbacks queued during a pass
(:func:`queue_callback`, PyTorch's ``Variable._execution_engine.queue_callback``) run when it
has finished, before ``backward()`` returns.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable

import numpy as np

from .. import config
from .._profiling import ACTIVE as _PROFILING
from .._profiling import now_ns as _now_ns
from .._thread_modes import AUTOCASTING
from ..creation import full_like, ones_like, zeros_like
from ..shapes import fmt_shape
from ..tensor import Tensor, wrap
from ..trace.state import STATE as _TRACE
from . import fused_regions, grad_mode
from .accumulate import accumulate_into_leaf
from .anomaly import MODE as _ANOMALY
from .anomaly import apply_checked

__all__ = ["is_ones_seed", "backward", "grad", "queue_callback", "ExecutionEngine",
           "execution_engine"]


class _Frames(threading.local):
    """Per thread: one list of queued callbacks per backward pass running (innermost last)."""

    def __init__(self) -> None:
        self.stack: list[list[Callable[[], None]]] = []
        # per pass running: whether it accumulates into every leaf (no ``inputs=``, not
        # ``autograd.grad``), what a reentrant checkpoint needs (``is_checkpoint_valid``)
        self.all_leaves: list[bool] = []


_FRAMES = _Frames()


def queue_callback(callback: Callable[[], None]) -> None:
    """Run ``callback()`` when the backward pass running on this thread has finished (every
    gradient accumulated, the graph freed), before ``backward()`` returns; callbacks run in
    the order they were queued, and a callback may queue more. A pass that raises drops its
    callbacks. Only during a backward pass (from a hook, a custom Function's ``backward``).

    >>> import jitgrad
    >>> from jitgrad.autograd.engine import queue_callback
    >>> x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    >>> seen = []
    >>> _ = x.register_hook(lambda g: queue_callback(lambda: seen.append(x.grad.tolist())))
    >>> (x * 3).sum().backward()
    >>> seen
    [[3.0, 3.0]]
    """
    stack = _FRAMES.stack
    if not stack:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    stack[-1].append(callback)


def is_checkpoint_valid() -> bool:
    """Whether the backward pass running on this thread (if any) accumulates into every
    leaf: false inside ``autograd.grad`` or ``backward(inputs=...)``, where a reentrant
    checkpoint cannot give its gradients (PyTorch's ``torch.autograd._is_checkpoint_valid``)."""
    runs = _FRAMES.all_leaves
    return runs[-1] if runs else True


def _run_callbacks(queued: list) -> None:
    i = 0
    while i < len(queued):  # a callback may queue another
        queued[i]()
        i += 1


class ExecutionEngine:
    """``Variable._execution_engine``: the engine's entry points PyTorch code reaches
    through it (``queue_callback``)."""

    @staticmethod
    def queue_callback(callback: Callable[[], None]) -> None:
        """See :func:`queue_callback`."""
        queue_callback(callback)


execution_engine = ExecutionEngine()


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
                out.append((_ones_grad(t), True))
            else:
                out.append((None, True))
            continue
        if not isinstance(g, Tensor):
            if isinstance(g, (int, float)):
                g = full_like(t, g)
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
        if g._data.dtype != t._data.dtype and t._data.dtype.kind == "f":
            # gradients flow in the output's dtype (node rules rely on it)
            out.append((g.to(t.dtype), True))
            continue
        out.append((g, False))
    return out


def _ones_grad(t: Tensor) -> Tensor:
    """``ones_like(t)``: the implicit gradient of one-element output ``t`` on the generic
    path, a fresh tensor (a hook, ``retain_grad`` or ``.grad`` may keep or modify it). A
    host array outside tracing is what ``ones_like`` makes there, made directly (it runs
    at every ``backward()``); CUDA memory and a tracer (which records the factory) take
    ``ones_like`` itself."""
    d = t._data
    if type(d) is np.ndarray and _TRACE.tracer is None:
        return wrap(np.ones(d.shape, d.dtype))
    return ones_like(t)


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


_SEEDS: dict = {}  # (dtype, shape) -> read-only ones: the implicit seed gradient


def _seed(d) -> Tensor:
    """The implicit gradient of a one-element output ``d``: ones, one shared tensor per
    dtype and shape over a read-only array (a leaf that would keep it as its ``.grad``
    copies it: ``accumulate._must_copy``; an in-place op on it raises)."""
    if type(d) is not np.ndarray:  # CUDA memory: ones on its device, not shared (no
        t = ones_like(wrap(d))       # read-only device memory), marked as the seed
        t._ones_seed = True
        return t
    key = (d.dtype, d.shape)
    t = _SEEDS.get(key)
    if t is None:
        a = np.ones(d.shape, d.dtype)
        a.flags.writeable = False
        t = _SEEDS[key] = wrap(a)
    return t


def is_ones_seed(g: Tensor) -> bool:
    """Whether gradient ``g`` is known to be ones without reading it: an implicit seed
    :func:`_seed` made, unchanged since (a CUDA seed's value read on the host would wait for
    the device)."""
    return g._ones_seed and g._vc[0] == 0


def _leaf_edges_plain(edges) -> bool:
    """Every edge is None or a distinct leaf without hooks (tensor, accumulator, pre/post
    accumulation)."""
    if len(edges) == 1:
        e = edges[0]
        if type(e) is not Tensor:
            return e is None
        if e._hooks or e._post_acc_hooks:
            return False
        acc = e._accumulator
        acc = acc() if acc is not None else None
        return acc is None or not (acc._pre_hooks or acc._post_hooks)
    seen = set()
    for e in edges:
        if e is None:
            continue
        if type(e) is not Tensor or e._hooks or id(e) in seen or e._post_acc_hooks:
            return False
        acc = e._accumulator
        if acc is not None:
            acc = acc()
            if acc is not None and (acc._pre_hooks or acc._post_hooks):
                return False
        seen.add(id(e))
    return True


#: longest chain of nodes ``_backward_chain`` walks (longer graphs take the traversal)
_CHAIN_MAX = 8


def _chain_node_plain(node) -> bool:
    """No hooks, retained grads or user code on ``node``."""
    return (node._tensor_hooks is None and not node._user_code and node._retain is None
            and node._pre_hooks is None and node._post_hooks is None)


def _backward_chain(t: Tensor, retain: bool) -> bool:
    """The common case of ``loss.backward()`` run without the generic traversal: a chain
    of nodes, each with one edge to the next node (its other edges None), the last one's
    edges plain leaves -- one node (a compiled function's, any op's), a loss's nodes
    over a compiled model's (``NllLossBackward0 -> LogSoftmaxBackward0 ->
    CompiledFunctionBackward``), ``(x * y).sum()`` -- an implicit seed, no hooks, no
    tracer, and no part of the chain the traversal might run fused
    (:func:`fused_regions.chain_may_fuse`). The same rules run in the same order on the
    same gradients, and the leaves accumulate after every node has run, as :class:`_Run`
    does: same results and effects. False when the case does not apply (the caller takes
    the generic path)."""
    node = t._grad_fn
    d = t._data
    if node is None or d.size != 1 or d.dtype.kind != "f":
        return False
    chain = []
    hops = []  # per node but the last: (index of its edge to the next node, that edge)
    while True:
        if len(chain) == _CHAIN_MAX or not _chain_node_plain(node):
            return False
        chain.append(node)
        edges = node.next_edges
        links = [(k, e) for k, e in enumerate(edges) if e is not None]
        if not any(type(e) is tuple for _, e in links):
            if not _leaf_edges_plain(edges):
                return False
            break
        if len(links) != 1:
            return False
        hops.append(links[0])
        node = links[0][1][0]
    if len(chain) > 1 and config.eager_fusion and fused_regions.chain_may_fuse(chain):
        return False
    n = chain[0].n_outputs
    if n == 1:
        grads = [_seed(d)]
    else:
        grads = [None] * n
        grads[t._output_nr] = _seed(d)
    state = grad_mode.STATE
    prev = state.enabled
    state.enabled = False  # as _Run: the rules and the accumulation run without grad mode
    ran = 0
    try:
        last = chain[-1]
        for node, (k, (child, nr)) in zip(chain, hops + [(None, (None, None))]):
            out = node.apply(grads) if retain else node.apply_final(grads)
            ran += 1
            if node is last:
                break
            g = out[k]
            if g is None:  # nothing flows on: the rest of the chain runs no rule
                out = None
                break
            grads = [None] * child.n_outputs
            grads[nr] = g
        if out is not None:
            if len(out) == 1:
                e, g = last.next_edges[0], out[0]
                if e is not None and g is not None:
                    accumulate_into_leaf(e, g, False)
            else:
                ids = [id(g) for g in out if g is not None]
                repeated = len(set(ids)) != len(ids)
                for e, g in zip(last.next_edges, out):
                    if e is not None and g is not None:
                        accumulate_into_leaf(e, g, repeated and ids.count(id(g)) > 1)
    finally:
        state.enabled = prev
    if not retain:  # the nodes that ran (as _Run releases its executed ones)
        for node in chain[:ran]:
            node.release()
    return True


def _autocast_mode():
    from ..amp import autocast_mode

    return autocast_mode


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves of their graph."""
    if AUTOCASTING and _autocast_mode().autocasting():
        with _autocast_mode().suspended():  # backward runs in the dtypes the forward chose
            return _backward(tensors, grad_tensors, retain_graph, create_graph, inputs)
    return _backward(tensors, grad_tensors, retain_graph, create_graph, inputs)


def _backward(tensors, grad_tensors, retain_graph, create_graph, inputs) -> None:
    if (type(tensors) is Tensor and grad_tensors is None and inputs is None and not create_graph
            and tensors._requires_grad and _TRACE.tracer is None and not _ANOMALY[0]
            and _PROFILING[0] is None and grad_mode.DUAL_LEVEL[0] is None
            and _backward_chain(tensors, bool(retain_graph))):
        return
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
         only_inputs=True, allow_unused=None, is_grads_batched=False,
         materialize_grads=False, _raw_inputs: bool = False):
    """Gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated).
    ``only_inputs`` is PyTorch's deprecated, ignored argument (gradient-penalty code passes
    it).

    >>> import jitgrad
    >>> x = jitgrad.tensor(3.0, requires_grad=True)
    >>> jitgrad.autograd.grad(x ** 2, x)
    (tensor(6.),)
    """
    if is_grads_batched:
        return _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)
    if AUTOCASTING and _autocast_mode().autocasting():
        with _autocast_mode().suspended():  # backward runs in the dtypes the forward chose
            return grad(outputs, inputs, grad_outputs, retain_graph, create_graph,
                        only_inputs, allow_unused, is_grads_batched, materialize_grads,
                        _raw_inputs)
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
    _check_roots(outputs)  # (PyTorch checks the outputs first)
    for t in inputs:
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    grads = _make_grads(outputs, grad_outputs)
    run = _Run(outputs, grads, retain_graph, create_graph, inputs, capture=True)
    run.raw_inputs = _raw_inputs  # the compiler's backward trace: the inputs' own hooks
    run.run()                     # run later, when the compiled backward delivers
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
                g = zeros_like(t)
        result.append(g)
    del single
    return tuple(result)


def _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads) -> tuple:
    """``grad(..., is_grads_batched=True)``: the first dimension of every grad_output is a
    batch; each input's gradient gets the same leading dimension. PyTorch vmaps its backward;
    this runs one backward per batch item (the graph kept until the last) and stacks the
    results -- the same values, its errors. An input no item reaches is None (with
    ``materialize_grads``: zeros of the input's own shape, as PyTorch gives)."""
    from ..ops.concat import stack

    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    grad_outputs = _as_tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad requires one grad_output per output: got "
                           f"{len(grad_outputs)} grad_outputs for {len(outputs)} outputs")
    sizes = []
    for i, (t, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if t._requires_grad:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            continue
        if not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got "
                            f"{type(g).__name__}")
        if g._data.ndim == 0 or g._data.shape[1:] != t._data.shape:
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions "
                "are expected to match the shape of corresponding output, but a mismatch "
                f"was detected: grad_output[{i}] has a shape of "
                f"{_size_str(g._data.shape[1:])} and output[{i}] has a shape of "
                f"{_size_str(t._data.shape)}. If you only want some tensors in `grad_output` "
                "to be considered batched, consider using vmap.")
        sizes.append(g._data.shape[0])
    if len(set(sizes)) > 1:
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    batch = sizes[0] if sizes else 0
    if retain_graph is None:
        retain_graph = create_graph
    per_item = [grad(outputs, inputs, tuple(None if g is None else g[b] for g in grad_outputs),
                     retain_graph=retain_graph if b == batch - 1 else True,
                     create_graph=create_graph, allow_unused=True)
                for b in range(batch)]
    result = []
    for i, t in enumerate(inputs):
        if not per_item:
            result.append(zeros_like(t).expand(0, *t.shape).contiguous())
            continue
        gs = [p[i] for p in per_item]
        if gs[0] is None:
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in "
                    "the graph. Set allow_unused=True if this is the desired behavior.")
            result.append(zeros_like(t) if materialize_grads else None)
        else:
            result.append(stack(gs))
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


_LEAF_PRIORITY = float("-inf")


class _Run:
    """One backward pass over the graph reachable from ``roots``.

    The pass is transactional: gradients are computed first, and only when every node has
    run are they accumulated into ``.grad`` and the saved tensors of the executed nodes
    freed. A pass that raises (a hook, a custom Function's bad gradient, a modified saved
    tensor) leaves every ``.grad`` and the graph as they were -- except the ``.grad`` of
    leaves with post-accumulate-grad hooks: those are accumulated as soon as their gradient
    is complete and their hooks run then, during the pass, as in PyTorch (so
    DistributedDataParallel starts a bucket's allreduce while the rest of the backward runs).
    """

    __slots__ = ("roots", "grads", "retain", "create", "inputs", "capture", "captured",
                 "_slots", "_capture_nodes", "_effects", "_executed", "raw_inputs")

    def __init__(self, roots, grads, retain, create, inputs, capture):
        self.roots = roots
        self.grads = grads
        self.retain = retain
        self.create = create
        self.inputs = inputs
        self.capture = capture
        self.captured = [None] * len(inputs) if inputs is not None else None
        self.raw_inputs = False
        self._effects = []   # ("acc", leaf, grad, shared) / ("retain", tensor, grad)
        self._executed = []  # nodes whose saved tensors are freed at the end
        # where to intercept gradients of the requested inputs; the ids of the nodes
        # whose outputs are among them
        self._slots = self._capture_nodes = None
        if inputs is not None:
            slots = {}
            for i, t in enumerate(inputs):
                key = (id(t),) if t._grad_fn is None else (id(t._grad_fn), t._output_nr)
                slots.setdefault(key, []).append(i)
            self._slots = slots
            self._capture_nodes = {k[0] for k in slots if len(k) == 2}

    def run(self) -> None:
        tr = _TRACE.tracer
        if tr is not None:
            tr.on_backward()
        state = grad_mode.STATE
        prev = state.enabled
        state.enabled = self.create
        stack = _FRAMES.stack
        queued: list = []
        stack.append(queued)
        _FRAMES.all_leaves.append(self.inputs is None)
        try:
            self._traverse()
            self._commit()
            if queued:
                _run_callbacks(queued)
        finally:
            state.enabled = prev
            stack.pop()
            _FRAMES.all_leaves.pop()

    def _commit(self) -> None:
        for eff in self._effects:
            if eff[0] == "acc":
                accumulate_into_leaf(eff[1], eff[2], eff[3])
            else:
                t, g = eff[1], eff[2]
                t._grad = (g if self.create else g.detach().clone()) if t._grad is None \
                    else t._grad + g
        if not self.retain:
            for node in self._executed:
                node.release()

    # -------------------------------------------------------------------- bookkeeping
    @staticmethod
    def _dependencies(root_nodes):
        """In-degree of every node (and leaf) reachable from the roots; iterative DFS."""
        deps: dict = {}
        seen = {id(n) for n in root_nodes}
        stack = list(root_nodes)
        while stack:
            n = stack.pop()
            for e in n.next_edges:
                if e is None:
                    continue
                if type(e) is tuple:
                    tgt = e[0]
                    k = id(tgt)
                    deps[k] = deps.get(k, 0) + 1
                    if k not in seen:
                        seen.add(k)
                        stack.append(tgt)
                else:
                    k = id(e)
                    deps[k] = deps.get(k, 0) + 1
        return deps

    def _needed_nodes(self, root_nodes):
        """ids of nodes/leaves from which some requested input is reachable. Under the
        compiler's backward trace (``raw_inputs``) the inputs are where it stops: a non-leaf
        input's node is not looked below (the traced call's arguments are its inputs; their
        own history -- an earlier call of the same compiled module, fed back, whose backward
        also reaches the captured weights -- is not the call's)."""
        slots = self._slots
        capture_nodes = self._capture_nodes
        stop_at_inputs = self.raw_inputs
        needed = set()
        visited = set()
        for r in root_nodes:
            if id(r) in visited:
                continue
            visited.add(id(r))
            stack = [(r, iter(r.next_edges))]
            while stack:
                node, it = stack[-1]
                for e in it:
                    if e is None:
                        continue
                    if type(e) is tuple:
                        child = e[0]
                        if id(child) not in visited:
                            visited.add(id(child))
                            if stop_at_inputs and id(child) in capture_nodes:
                                needed.add(id(child))
                                continue
                            stack.append((child, iter(child.next_edges)))
                            break
                    elif (id(e),) in slots:
                        needed.add(id(e))
                else:
                    stack.pop()
                    nid = id(node)
                    if nid in capture_nodes:
                        needed.add(nid)
                        continue
                    for e in node.next_edges:
                        if e is not None and id(e[0] if type(e) is tuple else e) in needed:
                            needed.add(nid)
                            break
        return needed

    # ------------------------------------------------------------------------ traversal
    def _traverse(self) -> None:
        buffers: dict = {}   # id(node) -> per-output grads
        shared_ids = set()   # ids of grads we don't own (user's, hook results, routed twice)
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
                root_nodes.append(fn)
            nr = t._output_nr
            buf[nr] = g if buf[nr] is None else buf[nr] + g
        deps = self._dependencies(root_nodes)
        needed = self._needed_nodes(root_nodes) if self._slots is not None else None
        # the compiler's backward trace stops at its inputs: a non-leaf input's node
        # captures its gradient and runs no rule (see _needed_nodes)
        capture_nodes = self._capture_nodes
        inputs_end = capture_nodes if self.raw_inputs and capture_nodes else ()
        for t, g in leaf_roots:
            self._deliver_leaf(t, g, id(g) in shared_ids)

        anomaly = _ANOMALY[0]  # (node by node, each node's results checked)
        fuse = fused_regions.try_region if (
            not self.create and config.eager_fusion and _TRACE.tracer is None
            and not anomaly) else None
        declined: set = set()  # nodes of regions that run node by node
        min_size = fused_regions.MIN_ELEMENTS
        heap = [(-n.seq, i, n) for i, n in enumerate(root_nodes) if id(n) not in deps]
        heapq.heapify(heap)
        counter = len(heap)
        leaf_bufs: dict = {}
        arrived = fused_regions.Arrived(buffers, leaf_bufs) if fuse is not None else None
        executed = self._executed
        retain, slots = self.retain, self._slots
        pop, push = heapq.heappop, heapq.heappush
        profiling = _PROFILING[0]  # (jitgrad.profiler: one event per node run)
        while heap:
            obj = pop(heap)[2]
            k = id(obj)
            if type(obj) is Tensor:  # a leaf: all contributions have arrived
                g = leaf_bufs.pop(k)
                self._deliver_leaf(obj, g, id(g) in shared_ids)
                continue
            node = obj
            grads = buffers.pop(k)
            if profiling is not None:
                started = _now_ns()
            edges = node.next_edges
            if (node._tensor_hooks is not None or node._retain is not None
                    or node._pre_hooks is not None
                    or (capture_nodes is not None and k in capture_nodes)):
                grads = self._pre_node(node, grads, shared_ids)
            region = None
            if fuse is not None:  # (a large gradient, or a node that broadcasts or sums)
                g0 = grads[0]
                if (g0 is not None and g0._data.size >= min_size) or node.in_meta is not None:
                    region = fuse(node, grads, deps, shared_ids, declined, needed, slots,
                                  arrived)
            if region is not None:  # node and the element-wise region it heads, fused
                executed.extend(region[0])
                pairs = region[1]
            else:
                if (needed is None or any(
                        e is not None and id(e[0] if type(e) is tuple else e) in needed
                        for e in edges)) and k not in inputs_end:
                    if anomaly:
                        out_grads = apply_checked(node, grads, retain)
                    else:
                        out_grads = node.apply(grads) if retain else node.apply_final(grads)
                    if node._post_hooks is not None:
                        out_grads = self._post_node(node, out_grads, grads)
                    if len(out_grads) > 1:
                        _mark_repeats(out_grads, shared_ids)
                    pairs = zip(edges, out_grads)
                else:
                    pairs = zip(edges, (None,) * len(edges))
                executed.append(node)
            if profiling is not None:
                profiling.add(_node_event(node, region), started, _now_ns(), "cpu_op")
            for e, g in pairs:
                if e is None:
                    continue
                if type(e) is tuple:
                    tgt, nr = e
                    tk = id(tgt)
                    if needed is not None and tk not in needed:
                        continue
                    if g is not None:
                        buf = buffers.get(tk)
                        if buf is None:
                            buf = buffers[tk] = [None] * tgt.n_outputs
                        buf[nr] = g if buf[nr] is None else buf[nr] + g
                    d = deps[tk] - 1
                    deps[tk] = d
                    if d == 0:
                        if tk in buffers:
                            push(heap, (-tgt.seq, counter, tgt))
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
                        push(heap, (_LEAF_PRIORITY, counter, e))
                        counter += 1

    def _skip(self, node, deps, buffers, needed):
        """A node reached with no gradient at all: it runs no rule; propagate 'nothing'."""
        stack = [node]
        while stack:
            n = stack.pop()
            self._executed.append(n)
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

    def _pre_node(self, node, grads, shared_ids):
        """Tensor hooks, retain_grad, captures for grad(), node pre-hooks."""
        th = node._tensor_hooks
        if th:
            for nr, hooks in th.items():
                g = grads[nr]
                if self.raw_inputs and self._slots and (id(node), nr) in self._slots:
                    continue
                if g is not None and hooks:
                    ng = _call_tensor_hooks(hooks, g)
                    if ng is not g:
                        shared_ids.add(id(ng))
                        grads[nr] = ng
        rt = node._retain
        if rt:
            for nr, ref in rt.items():
                t = ref()
                if t is not None and grads[nr] is not None:
                    self._effects.append(("retain", t, grads[nr]))
        slots = self._slots
        nid = id(node)
        if slots is not None and nid in self._capture_nodes:
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

    @staticmethod
    def _post_node(node, out, grads):
        for fn in list(node._post_hooks.values()):
            r = fn(tuple(out), tuple(grads))
            if r is not None:
                r = tuple(r)
                if len(r) != len(out):  # (every edge needs its entry)
                    raise RuntimeError(
                        f"hook '{getattr(fn, '__name__', 'hook')}' has returned an incorrect "
                        f"number of values (got {len(r)}, but expected {len(out)})")
                out = r
        return out

    def _capture(self, i, g):
        t = self.inputs[i]
        if self.capture:
            prev = self.captured[i]
            self.captured[i] = g if prev is None else prev + g
        elif t._grad_fn is not None:  # backward(inputs=[non-leaf]): accumulate into .grad
            self._effects.append(("acc", t, g, True))

    def _deliver_leaf(self, t: Tensor, g: Tensor, shared: bool) -> None:
        acc = t._accumulator
        acc = acc() if acc is not None else None
        if acc is not None and acc._pre_hooks:
            for fn in list(acc._pre_hooks.values()):
                r = fn((g,))
                if r is not None:
                    g, shared = r[0], True
        hooks = t._hooks
        if hooks and not (self.raw_inputs and self._slots and (id(t),) in self._slots):
            ng = _call_tensor_hooks(hooks, g)
            if ng is not g:
                g, shared = ng, True
        slots = self._slots
        if slots is not None:
            idx = slots.get((id(t),))
            if idx is None:
                return
            if self.capture:
                for i in idx:
                    prev = self.captured[i]
                    self.captured[i] = g if prev is None else prev + g
                return
        if t._post_acc_hooks:  # now, not at the commit: its hooks run during the pass
            accumulate_into_leaf(t, g, shared)
        else:
            self._effects.append(("acc", t, g, shared))
        if acc is not None and acc._post_hooks:
            for fn in list(acc._post_hooks.values()):
                fn((), (g,))


def _mark_repeats(grads, shared_ids) -> None:
    """A gradient object routed to two inputs (e.g. AddBackward) must not be stolen twice."""
    if len(grads) == 2:  # (most nodes with several inputs have two)
        g = grads[0]
        if g is grads[1] and g is not None:
            shared_ids.add(id(g))
        return
    seen = set()
    for g in grads:
        if g is not None:
            gid = id(g)
            if gid in seen:
                shared_ids.add(gid)
            seen.add(gid)


def _node_event(node, region) -> str:
    """The profiler's name for a node the engine ran (PyTorch's), or for the fused region
    of element-wise nodes it heads."""
    if region is None:
        return f"autograd::engine::evaluate_function: {node.name()}"
    names = ", ".join(n.name() for n in region[0])
    return f"autograd::engine::evaluate_function: fused region ({names})"
