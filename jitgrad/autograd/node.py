"""Graph nodes (``grad_fn`` objects), saved tensors with version checks, AccumulateGrad.

Every backward node is an instance of a small subclass of :class:`Node` named as PyTorch names
it (``PowBackward0``...), created once per name. A node holds its edges to the next nodes
(``(Node, output_nr)``, or a leaf :class:`~jitgrad.tensor.Tensor` for gradient accumulation,
or ``None``), its saved tensors and the op parameters its VJP rule needs.
"""

from __future__ import annotations

import itertools
import threading
import weakref

from ..tensor import RemovableHandle, Tensor, _HookDict, alias
from .accumulate import accumulate_into_leaf
from .anomaly import MODE as _ANOMALY
from .anomaly import forward_stack

__all__ = ["Node", "AccumulateGrad", "node_class", "make_node", "init_node", "edge", "next_seq",
           "nodes_between",
           "save_input", "save_output", "unpack", "FREED_MESSAGE", "HookedSaved",
           "SAVED_HOOKS"]

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward."
)

_seq = itertools.count()
_new = object.__new__


def _type_name(t: Tensor) -> str:
    return f"jitgrad.{t.dtype.tensor_type}"


def _strip_backward(name: str) -> str:
    i = name.find("Backward")
    return name[:i] if i > 0 else name


class _SavedHooks(threading.local):
    """The ``(pack, unpack)`` pairs of the ``saved_tensors_hooks`` contexts open on this
    thread, innermost last (``jitgrad.autograd.graph``); ``active``: how many are open on
    all threads, so saving checks one number while none is."""

    def __init__(self) -> None:
        self.stack: list = []
        self.disabled: list = []  # messages of open disable_saved_tensors_hooks contexts


SAVED_HOOKS = _SavedHooks()
_HOOKS_OPEN = [0]  # open contexts over all threads (graph.py keeps it)


class HookedSaved:
    """A tensor saved under ``saved_tensors_hooks``: what ``pack(tensor)`` returned, the
    ``unpack`` to call when backward (or ``grad_fn._saved_*``) needs it, and the version
    the tensor had (checked at unpacking, as for plain saved tensors)."""

    __slots__ = ("packed", "unpack_hook", "vc", "version", "shape", "dtype", "src",
                 "output_nr", "is_output")

    def unpack_for(self, owner: Node) -> Tensor:
        if self.vc[0] != self.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{self.dtype} {list(self.shape)}] is at version "
                f"{self.vc[0]}; expected version {self.version} instead. Hint: enable anomaly "
                "detection to find the operation that failed to compute its gradient, with "
                "jitgrad.autograd.set_detect_anomaly(True, check_nan=False).")
        t = self.unpack_hook(self.packed)
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                            f"result of type {type(t).__name__}")
        if self.is_output:  # the node's own output (requiring grad): its history
            r = alias(t._data)
            r._requires_grad = True
            r._grad_fn = owner
            if self.output_nr:
                r._output_nr = self.output_nr
            return r
        return t


def _hooked(t: Tensor, output: bool):
    stack = SAVED_HOOKS.stack
    if not stack:
        return None
    pack, unpack_hook = stack[-1]
    e = HookedSaved()
    e.vc, e.version = t._vc, t._vc[0]
    e.shape, e.dtype, e.src = t._data.shape, _type_name(t), id(t)
    e.output_nr, e.is_output = t._output_nr, output and t._requires_grad
    e.unpack_hook = unpack_hook
    e.packed = pack(t)
    return e


def save_input(t: Tensor) -> tuple:
    """A saved input: the tensor and the version it had when saved (under
    ``saved_tensors_hooks``: a :class:`HookedSaved` of what ``pack`` made of it)."""
    if _HOOKS_OPEN[0]:
        e = _hooked(t, False)
        if e is not None:
            return e
    return (t, t._vc[0])


