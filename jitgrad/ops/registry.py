"""The op registry: every primitive is declared once, as an :class:`OpDef`.

An ``OpDef`` holds everything about an op: its name and the PyTorch name of its backward node,
its fusion kind, the NumPy reference (test oracle and reference interpreter), the scalar
expression the kernel generators compile (element-wise ops), the VJP rule (written with jitgrad
ops, so it runs on tensors in eager backward, builds a graph under ``create_graph=True``, and
runs on tracers when the compiler differentiates a graph), which inputs/outputs the rule needs
saved, the dtype rule and test samples. Tests and code generators iterate over ``REGISTRY``.

It also holds what the rest of jitgrad needs to know about the op, so nothing keeps lists of
op names: *traits* the compiler reads (``fusable``, ``fusable_reduction``, ``view``,
``broadcast``, ``keeps_order``, ``permutes``, ``matmul``), and ``api``, the public functions
that run the op with their ``Tensor`` method, in-place and ``jitgrad`` export names
(declared with ``@api`` on each function, :mod:`jitgrad.ops.api`), from which the method
table and the ``jitgrad`` namespace are derived.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..autograd.node import Node, node_class

__all__ = ["OpDef", "OpNode", "REGISTRY", "defop", "get", "gather", "run_rule", "ELEMENTWISE",
           "REDUCE", "MOVEMENT", "OPAQUE"]

ELEMENTWISE = "elementwise"
REDUCE = "reduce"
MOVEMENT = "movement"
OPAQUE = "opaque"

# dtype rules for element-wise ops
PROMOTE = "promote"   # PyTorch promotion of the inputs
FLOAT = "float"       # promote, then integers/bool -> default float (exp, div, ...)
BOOL = "bool"         # comparisons


class OpNode(Node):
    """Backward node of a registered op: runs the op's VJP rule."""

    __slots__ = ("op", "params")

    def __getattr__(self, name: str):
        """PyTorch's ``_saved_<name>`` attributes (:mod:`jitgrad.ops.saved_names`)."""
        if name.startswith("_saved_"):
            from .saved_names import saved_attribute

            return saved_attribute(self, name[7:])
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def apply(self, grads: list) -> tuple:
        saved = self.unpack_saved()
        nin = len(self.next_edges)
        ins = saved[:nin] if saved else (None,) * nin
        out = saved[nin] if self.op.save_out and saved else None
        return self.rule_runner(self.op, self.params, self.in_meta,
                                tuple(e is not None for e in self.next_edges), ins, out, grads)


def run_rule(op: OpDef, params, in_meta, needs: tuple, ins: tuple, out, grads: list) -> tuple:
    """An op's VJP rule on the output gradients ``grads`` (one per output), the saved inputs
    ``ins`` (None where not saved) and output ``out``: one gradient (or None) per input,
    summed to the input's shape and cast to its dtype where ``in_meta`` says they differ
    (element-wise ops and ``cast_grads`` ops). :meth:`OpNode.apply`, and the replay of a
    region of nodes that eager backward fuses (``autograd/fused_regions.py``)."""
    res = op.vjp(grads[0] if op.n_outputs == 1 else grads, ins, out, params, needs)
    if in_meta is None or (op.kind != ELEMENTWISE and not op.cast_grads):
        return res
    fixed = []
    for g, m, need in zip(res, in_meta, needs):
        if g is None or not need:
            fixed.append(None)
            continue
        shape, dtype = m
        gd = g._data
        if gd.shape != shape:
            from .sums import sum_to

            g = sum_to(g, shape)
        if gd.dtype != dtype:
            g = g.to(_jdtype(dtype))
        fixed.append(g)
    return tuple(fixed)


OpNode.rule_runner = staticmethod(run_rule)  # (ComplexOpNode runs the complex rule)


def _jdtype(np_dtype):
    from ..dtypes import from_numpy_dtype

    return from_numpy_dtype(np_dtype)


