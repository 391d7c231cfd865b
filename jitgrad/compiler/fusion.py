"""Fusion: partition an optimised graph into plan steps.

* ``group`` steps: element-wise equations over one iteration shape fused into one loop, with
  the sum/mean reductions they feed (several reductions may share the loop). Independent
  element-wise chains over the same shape join the same loop too, so a joint forward+backward
  graph of element-wise work becomes one pass over memory.
* ``call`` steps: every other op (BLAS matmul, softmax kernels, indexing...) through its eager
  forward; ``view`` steps: reshapes/transposes/expands, which are NumPy views.

A group iterates over its shape collapsed to 2-D ``(R, C)`` at a split point chosen so every
operand is *full*, *row* (varies along C only), *col* (along R only) or *scalar*, and every
reduction sums over all (a flat group: no split), over C ("rows") or over R ("cols"), one
kind per group (see ``kernel_desc.py``: each kind of sum has one order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..trace.ir import Eqn, Graph, Lit, Var

__all__ = ["Group", "Step", "partition"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(eq=False)
class Group:
    """Fused element-wise equations (+ reductions) over ``shape``."""

    shape: tuple
    index: int                                   # position of its step in the plan
    eqns: list = field(default_factory=list)     # element-wise members, in order
    reductions: list = field(default_factory=list)
    splits: set = field(default_factory=set)     # split points still possible
    members: set = field(default_factory=set)    # id(Var) of values computed in the loop
    host: bool = False  # a CUDA plan's group of host values (host_values.py): a CPU kernel
    # ((len(eqns), len(reductions)), operands) of the last operands() answer
    _operands: tuple | None = field(default=None, repr=False, compare=False)

    def operands(self) -> list:
        """Vars read by the loop but computed outside it, in first-use order (a new list;
        kept for the group as built: ``partition`` only appends members, and the graph's
        inputs are not rewritten once it is partitioned)."""
        size = (len(self.eqns), len(self.reductions))
        known = self._operands
        if known is not None and known[0] == size:
            return list(known[1])
        seen, out = set(), []
        for e in self.eqns + self.reductions:
            for i in e.ins:
                if isinstance(i, Var) and id(i) not in self.members and id(i) not in seen:
                    seen.add(id(i))
                    out.append(i)
        self._operands = (size, tuple(out))
        return out


@dataclass(eq=False)
class Step:
    """One step of the plan: ``kind`` is "group", "call" or "view"."""

    kind: str
    eqn: Eqn | None = None
    group: Group | None = None


def _kinds(shape: tuple, full: tuple):
    """Per dim of ``full``: 'n' (size 1 everywhere: neutral), 'b' (broadcast), 'f' (full)."""
    pad = (1,) * (len(full) - len(shape)) + tuple(shape)
    return ["n" if f == 1 else ("f" if s == f else "b") for s, f in zip(pad, full)]


def operand_fits(shape: tuple, full: tuple, p: int) -> bool:
    """Whether an operand of ``shape`` is full/row/col/scalar for split point ``p``."""
    k = _kinds(shape, full)
    left = {x for x in k[:p] if x != "n"}
    right = {x for x in k[p:] if x != "n"}
    return len(left) <= 1 and len(right) <= 1


def pattern(shape: tuple, full: tuple, p: int) -> str:
    k = _kinds(shape, full)
    left = "f" if "f" in k[:p] else "b"
    right = "f" if "f" in k[p:] else "b"
    return {("f", "f"): "full", ("b", "f"): "row", ("f", "b"): "col",
            ("b", "b"): "scalar"}[(left, right)]


def reduction_kind(dims: tuple, full: tuple, p: int) -> str | None:
    """'all', 'rows' (sums over C), 'cols' (over R) or None (not expressible at ``p``)."""
    k = len(full)
    active = {d for d in range(k) if full[d] != 1}
    red = {d for d in dims if full[d] != 1}
    if red == active:
        return "all"
    if not red:
        return None  # sums over size-1 dims only: a copy, left to the call path
    if red == {d for d in active if d >= p} and not any(d < p for d in red):
        return "rows"
    if red == {d for d in active if d < p} and not any(d >= p for d in red):
        return "cols"
    return None


def _fusable(e: Eqn) -> bool:
    if (isinstance(e.op, str) or e.op.kind != "elementwise" and not e.op.copies
            or e.op.expr is None or not e.op.fusable):
        return False
    cdt = np.dtype(e.cdt) if e.cdt is not None else np.dtype(e.out.dtype)
    return cdt in _FLOATS


def _fusable_reduction(e: Eqn) -> bool:
    return (not isinstance(e.op, str) and e.op.fusable_reduction
            and np.dtype(e.out.dtype) in _FLOATS and isinstance(e.ins[0], Var))


def _constrain(group: Group, e: Eqn, is_reduction: bool) -> set:
    """Split points that stay possible if ``e`` joins ``group``."""
    full = group.shape
    ok = set(group.splits)
    for i in e.ins:
        if isinstance(i, Var) and id(i) not in group.members:
            ok = {p for p in ok if operand_fits(i.shape, full, p)}
    if is_reduction:
        dims = e.params["dims"]
        new_ok = set()
        for p in ok:
            kind = reduction_kind(dims, full, p)
            if kind is None:
                continue
            # one kind of sum per kernel, each in its one order (kernel_desc.py): "all" in
            # flat kernels only, so a sum gives the eager kernel's bits wherever it is fused
            others = {reduction_kind(r.params["dims"], full, p) for r in group.reductions}
            if others <= {kind} and (kind != "all" or p == 0):
                new_ok.add(p)
        ok = new_ok
    return ok


def partition(graph: Graph, host: frozenset = frozenset()) -> list:
    """Steps of the plan for ``graph`` (in execution order). ``host``: ids of the values a
    CUDA graph computes on the host (``host_values.py``); they are fused only with each
    other, into groups marked ``host``."""
    steps: list[Step] = []
    pos: dict = {}                # id(Var) -> index of the step producing it
    group_of: dict = {}           # id(Var) -> Group computing it in its loop
    reduced_in: dict = {}         # id(Var) -> Group whose reduction produced it
    for e in graph.eqns:
        if _fusable(e) or _fusable_reduction(e):
            is_red = not _fusable(e)
            shape = e.ins[0].shape if is_red else e.out.shape
            on_host = id(e.out) in host
            g = _find_group(steps, e, shape, is_red, pos, group_of, reduced_in, on_host)
            if g is None:
                g = Group(shape=shape, index=len(steps), splits=set(range(len(shape) + 1)),
                          host=on_host)
                new_ok = _constrain(g, e, is_red)
                if not new_ok:  # not expressible even alone: run it as a call
                    steps.append(Step("call", eqn=e))
                    pos[id(e.out)] = len(steps) - 1
                    continue
                steps.append(Step("group", group=g))
            else:
                new_ok = _constrain(g, e, is_red)
            g.splits = new_ok
            if is_red:
                g.reductions.append(e)
                reduced_in[id(e.out)] = g
            else:
                g.eqns.append(e)
                g.members.add(id(e.out))
                group_of[id(e.out)] = g
            pos[id(e.out)] = g.index
            continue
        kind = "view" if (not isinstance(e.op, str) and e.op.view) else "call"
        steps.append(Step(kind, eqn=e))
        pos[id(e.out)] = len(steps) - 1
    return steps


#: Equations per fused group at most. Numba's typing and LLVM's optimisation of one function
#: grow faster than its length (a 120-op chain's kernel: ~0.9 s, 300 ops: ~7 s, 2,000: minutes
#: and GBs); bounded groups keep compile time linear in the graph. Equal runs of a long
#: chain become equal kernel sources (locals are numbered per kernel, literals are
#: arguments), which compile once. A group boundary costs one store and one load of a value.
MAX_GROUP_EQNS = 64


def _find_group(steps, e, shape, is_red, pos, group_of, reduced_in, on_host=False):
    """The most recent group ``e`` can legally join (inputs computed in it or before it;
    the group on the host when ``on_host``, on the plan's device when not)."""
    for step in reversed(steps):
        g = step.group
        if g is None or g.shape != shape or g.host != on_host or \
                len(g.eqns) + len(g.reductions) >= MAX_GROUP_EQNS:
            continue
        legal = True
        for i in e.ins:
            if not isinstance(i, Var):
                continue
            if id(i) in g.members:
                continue
            if reduced_in.get(id(i)) is g:
                legal = False  # needs the finished reduction: a second pass
                break
            if pos.get(id(i), -1) >= g.index:
                legal = False  # produced by a later step than the group's position
                break
        if legal and _constrain(g, e, is_red):
            return g
    return None


def describe(steps: list) -> list:
    """One line per step, for ``lower()``."""
    out = []
    for k, s in enumerate(steps):
        if s.kind == "group":
            g = s.group
            names = [f"{e.out!r}={e.name}" for e in g.eqns + g.reductions]
            where = " on the host" if g.host else ""
            out.append(f"step {k}: fused loop over {list(g.shape)}{where}: " + ", ".join(names))
        else:
            out.append(f"step {k}: {s.kind} {s.eqn.out!r}={s.eqn.name}")
    return out


def lit_value(x):
    return x.value if isinstance(x, Lit) else x