def save_output(t: Tensor) -> tuple:
    """A saved output, kept as array + version counter (not the tensor) so that the
    output -> node -> saved -> output cycle never forms; unpacking rebuilds a tensor whose
    ``grad_fn`` is the owning node (needed for double backward). Under
    ``saved_tensors_hooks``: a :class:`HookedSaved`."""
    if _HOOKS_OPEN[0]:
        e = _hooked(t, True)
        if e is not None:
            return e
    return (None, t._data, t._vc, t._vc[0], t._output_nr, t._requires_grad)


def unpack(entry: tuple, owner: Node) -> Tensor:
    """The tensor of a saved entry, after checking it was not modified in place since."""
    t = entry[0]
    if t is not None:
        if t._vc[0] != entry[1]:
            _raise_modified(entry, owner)
        return t
    _, data, vc, version, nr, req = entry
    if vc[0] != version:
        _raise_modified(entry, owner)
    t = alias(data)
    t._vc = vc
    if req:
        t._requires_grad = True
        t._grad_fn = owner
        if nr:
            t._output_nr = nr
    return t


def _raise_modified(entry: tuple, owner: Node):
    t = entry[0]
    if t is None:
        _, data, vc, version, nr, _ = entry
        shape = list(data.shape)
        tname = f"jitgrad.{_dtype_tensor_type(data)}"
        which = f", which is output {nr} of {_strip_backward(owner.name())},"
    else:
        vc, version = t._vc, entry[1]
        shape = list(t._data.shape)
        tname = _type_name(t)
        which = (f", which is output {t._output_nr} of {_strip_backward(t._grad_fn.name())},"
                 if t._grad_fn is not None else "")
    raise RuntimeError(
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{tname} {shape}]{which} is at version {vc[0]}; expected "
        f"version {version} instead. Hint: enable anomaly detection to find the operation "
        "that failed to compute its gradient, with "
        "jitgrad.autograd.set_detect_anomaly(True, check_nan=False)."
    )


def _dtype_tensor_type(arr) -> str:
    from ..dtypes import from_numpy_dtype

    return from_numpy_dtype(arr.dtype).tensor_type


class Node:
    """Base of all backward nodes. Subclasses implement ``apply(grads) -> tuple``.

    Public API as PyTorch: ``name()``, ``next_functions``, ``register_hook``,
    ``register_prehook``, ``metadata``.
    """

    __slots__ = ("next_edges", "saved", "seq", "in_meta", "__dict__", "__weakref__")

    # rarely-set state in __dict__, class-level defaults
    _freed = False
    _tensor_hooks = None  # output_nr -> _HookDict of tensor hooks
    _retain = None        # output_nr -> weakref of the tensor that retains grad
    _pre_hooks = None
    _post_hooks = None
    _user_code = False    # its apply runs user code (a custom Function's backward)
    complex_rule = False  # it runs an op's complex rule (ops/complex_ops.py): never fused
    n_outputs = 1

    def name(self) -> str:
        return type(self).__name__

    def apply_final(self, grads: list) -> tuple:
        """``apply`` when the engine frees the node right after (no ``retain_graph``): a
        node whose gradients are arrays it holds may hand them over instead of copying."""
        return self.apply(grads)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    @property
    def next_functions(self) -> tuple:
        out = []
        for e in self.next_edges:
            if e is None:
                out.append((None, 0))
            elif type(e) is tuple:
                out.append(e)
            else:  # a leaf tensor
                out.append((AccumulateGrad.for_leaf(e), 0))
        return tuple(out)

    @property
    def metadata(self) -> dict:
        d = self.__dict__.get("_metadata")
        if d is None:
            d = self.__dict__["_metadata"] = {}
        return d

    def _sequence_nr(self) -> int:
        return self.seq

    # ------------------------------------------------------------------------- hooks
    def register_hook(self, fn) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)``, may return replacement ``grad_inputs``."""
        if self._post_hooks is None:
            self._post_hooks = _HookDict()
        h = RemovableHandle(self._post_hooks)
        self._post_hooks[h.id] = fn
        return h

    def register_prehook(self, fn) -> RemovableHandle:
        """``fn(grad_outputs)``, may return replacement ``grad_outputs``."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        h = RemovableHandle(self._pre_hooks)
        self._pre_hooks[h.id] = fn
        return h

    def _add_tensor_hook(self, output_nr: int, fn) -> RemovableHandle:
        if self._tensor_hooks is None:
            self._tensor_hooks = {}
        d = self._tensor_hooks.get(output_nr)
        if d is None:
            d = self._tensor_hooks[output_nr] = _HookDict()
        h = RemovableHandle(d)
        d[h.id] = fn
        return h

    def _add_retain(self, output_nr: int, t: Tensor) -> None:
        if self._retain is None:
            self._retain = {}
        self._retain[output_nr] = weakref.ref(t)

    # ----------------------------------------------------------------------- running
    def apply(self, grads: list) -> tuple:
        raise NotImplementedError

    def release(self) -> None:
        """Free saved tensors (after a backward without ``retain_graph``)."""
        if self.saved is not None:
            self.saved = None
            self._freed = True

    def unpack_saved(self) -> tuple:
        saved = self.saved
        if saved is None:
            if self._freed:
                raise RuntimeError(FREED_MESSAGE)
            return ()
        return tuple(unpack(s, self) if type(s) is tuple else
                     (s.unpack_for(self) if type(s) is HookedSaved else s) for s in saved)


