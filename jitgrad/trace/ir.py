"""The static-graph IR: variables, equations, graphs — printable like a jaxpr.

A :class:`Graph` is a straight-line program over array values. Each :class:`Var` is an
array of fixed shape and dtype; an :class:`Eqn` applies a registered op (or a special op:
``random``, ``fill``) to variables and Python literals. Side effects on state outside the
graph are explicit: ``writes`` copy final values into arrays that existed before the call
(parameters updated in place, ``p.grad`` accumulated in place) and ``grad_sets`` replace a
leaf's ``.grad``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Var", "Lit", "Eqn", "Source", "Graph"]


@dataclass(eq=False)
class Var:
    """An array value of the graph."""

    n: int
    shape: tuple
    dtype: np.dtype
    kind: str = "op"        # "in" (argument), "ext" (captured), "const", "op"
    source: object = None   # for "in"/"ext": a Source; for "const": the ndarray

    def __repr__(self) -> str:
        return f"%{self.n}"

    @property
    def type_str(self) -> str:
        dims = ",".join(str(s) for s in self.shape)
        return f"{np.dtype(self.dtype).name}[{dims}]"


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
    tensor), "grad" (``obj._grad._data``: a leaf's gradient read or written in place),
    "scalar" (``obj = (mapping, key, dtype)``: a number read afresh at every call, e.g. an
    optimizer's learning rate, so changing it does not retrace).
    """

    kind: str
    obj: object = None
    index: int = -1
    name: str = ""

    def read(self, args: list):
        if self.kind == "arg":
            return args[self.index]._data
        if self.kind == "tensor":
            return self.obj._data
        if self.kind == "scalar":
            mapping, key, dtype = self.obj
            return np.asarray(mapping[key], dtype)
        g = self.obj._grad
        if g is None:
            raise RuntimeError("compiled plan expected a .grad that is gone (guard missed)")
        return g._data

    def describe(self) -> str:
        if self.kind == "arg":
            return f"arg{self.index}"
        return self.name if self.kind in ("tensor", "scalar") else f"{self.name}.grad"


@dataclass(eq=False)
class Eqn:
    """``out = op(*ins, **params)``; ``cdt`` is the compute dtype of element-wise ops."""

    op: object              # an OpDef, or a special op name (str)
    ins: tuple
    out: Var
    params: dict = field(default_factory=dict)
    cdt: object = None
    impl: object = None     # for special ops: a callable regenerating the value

    @property
    def name(self) -> str:
        return self.op if isinstance(self.op, str) else self.op.name

    def __repr__(self) -> str:
        args = ", ".join(repr(i) for i in self.ins)
        ps = _fmt_params(self.params)
        return f"{self.out!r}:{self.out.type_str} = {self.name}({args}{ps})"


def _fmt_params(params: dict) -> str:
    if not params:
        return ""
    parts = []
    for k, v in params.items():
        if k in ("shape", "in_shape", "node", "full") or v is None:
            continue
        if isinstance(v, np.ndarray):
            v = f"array{list(v.shape)}"
        elif isinstance(v, np.dtype):
            v = v.name
        parts.append(f"{k}={v}")
    return ("; " + ", ".join(parts)) if parts else ""


@dataclass(eq=False)
class Graph:
    """A traced function: inputs, captured externals, equations, outputs and effects."""

    inputs: list = field(default_factory=list)
    externals: list = field(default_factory=list)
    eqns: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    writes: list = field(default_factory=list)      # (Source, Var)
    grad_sets: list = field(default_factory=list)   # (leaf tensor, Var | None)
    name: str = "graph"
    names: dict = field(default_factory=dict)       # id(tensor) -> readable name

    def __str__(self) -> str:
        def decl(vs):
            return ", ".join(f"{v!r}:{v.type_str}" for v in vs)

        lines = [f"{self.name}({decl(self.inputs)}) {{"]
        if self.externals:
            lines.append("  captured: " + ", ".join(
                f"{v!r}:{v.type_str}={v.source.describe()}" for v in self.externals))
        for e in self.eqns:
            lines.append(f"  {e!r}")
        for src, v in self.writes:
            lines.append(f"  write {src.describe()} <- {v!r}")
        for t, v in self.grad_sets:
            lines.append(f"  {self.names.get(id(t), 'leaf')}.grad = {v!r}")
        lines.append(f"  return {', '.join(repr(v) for v in self.outputs)}")
        lines.append("}")
        return "\n".join(lines)

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
