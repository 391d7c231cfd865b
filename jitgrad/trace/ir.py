"""The static-graph IR: variables, equations, graphs — printable like a jaxpr.

A :class:`Graph` is a straight-line program over array values. Each :class:`Var` is an
array of fixed shape and dtype; an :class:`Eqn` applies a registered op (or a special op:
``random``, ``fill``) to variables and Python literals. Side effects on state outside the
graph are explicit: ``writes`` copy final values into arrays that existed before the call
(parameters updated in place, ``p.grad`` accumulated in place) and ``grad_sets`` replace a
leaf's ``.grad``; ``bumps`` raise the version counters of the tensors written (as the
traced call's in-place ops did), so autograd sees a plan's writes as it sees eager ones.

*Effect equations* (:func:`is_effect`: a special op recorded by ``Tracer.on_effect``, e.g. a
collective of ``jitgrad.distributed``) act on the world outside the graph when they run:
passes never drop, merge or fold them, fusion never puts them in a loop, and plans run them
in their place among the other calls (the order every rank issues its collectives in).

Every Var knows its users (``Var.users``: the equations reading it), kept up to date when an
equation's ``ins`` are set and when equations leave ``Graph.eqns``, as torch.fx's
``Node.users``. :meth:`Graph.check` verifies a graph is well formed; with ``JITGRAD_CHECK_IR=1``
(the test suite sets it) it runs after tracing and after every compiler pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_DTYPE_NAMES: dict = {}


def dtype_name(dtype) -> str:
    """``np.dtype(dtype).name``, memoised (NumPy computes a name in Python at every ask: a
    plan build asks tens of thousands of times)."""
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        name = _DTYPE_NAMES[dtype] = np.dtype(dtype).name
        return name
    except TypeError:  # (unhashable: a dtype spec given as a list)
        return np.dtype(dtype).name

__all__ = ["Var", "Lit", "Eqn", "Source", "Graph", "IRError", "is_effect", "dtype_name"]


@dataclass(eq=False)
class Var:
    """An array value of the graph."""

    n: int
    shape: tuple
    dtype: np.dtype
    kind: str = "op"        # "in" (argument), "ext" (captured), "const", "op"
    source: object = None   # for "in"/"ext": a Source; for "const": the ndarray
    users: dict = field(default_factory=dict, repr=False)  # Eqn -> None, in order of use

    def __repr__(self) -> str:
        return f"%{self.n}"

    @property
    def type_str(self) -> str:
        dims = ",".join(str(s) for s in self.shape)
        return f"{dtype_name(self.dtype)}[{dims}]"


@dataclass(frozen=True)
class Lit:
    """A Python scalar operand (kept as a literal in the graph and in generated code)."""

    value: object

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(eq=False)
class Source:
    """Where an external array lives at run time.

    ``kind``: "arg" (flattened argument ``index``), "tensor" (``obj._data``: a captured
    tensor), "grad" (a leaf's gradient read or written in place: ``obj._grad._data`` for a
    captured leaf ``obj``, ``args[index]._grad._data`` for an argument), "scalar" (``obj =
    (mapping, key, dtype)``: a number read afresh at every call, e.g. an optimizer's
    learning rate, so changing it does not retrace; a ``(key, i)`` key reads item ``i`` of
    the tuple ``mapping[key]``, e.g. Adam's ``betas[0]`` that OneCycleLR replaces).
    """

    kind: str
    obj: object = None
    index: int = -1
    name: str = ""

    def leaf(self, args: list):
        """For a "grad": the leaf whose ``.grad`` it is, in the call of ``args`` -- the
        argument ``index`` (each call's own), or the captured tensor ``obj``."""
        return args[self.index] if self.index >= 0 else self.obj

    def read(self, args: list):
        if self.kind == "arg":
            return args[self.index]._data
        if self.kind == "tensor":
            return self.obj._data
        if self.kind == "scalar":  # a number, or a 0-d tensor holding one (a tensor lr)
            mapping, key, dtype = self.obj
            v = mapping[key[0]][key[1]] if type(key) is tuple else mapping[key]
            return np.asarray(v if type(v) in (float, int) else _value_of(v), dtype)
        g = self.leaf(args)._grad
        if g is None:
            raise RuntimeError("compiled plan expected a .grad that is gone (guard missed)")
        return g._data

    def read_expr(self, name: str) -> tuple[str, object]:
        """:meth:`read` as a Python expression of ``flat`` for generated code, and the
        object to bind to ``name`` in it: an argument's or a captured tensor's array is
        an attribute read, not a call (the rest call :meth:`read`)."""
        if self.kind == "arg":
            return f"flat[{self.index}]._data", None
        if self.kind == "tensor":
            return f"{name}._data", self.obj
        return f"{name}.read(flat)", self

    def tensor(self, args: list):
        """The tensor whose array :meth:`read` returns (None for a "scalar")."""
        if self.kind == "arg":
            return args[self.index]
        if self.kind == "tensor":
            return self.obj
        return self.leaf(args)._grad if self.kind == "grad" else None

    def describe(self) -> str:
        if self.kind == "arg":
            return f"arg{self.index}"
        if self.kind == "grad" and self.index >= 0:
            return f"arg{self.index}.grad"
        return self.name if self.kind in ("tensor", "scalar") else f"{self.name}.grad"


class Eqn:
    """``out = op(*ins, **params)``; ``cdt`` is the compute dtype of element-wise ops.

    Setting ``ins`` registers the equation with its input Vars' ``users``."""

    __slots__ = ("op", "_ins", "out", "params", "cdt", "impl")

    def __init__(self, op, ins, out: Var, params: dict | None = None, cdt=None,
                 impl=None) -> None:
        self.op = op            # an OpDef, or a special op name (str)
        self._ins: tuple = ()
        self.out = out
        self.params = {} if params is None else params
        self.cdt = cdt
        self.impl = impl        # for special ops: a callable regenerating the value
        self.ins = ins

    @property
    def ins(self) -> tuple:
        return self._ins

    @ins.setter
    def ins(self, new) -> None:
        new = tuple(new)
        self._release()
        for v in new:
            if isinstance(v, Var):
                v.users[self] = None
        self._ins = new

    def _release(self) -> None:
        for v in self._ins:
            if isinstance(v, Var):
                v.users.pop(self, None)

    @property
    def name(self) -> str:
        return self.op if isinstance(self.op, str) else self.op.name

    def __repr__(self) -> str:
        return _eqn_text(self.out, self.name, self.ins, self.params)


def _eqn_text(out: Var, name: str, ins: tuple, params: dict) -> str:
    args = ", ".join(repr(i) for i in ins)
    return f"{out!r}:{out.type_str} = {name}({args}{_fmt_params(params)})"


def is_effect(e: Eqn) -> bool:
    """Whether ``e`` acts on state outside the graph when it runs (a collective): it is kept,
    never merged or moved past another effect, whatever reads its value."""
    return isinstance(e.op, str) and "effect" in e.params


def _fmt_params(params: dict) -> str:
    if not params:
        return ""
    parts = []
    for k, v in params.items():
        if k in ("shape", "in_shape", "node", "full", "places") or v is None:
            continue
        if isinstance(v, np.ndarray):
            v = f"array{list(v.shape)}"
        elif isinstance(v, np.dtype):
            v = v.name
        parts.append(f"{k}={v}")
    return ("; " + ", ".join(parts)) if parts else ""


class GraphText:
    """A :class:`Graph`'s text at one moment (:meth:`Graph.snapshot`): ``str()`` renders it."""

    def __init__(self, name, inputs, externals, eqns, writes, grad_sets, bumps, outputs):
        self._parts = (name, inputs, externals, eqns, writes, grad_sets, bumps, outputs)
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:
            self._text = self._render(*self._parts)
            self._parts = None
        return self._text

    @staticmethod
    def _render(name, inputs, externals, eqns, writes, grad_sets, bumps, outputs) -> str:
        def decl(vs):
            return ", ".join(f"{v!r}:{v.type_str}" for v in vs)

        lines = [f"{name}({decl(inputs)}) {{"]
        if externals:
            lines.append("  captured: " + ", ".join(
                f"{v!r}:{v.type_str}={v.source.describe()}" for v in externals))
        for row in eqns:
            lines.append(f"  {_eqn_text(*row)}")
        for src, v in writes:
            lines.append(f"  write {src.describe()} <- {v!r}")
        for leaf, v in grad_sets:
            lines.append(f"  {leaf.describe()}.grad = {v!r}")
        for src, n in bumps:
            lines.append(f"  version {src.describe()} += {n}")
        lines.append(f"  return {', '.join(repr(v) for v in outputs)}")
        lines.append("}")
        return "\n".join(lines)


class IRError(AssertionError):
    """A graph is not well formed (:meth:`Graph.check`)."""


class Graph:
    """A traced function: inputs, captured externals, equations, outputs and effects."""

    device = "cpu"  # "cuda" when it computes on CUDA arrays (its plan runs CUDA kernels)

    def __init__(self, name: str = "graph") -> None:
        self.inputs: list = []
        self.externals: list = []
        self._eqns: list = []
        self.outputs: list = []
        self.writes: list = []      # (Source, Var)
        self.grad_sets: list = []   # (leaf's Source: "arg" or "tensor", Var | None)
        self.bumps: list = []       # (Source, n): raise that tensor's version by n
        self.name = name
        self.names: dict = {}       # id(tensor) -> readable name

    @property
    def eqns(self) -> list:
        """The equations in order (append to add one; assign a new list to drop some: the
        dropped ones leave their inputs' ``users``)."""
        return self._eqns

    @eqns.setter
    def eqns(self, new: list) -> None:
        kept = {id(e) for e in new}
        for e in self._eqns:
            if id(e) not in kept:
                e._release()
        self._eqns = list(new)

    def __str__(self) -> str:
        return str(self.snapshot())

    def snapshot(self) -> GraphText:
        """The graph's text as it is now, rendered when first read (optimisation passes
        rewrite a graph in place; a trace keeps this for ``lower()`` at little cost)."""
        return GraphText(self.name, list(self.inputs), list(self.externals),
                         [(e.out, e.name, e.ins, dict(e.params)) for e in self.eqns],
                         list(self.writes), list(self.grad_sets), list(self.bumps),
                         list(self.outputs))

    def all_vars(self):
        seen = {}
        for v in list(self.inputs) + list(self.externals):
            seen[id(v)] = v
        for e in self.eqns:
            for i in e.ins:
                if isinstance(i, Var):
                    seen.setdefault(id(i), i)
            seen[id(e.out)] = e.out
        return list(seen.values())

    def check(self) -> None:
        """Raise :class:`IRError` unless the graph is well formed: every value read is an
        input, an external, a constant or an earlier equation's output; each equation
        defines a new value; operands are Vars or Lits; element-wise outputs have their
        inputs broadcast to it; ``users`` match the equations exactly; outputs and
        effects name defined values."""
        defined = {id(v): v for v in list(self.inputs) + list(self.externals)}
        in_graph = {id(e) for e in self.eqns}
        for k, e in enumerate(self.eqns):
            shapes = []
            for i in e.ins:
                if isinstance(i, Var):
                    if id(i) not in defined and i.kind != "const":
                        raise IRError(f"{self.name} eqn {k} ({e!r}) reads {i!r} before any "
                                      "definition")
                    if e not in i.users:
                        raise IRError(f"{self.name} eqn {k} ({e!r}) is not among the users "
                                      f"of {i!r}")
                    shapes.append(i.shape)
                elif not isinstance(i, Lit):
                    raise IRError(f"{self.name} eqn {k} ({e!r}): operand {i!r} is neither a "
                                  "Var nor a Lit")
            if id(e.out) in defined or e.out.kind != "op":
                raise IRError(f"{self.name} eqn {k} ({e!r}) redefines {e.out!r}")
            if not isinstance(e.op, str) and e.op.kind == "elementwise" and shapes:
                # operands broadcast to the output (fold_views drops expands: an element-wise
                # output may be larger than its operands' own broadcast)
                try:
                    fits = np.broadcast_shapes(*shapes, e.out.shape) == tuple(e.out.shape)
                except ValueError:
                    fits = False
                if not fits:
                    raise IRError(f"{self.name} eqn {k} ({e!r}): inputs of shapes {shapes} "
                                  f"do not broadcast to {list(e.out.shape)}")
            defined[id(e.out)] = e.out
        for v in self.all_vars():
            for u in v.users:
                if id(u) not in in_graph or not any(i is v for i in u.ins):
                    raise IRError(f"{self.name}: {v!r} lists a user that does not read it "
                                  f"or is not in the graph ({u!r})")
        ends = list(self.outputs) + [v for _, v in self.writes] + [
            v for _, v in self.grad_sets if v is not None]
        for v in ends:
            if id(v) not in defined and v.kind != "const":
                raise IRError(f"{self.name}: output or effect {v!r} is never defined")


def _value_of(v):
    """A scalar Source's value: a tensor's array (on the host), else the object itself."""
    data = getattr(v, "_data", None)
    if data is None:
        return v
    from ..devices import to_host

    return to_host(data)
