"""Eager backward, fused: a region of element-wise nodes runs as one compiled function.

``loss.backward()`` on large tensors is memory-bound: every node of the graph reads and
writes whole arrays, and the gradient of a chain of element-wise ops (W2:
``(tanh(x * w + b) ** 2 * sigmoid(x)).sum()``) runs a dozen kernels over data that one
pass could handle. The graph is complete when ``backward()`` starts, so the engine can see
such a chain whole. When it is about to run a node, :func:`try_region` looks for the
*region* the node heads:

* the node and, recursively, every node all of whose gradient comes from the region, as
  long as its op is fusable (element-wise with a kernel expression, a sum or mean, an
  expand/reshape/permute view), it has no hooks, ``retain_grad`` or saved-tensor hooks,
  and its saved tensors are intact (a modified or freed one: the region is not fused and
  the node by node path raises its usual error);
* the region's *boundary* (leaves, and nodes outside it) gets gradients either from the
  region only, or exactly one from the region and one from elsewhere (a sum of two is the
  same in either order).

The region's VJP rules (:func:`jitgrad.ops.registry.run_rule`, the node path's own) are
replayed in the order the engine would run them, gradients summed in the order they would
arrive, by a function that :func:`jitgrad.compile` compiles once per region *structure*
(ops, params, shapes, which saved array each node reads): its fused kernels compute the
same bits as the node by node path (``docs/architecture.md``: eager == compiled) while
reading each saved array once. A structure is compiled the second time it is seen (a
training loop repeats it; a one-off backward does not pay a compilation), only for regions
of at least :data:`MIN_ELEMENTS` elements (below it, the per-node path is cheaper than the
call). ``JITGRAD_EAGER_FUSION=0`` or ``jitgrad.config.eager_fusion = False`` turns it off.
"""

from __future__ import annotations

import heapq
import math
import os
import threading
import warnings
from collections import OrderedDict

import numpy as np

from ..tensor import wrap

__all__ = ["try_region", "chain_may_fuse", "Arrived", "MIN_ELEMENTS", "MIN_REPEATS", "stats",
           "clear"]

#: fewest elements of a region's largest array for fusing it
MIN_ELEMENTS = 1 << 14
#: a region structure is compiled when seen this many times
MIN_REPEATS = 2
_MAX_STRUCTURES = 256  # structures remembered (least recently used forgotten)

_LOCK = threading.Lock()
_REGIONS: OrderedDict = OrderedDict()  # structure key -> [times seen, compiled fn | False]
_STATS = {"fused": 0, "nodes": 0}


def _reset_after_fork() -> None:
    global _LOCK  # a lock another thread held at the fork stays held in the child
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def stats() -> dict:
    """Counters: regions run fused (``fused``) and the nodes they covered (``nodes``)."""
    return dict(_STATS)


def clear() -> None:
    """Forget every region structure and its compiled function (tests)."""
    with _LOCK:
        _REGIONS.clear()
        _STATS.update(fused=0, nodes=0)


def _fusable_op(op) -> bool:
    return op is not None and (
        (op.kind == "elementwise" and op.fusable and op.expr is not None)
        or op.fusable_reduction or op.broadcast or op.keeps_order or op.permutes)


def _plain(node) -> bool:
    """A node the region may take: a registered op's, fusable, no hooks, saved intact."""
    return (_fusable_op(getattr(node, "op", None)) and not node.complex_rule
            and node._tensor_hooks is None
            and node._retain is None and node._pre_hooks is None
            and node._post_hooks is None and not node._freed)


def _elements(node, grads) -> int:
    meta = node.in_meta
    if meta:
        return max((math.prod(m[0]) for m in meta if m is not None), default=0)
    for s in node.saved or ():
        if type(s) is tuple:
            return (s[0]._data if s[0] is not None else s[1]).size
    g = grads[0]
    return g._data.size if g is not None else 0


def chain_may_fuse(chain) -> bool:
    """Whether the engine's node by node traversal of ``chain`` might run part of it fused:
    ``chain``, nodes each of which has one edge to the next and no other to a node, run
    from a one-element seed gradient on the first (the engine's ``_backward_chain``). A
    region needs its head and the head's one child fusable (:func:`_plain`), and the
    head's element count (:func:`_elements`) at least :data:`MIN_ELEMENTS`; that count is
    known before the node runs where ``in_meta`` gives it, and for the first node without
    ``in_meta`` (its gradient is the seed: the engine does not look for a region there);
    otherwise the answer is yes."""
    for i in range(len(chain) - 1):
        node = chain[i]
        meta = node.in_meta
        if meta:
            if _elements(node, None) < MIN_ELEMENTS:
                continue
        elif not i and meta is None:
            continue
        if _plain(node) and _plain(chain[i + 1]):
            return True
    return False