@dataclass(eq=False)
class OpDef:
    """Everything about one primitive op.

    ``vjp(g, ins, out, p, needs) -> tuple`` gets the output cotangent ``g``, the saved inputs
    ``ins`` (``None`` where not saved), the saved output ``out`` (or ``None``), the op params
    ``p`` (a dict) and which inputs need a gradient; it returns one gradient (or ``None``) per
    input, written with jitgrad ops. Element-wise gradients are reduced to the input shapes
    (broadcasting) and cast to the input dtypes by the caller.

    The boolean traits after ``extra`` tell the compiler how it may treat the op (fuse it,
    fold it into a broadcast, rewrite it); the compiler reads them, never the op's name.
    """

    name: str
    kind: str
    node: str | Callable[[dict], str] | None
    inputs: tuple[str, ...]
    ref: Callable
    params: tuple[str, ...] = ()
    expr: str | None = None
    vjp: Callable | None = None
    save: tuple[int, ...] = ()
    save_out: bool = False
    save_for: tuple[tuple[int, int], ...] = ()
    """``(i, j)``: saved input ``i`` serves only input ``j``'s gradient, so it is saved only
    when ``j`` is a tensor that requires grad (``x * 2`` keeps nothing: writing into ``x``
    afterwards is no error, as in PyTorch)."""
    dtype_rule: str = PROMOTE
    fwd: Callable | None = None
    n_outputs: int = 1
    cast_grads: bool = False
    samples: Callable | None = None
    doc: str = ""
    extra: dict = field(default_factory=dict)

    # Traits the compiler's passes and fusion read, instead of lists of op names.
    fusable: bool = True
    """Element-wise ops with an ``expr``: may join a fused loop. ``False`` makes the plan run
    the op as a call to its eager forward (``fwd`` when it has one), never fused."""
    fusable_reduction: bool = False
    """A sum a fused loop can compute alongside the element-wise work that feeds it (sum,
    mean); its params hold the summed ``dims``."""
    averages: bool = False
    """A fusable reduction that divides its sum by the number of values summed (mean)."""
    view: bool = False
    """A movement op whose result NumPy gets by indexing or striding its input, never by
    arithmetic (reshape, expand, permute, getitem): a plan runs it as a "view" step."""
    broadcast: bool = False
    """The output is the input broadcast to a larger shape (expand): an element-wise op
    reading it may read the input instead, since it broadcasts its operands anyway."""
    keeps_order: bool = False
    """The output holds the input's elements in the same row-major order, only the shape
    differs (reshape): where only leading size-1 dims differ, it is a broadcast too."""
    copies: bool = False
    """The output is a new array equal to the input, same shape and dtype (clone): its
    ``expr`` is the input itself, and a fused loop may store the value a second time instead
    of a plan step copying it."""
    permutes: bool = False
    """The output is the input with its dims reordered as ``params["dims"]`` (permute)."""
    matmul: bool = False
    """A matrix product ``a @ b`` on BLAS, which takes transposed operands for free:
    ``transpose_matmuls`` rewrites ``(a @ b).T`` as ``b.T @ a.T``."""

    complex: str | Callable | None = None
    """How the op takes complex64/complex128 operands (:mod:`jitgrad.ops.complex_ops`):
    None (default) -- it rejects them with PyTorch's "not implemented for 'ComplexFloat'"
    error (a movement op takes them: its default is ``"holomorphic"``); ``"holomorphic"`` --
    its forward is its NumPy ``ref`` and its ``vjp`` gives PyTorch's (conjugate Wirtinger)
    gradient when run on the *conjugates* of its saved tensors and complex params (true of
    holomorphic functions and of real-linear ones: ``g * b`` becomes ``g * conj(b)``); or a
    callable -- the op's VJP rule for complex operands (``abs``, ``angle``, ``real``...)."""

    api: tuple = ()
    """The public functions that run the op and the names they go by (``Tensor`` methods,
    in-place variants, ``jitgrad`` exports): :class:`jitgrad.ops.api.Api` records, added by
    the :func:`jitgrad.ops.api.api` decorator on each function."""

    @property
    def nin(self) -> int:
        return len(self.inputs)

    @property
    def differentiable(self) -> bool:
        return self.vjp is not None

    def __post_init__(self) -> None:
        self._node_classes: dict[str, type] = {}
        self.fast_kernels: dict = {}  # dtype -> eager kernels (filled on first use)
        if self.complex is None and self.kind == MOVEMENT:
            self.complex = "holomorphic"  # (moves values: no arithmetic to conjugate)
        if isinstance(self.node, str):
            self.node_cls = node_class(self.node, OpNode)
        else:
            self.node_cls = None

    def node_class_for(self, params: dict) -> type:
        """The node class for these params (names can depend on them, e.g. SumBackward0/1)."""
        cls = self.node_cls
        if cls is not None:
            return cls
        name = self.node(params)
        cls = self._node_classes.get(name)
        if cls is None:
            cls = self._node_classes[name] = node_class(name, OpNode)
        return cls

    def __repr__(self) -> str:
        return f"OpDef({self.name!r}, kind={self.kind!r})"


REGISTRY: dict[str, OpDef] = {}


def defop(**kwargs) -> OpDef:
    """Declare and register an op (see :class:`OpDef` for the fields)."""
    op = OpDef(**kwargs)
    if op.name in REGISTRY:
        raise ValueError(f"op {op.name!r} is declared twice")
    REGISTRY[op.name] = op
    return op


def get(name: str) -> OpDef:
    """The registered op called ``name``."""
    return REGISTRY[name]


def gather(namespace: dict, *modules) -> list:
    """Copy the public functions (``__all__``) and the op declarations (upper-case
    :class:`OpDef` constants) of ``modules`` into ``namespace``; returns their names. The
    modules that gather ops declared elsewhere by job (``elementwise``, ``movement``,
    ``reduce``) are made with it."""
    names = []
    for mod in modules:
        public = set(getattr(mod, "__all__", ()))
        for name, value in vars(mod).items():
            if name in public or (name.isupper() and isinstance(value, OpDef)):
                namespace[name] = value
                names.append(name)
    return names