_classes: dict[str, type] = {}


def node_class(name: str, base: type) -> type:
    """The node subclass called ``name`` deriving from ``base`` (created once)."""
    key = (name, base)
    cls = _classes.get(key)
    if cls is None:
        cls = type(name, (base,), {"__slots__": (), "__module__": base.__module__,
                                   "__qualname__": name})
        _classes[key] = cls
    return cls


def edge(t: Tensor):
    """The edge a node keeps to its input ``t``: ``(grad_fn, output_nr)``, the leaf itself
    (its gradient is accumulated), or None (``t`` needs no gradient)."""
    if not t._requires_grad:
        return None
    fn = t._grad_fn
    return t if fn is None else (fn, t._output_nr)


#: the next node sequence number (for nodes made by generated code)
next_seq = _seq.__next__


def nodes_between(roots: list, boundary: set):
    """The nodes reachable from ``roots`` (nodes) through ``next_edges``, each once, not
    going into (nor yielding) the nodes whose ids are in ``boundary``."""
    stack = list(roots)
    seen: set = set()
    while stack:
        n = stack.pop()
        if id(n) in seen or id(n) in boundary:
            continue
        seen.add(id(n))
        yield n
        for e in n.next_edges:
            if type(e) is tuple:
                stack.append(e[0])


def make_node(cls: type, edges: tuple, saved, in_meta) -> Node:
    """A new node of class ``cls`` (every node of jitgrad is made here or, for an object
    that already exists as a custom Function's ``ctx``, set up by :func:`init_node`)."""
    n = _new(cls)  # init_node's lines, inlined: this is on eager mode's per-op path
    n.next_edges = edges
    n.saved = saved
    n.in_meta = in_meta
    n.seq = next(_seq)
    if _ANOMALY[0]:
        n._forward_stack = forward_stack()
    return n


def init_node(n: Node, edges: tuple, saved, in_meta) -> Node:
    """Set a node's edges, saved entries, input metadata ((shape, dtype) per input, or None)
    and its sequence number (the engine runs later nodes first)."""
    n.next_edges = edges
    n.saved = saved
    n.in_meta = in_meta
    n.seq = next(_seq)
    if _ANOMALY[0]:
        n._forward_stack = forward_stack()
    return n


class AccumulateGrad(Node):
    """The node that accumulates a leaf's gradient into ``.grad`` (``variable`` is the leaf)."""

    __slots__ = ("_var",)

    @staticmethod
    def for_leaf(t: Tensor) -> AccumulateGrad:
        ref = t._accumulator
        acc = ref() if ref is not None else None
        if acc is None:
            acc = make_node(AccumulateGrad, (), None, None)
            acc.seq = -1  # runs as soon as its gradient is complete
            acc._var = t
            t._accumulator = weakref.ref(acc)
        return acc

    @property
    def variable(self) -> Tensor:
        return self._var

    def apply(self, grads: list) -> tuple:
        if grads[0] is not None:
            accumulate_into_leaf(self._var, grads[0], False)
        return ()