def _captured(node, slots) -> bool:
    """Whether ``grad()`` (or ``backward(inputs=)``) takes a gradient of this node's output."""
    nid = id(node)
    return any((nid, nr) in slots for nr in range(node.n_outputs))


class Arrived:
    """``k in arrived``: whether a gradient has arrived at node or leaf ``k`` (by id) and
    waits in the engine's buffers (made once per backward pass, over the engine's two
    dicts)."""

    __slots__ = ("nodes", "leaves")

    def __init__(self, nodes: dict, leaves: dict) -> None:
        self.nodes, self.leaves = nodes, leaves

    def __contains__(self, k: int) -> bool:
        return k in self.nodes or k in self.leaves


_NONE_ARRIVED = Arrived({}, {})


def _grow(root, deps, needed, slots, pending) -> list | None:
    """The region's nodes: the root and every fusable node whose gradients all come from
    nodes already in it (``deps``: the engine's in-degrees still to arrive; ``pending``:
    the engine's gradients already arrived, from outside the region -- a node holding one
    stays outside); under ``grad(outputs, inputs)``, only nodes on a path to an input
    (``needed``) whose outputs are not inputs themselves (``slots``)."""
    members = [root]
    inside = {id(root)}
    arrived: dict = {}
    i = 0
    while i < len(members):
        for e in members[i].next_edges:
            if type(e) is tuple:
                c = e[0]
                k = id(c)
                n = arrived.get(k, 0) + 1
                arrived[k] = n
                if (n == deps[k] and k not in inside and k not in pending and _plain(c)
                        and (slots is None or (k in needed and not _captured(c, slots)))):
                    inside.add(k)
                    members.append(c)
        i += 1
    return members if len(members) > 1 else None


def _engine_order(members, deps) -> list:
    """The region's nodes in the order the engine runs them: the latest created (highest
    ``seq``) of the ready ones first, a node ready once all its gradients have arrived."""
    inside = {id(n) for n in members}
    left = {id(n): deps[id(n)] for n in members[1:]}
    heap = [(-members[0].seq, 0, members[0])]
    order = []
    count = 1
    while heap:
        n = heapq.heappop(heap)[2]
        order.append(n)
        for e in n.next_edges:
            if type(e) is tuple and id(e[0]) in inside:
                k = id(e[0])
                left[k] -= 1
                if left[k] == 0:
                    heapq.heappush(heap, (-e[0].seq, count, e[0]))
                    count += 1
    return order


def _saved_array(entry):
    """The array of a plain saved entry if its version is intact, else None."""
    if entry[0] is not None:  # (tensor, version)
        t = entry[0]
        return t._data if t._vc[0] == entry[1] else None
    return entry[1] if entry[2][0] == entry[3] else None  # an output: (None, data, vc, ...)


def _classify(node, index, order) -> list | None:
    """A node's saved entries: None (not saved), ``("c", number)``, ``("a", array)``, or
    ``("r", m, array)`` -- the output of region node ``m``, a cheap element-wise op whose
    inputs are all saved (recomputing it may save reading the array); None where an entry
    cannot be fused (modified, freed, under saved-tensor hooks)."""
    out: list = []
    for s in node.saved or ():
        if s is None:
            out.append(None)
        elif type(s) in (float, int, bool):
            out.append(("c", s))  # a number the op saved (``x * 1.5``)
        elif type(s) is not tuple:
            return None  # a saved-tensor hook's entry
        else:
            a = _saved_array(s)
            if a is None:
                return None
            m = _producer(s, index, order)
            out.append(("a", a) if m is None else ("r", m, a))
    return out


_CHEAP: dict = {}  # (op name, params, dtype) -> cheap to recompute


def _producer(entry, index, order) -> int | None:
    """The index of the region node whose output a saved input ``entry`` is, where that
    node is a cheap element-wise op (``partition.cheap_op``) with every input saved."""
    t = entry[0]
    if t is None or t._output_nr or t._grad_fn is None:
        return None
    m = index.get(id(t._grad_fn))
    if m is None:
        return None
    node = order[m]
    nin = len(node.next_edges)
    saved = node.saved
    if saved is None or len(saved) < nin or any(x is None for x in saved[:nin]):
        return None
    params = node.params
    p = _params_key(params)
    if p is False:
        return None
    key = (node.op.name, p, t._data.dtype)
    cheap = _CHEAP.get(key)
    if cheap is None:
        from ..compiler.partition import cheap_op

        if len(_CHEAP) > 4096:  # (params that change every call: bounded)
            _CHEAP.clear()
        cheap = _CHEAP[key] = t._data.dtype.kind == "f" and cheap_op(
            node.op, params or {}, t._data.dtype)
    return m if cheap else None


def _params_key(params):
    """A node's params as a hashable key (None: none), or False where they cannot be one."""
    if not params:
        return None
    try:
        p = tuple(sorted(params.items()))
        hash(p)
    except TypeError:
        return False
    return p


def _reads_only(entries, nin: int, reads: set) -> bool:
    """Whether a node's first ``nin`` saved entries (its inputs) are numbers or arrays
    the region reads anyway."""
    return all(c[0] == "c" or (c[0] == "a" and id(c[1]) in reads) for c in entries[:nin])


def _describe(order, grads, deps, pending):
    """(structure key, argument arrays, boundary slots per edge) of a region, or None where
    it cannot be fused (a saved array modified, not on the CPU, unhashable params, a
    boundary target also fed from outside in a way whose sum order would change: more than
    two gradients in all, counting one already arrived -- ``pending`` -- where the region
    sums two or more of them first)."""
    index = {id(n): i for i, n in enumerate(order)}
    args: list = []
    arg_of: dict = {}

    def arg(a) -> int | None:
        if type(a) is not np.ndarray:
            return None
        j = arg_of.get(id(a))
        if j is None:
            j = arg_of[id(a)] = len(args)
            args.append(a)
        return j

    root_grads = []
    for g in grads:
        if g is None:
            root_grads.append(None)
            continue
        j = arg(g._data)
        if j is None:
            return None
        root_grads.append(j)
    entries = [_classify(n, index, order) for n in order]
    if any(x is None for x in entries):
        return None
    reads = {id(c[1]) for es in entries for c in es if c is not None and c[0] == "a"}
    slots: dict = {}      # id(target), nr -> slot
    fed: dict = {}        # id(target) -> region edges into it
    nodes = []
    for n, es in zip(order, entries):
        saved = []
        for c in es:
            if c is None or c[0] == "c":
                saved.append(c)
            elif c[0] == "r" and _reads_only(entries[c[1]], len(order[c[1]].next_edges),
                                             reads):
                saved.append(("r", c[1]))  # recomputed from what the region reads anyway
            else:
                j = arg(c[-1])
                if j is None:
                    return None
                saved.append(j)
        edges = []
        for e in n.next_edges:
            if e is None:
                edges.append(None)
            elif type(e) is tuple and id(e[0]) in index:
                edges.append(("n", index[id(e[0])], e[1]))
            else:
                tgt, nr = (e[0], e[1]) if type(e) is tuple else (e, 0)
                k = id(tgt)
                fed[k] = fed.get(k, 0) + 1
                edges.append(("b", slots.setdefault((k, nr), len(slots))))
        p = _params_key(n.params)
        if p is False:
            return None
        nodes.append((n.op.name, p, n.in_meta, tuple(saved), tuple(edges)))
    for k, n in fed.items():
        if k in pending:  # one arrived already: the sum of two only
            if n != 1 or deps[k] != 1:
                return None
        elif n != deps[k] and not (n == 1 and deps[k] == 2):
            return None
    shapes = tuple((a.shape, a.dtype.str) for a in args)
    return (tuple(nodes), tuple(root_grads), shapes), args, len(slots)


def _replay(ops, key, n_slots, tensors):
    """The region's gradients, node by node (what the engine would compute): traced by
    :func:`jitgrad.compile`, and run by it as fused kernels."""
    nodes, root_grads, _ = key
    bufs: dict = {0: [tensors[j] if j is not None else None for j in root_grads]}
    outs: list = [None] * n_slots
    made: dict = {}  # region node -> its output, recomputed
    for i, (op, (_, params, in_meta, saved, edges)) in enumerate(zip(ops, nodes)):
        grads = bufs.pop(i, None)
        if grads is None or all(g is None for g in grads):
            continue  # no gradient reached it (the engine skips it too)
        vals = [_value(j, ops, nodes, tensors, made) for j in saved]
        nin = len(edges)
        ins = tuple(vals[:nin]) if vals else (None,) * nin
        out = vals[nin] if op.save_out and vals else None
        needs = tuple(e is not None for e in edges)
        res = _run_rule(op, dict(params) if params else params, in_meta, needs, ins, out,
                        grads)
        for e, g in zip(edges, res):
            if e is None or g is None:
                continue
            if e[0] == "n":
                buf = bufs.setdefault(e[1], [None] * ops[e[1]].n_outputs)
                buf[e[2]] = g if buf[e[2]] is None else buf[e[2]] + g
            else:
                s = e[1]
                outs[s] = g if outs[s] is None else outs[s] + g
    return tuple(outs)


def _value(spec, ops, nodes, tensors, made):
    """A saved entry's value in the replay: an argument, a number, or a region node's
    output recomputed by its own op from its saved inputs (the forward kernel's bits)."""
    if type(spec) is int:
        return tensors[spec]
    if spec is None or spec[0] == "c":
        return spec if spec is None else spec[1]
    m = spec[1]
    v = made.get(m)
    if v is None:
        from ..ops.dispatch import elementwise

        _, params, _, saved, edges = nodes[m]
        ins = tuple(_value(j, ops, nodes, tensors, made) for j in saved[:len(edges)])
        v = made[m] = elementwise(ops[m], ins, dict(params) if params else None)
    return v


def _run_rule(*a):
    from ..ops.registry import run_rule

    return run_rule(*a)


def _log(msg: str) -> None:
    from ..jit.function import _log as log

    log("fusion", f"eager backward region {msg}")


def _runs_eagerly(fn) -> bool:
    from ..jit.entry import EagerEntry

    return any(isinstance(e, EagerEntry) for es in fn._entries.values() for e in es)


def _compile(order, key, n_slots):
    from ..jit.function import compile as jit_compile

    ops = [n.op for n in order]

    def eager_backward_region(*tensors):
        return _replay(ops, key, n_slots, tensors)

    return jit_compile(eager_backward_region, fullgraph=True)


def try_region(root, grads, deps, shared_ids: set, declined: set, needed=None, slots=None,
               pending=None):
    """Run the region headed by ``root`` (its output gradients ``grads``) fused, if it has
    one worth fusing: returns ``(nodes, pairs)`` -- the region's nodes (executed) and, for
    every edge leaving it, ``(edge, gradient or None)`` for the engine to deliver (a
    target's summed gradient on its first edge) -- or None (the engine runs ``root``
    alone). ``declined``: ids of nodes of this pass's regions that run node by node (not
    looked at again: their sub-regions are not structures of their own); ``needed`` and
    ``slots``: the engine's, under ``grad()`` / ``backward(inputs=)``; ``pending``: the
    engine's gradients that have arrived and wait (an :class:`Arrived`)."""
    pending = _NONE_ARRIVED if pending is None else pending
    if (id(root) in declined or not _plain(root) or _elements(root, grads) < MIN_ELEMENTS
            or (slots is not None and id(root) not in needed)):
        return None
    members = _grow(root, deps, needed, slots, pending)
    if members is None:
        return None
    declined.update(id(n) for n in members)  # (unless it runs fused below: then unused)
    order = _engine_order(members, deps)
    described = _describe(order, grads, deps, pending)
    if described is None:
        return None
    key, arrays, n_slots = described
    with _LOCK:
        entry = _REGIONS.get(key)
        if entry is None:
            entry = _REGIONS[key] = [0, None]
            if len(_REGIONS) > _MAX_STRUCTURES:
                _REGIONS.popitem(last=False)
        else:
            _REGIONS.move_to_end(key)
        entry[0] += 1
        if entry[1] is False or entry[0] < MIN_REPEATS:
            return None
        fn = entry[1]
        first = fn is None
        if first:
            fn = entry[1] = _compile(order, key, n_slots)
        try:
            if first:  # (jitgrad.compile's warnings are about this internal function)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    outs = fn(*(wrap(a) for a in arrays))
            else:
                outs = fn(*(wrap(a) for a in arrays))
        except Exception as exc:  # nothing ran: node by node computes it (or raises)
            entry[1] = False
            _log(f"{[n.op.name for n in order]} runs node by node: the compiler refused "
                 f"it ({type(exc).__name__}: {exc})")
            return None
        if first and _runs_eagerly(fn):
            entry[1] = False  # jitgrad.compile ran it eagerly: node by node is as good
        _STATS["fused"] += 1
        _STATS["nodes"] += len(order)
    inputs = {id(a) for a in arrays}
    seen: set = set()
    for g in outs:
        if g is not None and (id(g) in seen or id(g._data) in inputs
                              or g._data.base is not None):
            shared_ids.add(id(g))  # not the region's own fresh array: copied if kept
        if g is not None:
            seen.add(id(g))
    pairs = []
    given: set = set()
    for n, (_, _, _, _, edges) in zip(order, key[0]):
        for e, spec in zip(n.next_edges, edges):
            if spec is None or spec[0] != "b":
                continue
            s = spec[1]
            pairs.append((e, None if s in given else outs[s]))
            given.add(s)
    return order, pairs
