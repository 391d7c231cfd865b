"""Straight-line Python generated per compiled entry: the cache-hit path of a call.

A compiled call's cost on small graphs is Python, not kernels: computing the cache key,
reading the closure's state, checking guards, wrapping outputs, deciding the output
structure. Everything an entry's key fixes (argument count, shapes, dtypes, requires_grad
mask, hooks, grad mode, the closure's state, the output structure, whether a backward node
is attached) is known when the entry is built, so each entry gets:

* ``run(flat)``: its plan, the output tensors, the autograd glue, the output structure;
* ``fast(args)``: for calls with positional tensors (and floats: dynamic ones become 0-d
  inputs, constant ones are compared bit for bit), checks that the call
  matches this entry exactly (the same checks as the generic path, unrolled) and runs it, or
  returns :data:`MISS` and the generic path decides. A miss is never wrong, only slower.

Plain Python, generated once per entry (``compiler/pysource.py``: nothing here is compiled by
Numba).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._profiling import ACTIVE as _PROFILING
from ..autograd import grad_mode
from ..autograd.node import edge
from ..compiler.pysource import build_function
from ..tensor import Tensor, alias
from ..trace.pytree import number_tensor, unflatten
from ..trace.state import STATE as _TRACE
from .aliasing import alias_of, arg_aliasing, guard_residuals, link_view, root
from .autograd_glue import attach_backward, mark_joint_output
from .guards import fast_guard_lines
from .speculation import attach_lines

__all__ = ["MISS", "entry_run", "entry_fast"]

#: What ``fast`` returns when the call does not match its entry.
MISS = object()


def _exec(name: str, body: list, ns: dict) -> Callable:
    return build_function(f"call_{name}", ["args" if name == "fast" else "flat"], body, ns)


def entry_run(entry, grad_enabled: bool, flat: list) -> Callable[[Any], Any]:
    """``entry.run`` unrolled: the plan, one tensor per output, the backward node (or the
    joint-output marks) when grad mode is on, the output structure. Outputs that alias what
    the caller sees (``entry.aliases``, see ``aliasing.py``) are those tensors, or views
    sharing their version counters, as in eager mode."""
    n_out = len(entry.graph.outputs)
    ns: dict = {"ALIAS": alias, "ENTRY": entry,
                "TREE": entry.out_tree, "UNFLATTEN": unflatten, "ATTACH": attach_backward,
                "MARK": mark_joint_output, "EDGE": edge}
    ts = [f"t{i}" for i in range(n_out)]
    tree = entry.out_tree
    if tree == ("T",):
        ret = "return t0"
    elif tree[0] == "tuple" and all(c == ("T",) for c in tree[1]):
        ret = f"return ({''.join(t + ', ' for t in ts)})"
    else:
        ret = f"return UNFLATTEN(TREE, [{', '.join(ts)}])"
    ns["PROFILING"] = _PROFILING  # a profiler window: each plan step is an event
    body = ["outs = (PLAN_RUN if PROFILING[0] is None else ENTRY.plan.run_profiled)(flat)"]
    if any(e.op == "random" for e in entry.graph.eqns):  # (a plan that raises runs again)
        body.insert(0, "ENTRY.keep_rng()")
    if entry.spec_plan is not None and grad_enabled:  # a speculated loss (speculation.py)
        ns["SPEC_RUN"] = entry.spec_plan.run
        body = ["if ENTRY.speculating:", "    outs = (SPEC_RUN if PROFILING[0] is None else "
                "ENTRY.spec_plan.run_profiled)(flat)"]
        loss = entry.grad_info.diff_outputs[0]  # made by attach_lines
        body += [f"    t{i} = ALIAS(outs[{i}])" for i in range(n_out) if i != loss]
        body += ["    " + ln for ln in attach_lines(entry, flat, ns, ts, f"outs[{n_out}:]")]
        body += ["    " + ret, "outs = (ENTRY.plan.run if PROFILING[0] is None else "
                 "ENTRY.plan.run_profiled)(flat)"]  # built when first needed
    else:
        ns["PLAN_RUN"] = entry.plan.run
    if entry.escaped:  # only until the first run has filled them
        body += ["if ENTRY.escaped:", "    ENTRY.fill_escaped(outs)"]
    before, after = _alias_lines(getattr(entry, "aliases", None) or [None] * n_out, ns)
    body += [f"t{i} = ALIAS(outs[{i}])" for i in range(n_out)]
    body += before
    if entry.grad_info is not None and grad_enabled:
        n_res = len(entry.grad_info.saved)
        body.append(f"ATTACH(ENTRY, flat, [{', '.join(ts)}], outs[{n_out}:{n_out + n_res}])")
        if entry.residual_anchors and entry.grad_info.diff_outputs:
            guard = _anchor_exprs(entry.residual_anchors, ns, "R")
            after.append(f"GUARD(node, ({''.join(g + ', ' for g in guard)}))")
            body.append(f"node = t{entry.grad_info.diff_outputs[0]}._grad_fn")
    elif entry.joint and grad_enabled and entry.joint_outputs:
        body.append("edges = tuple(EDGE(t) for t in flat if t._requires_grad)")
        body += [f"MARK(t{i}, edges)" for i in entry.joint_outputs]
    body += after
    body.append(ret)
    return _exec("run", body, ns)


def _anchor_exprs(anchors, ns: dict, prefix: str) -> list:
    """Expressions for anchors that are arguments, captured tensors or outputs."""
    out = []
    for n, a in enumerate(anchors):
        if a[0] == "tensor":
            ns[f"{prefix}{n}"] = a[1]
            out.append(f"{prefix}{n}")
        else:
            out.append(f"flat[{a[1]}]" if a[0] == "arg" else f"t{a[1]}")
    return out


def _alias_lines(rels: list, ns: dict) -> tuple[list, list]:
    """Source lines giving outputs their relation to the caller's tensors: ``before`` the
    autograd glue (an argument the call wrote into takes its history, as eager rebases it),
    ``after`` it (the tensor itself, an alias, a view; a view's anchor is settled first)."""
    ns.update({"ALIAS_OF": alias_of, "LINK": link_view, "ROOT": root,
               "GUARD": guard_residuals})
    before: list = []
    after: list = []
    links: list = []

    def anchor(a, i: int) -> str:
        kind = a[0]
        if kind == "arg":
            return f"flat[{a[1]}]"
        if kind == "out":
            return f"t{a[1]}"
        if kind == "tensor":
            ns[f"OBJ{i}"] = a[1]
            return f"OBJ{i}"
        if kind == "grad":  # a[1]: the leaf's Source
            if a[1].kind == "arg":
                return f"flat[{a[1].index}]._grad"
            ns[f"LEAF{i}"] = a[1].obj
            return f"LEAF{i}._grad"
        name = f"B{a[1]}"  # ("base", n, version): an intermediate two outputs view
        if name not in ns:
            ns[name] = True
            links.append(f"{name} = ALIAS(ROOT(outs[{i}]))")
            if a[2]:
                links.append(f"{name}._vc[0] = {a[2]}")
        return name

    for i, rel in enumerate(rels):
        if rel is None:
            continue
        kind = rel[0]
        if kind == "is":
            (before if rel[2] else after).append(f"t{i} = {anchor(rel[1], i)}")
        elif kind == "data":  # .data: the anchor's array, a version counter of its own
            after.append(f"t{i} = ALIAS({anchor(rel[1], i)}._data)")
        elif kind == "alias":
            after.append(f"t{i} = ALIAS_OF({anchor(rel[1], i)}, {rel[2]})")
        elif kind == "view":
            a = anchor(rel[1], i)
            links.append(f"LINK(t{i}, outs[{i}], {a})")
        else:  # ("version", n)
            links.append(f"t{i}._vc[0] = {rel[1]}")
    return before, after + links


def positional_leaves(treedef) -> list | None:
    """The leaves of a call of positional tensors and floats (``("T",)``, ``("N",)`` for a
    dynamic float, ``("const", x, identity)`` for a float constant), from its key's
    ``treedef``; None for any other call."""
    if treedef[0] != "tuple" or len(treedef[1]) != 2:
        return None
    args_tree, kw_tree = treedef[1]
    if kw_tree != ("dict", (), ()) or args_tree[0] != "tuple":
        return None
    for c in args_tree[1]:
        if c != ("T",) and c != ("N",) and not (c[0] == "const" and type(c[1]) is float):
            return None
    return list(args_tree[1])


def entry_fast(entry, key: tuple, closure, stats: dict) -> Callable[[tuple], Any]:
    """The cache-hit path for calls of positional tensors (and floats) matching ``key``
    (see module)."""
    tree, items, grad_enabled, pattern = key
    kids = positional_leaves(tree)
    ns: dict = {"MISS": MISS, "Tensor": Tensor, "TRACE": _TRACE, "GRAD": grad_mode.STATE,
                "GM": grad_enabled, "STATS": stats, "RUN": entry.run,
                "HOLD": entry.guards_hold, "ARG_ALIASING": arg_aliasing, "PAT": pattern,
                "NUMBER": number_tensor}
    body = [f"if len(args) != {len(kids)} or TRACE.tracer is not None or GRAD.enabled != GM:",
            "    return MISS"]
    if kids:
        names = [f"a{i}" for i in range(len(kids))]
        body.append(f"{', '.join(names)}, = args")
        body.append("if " + " or ".join(
            f"type({a}) is not {'Tensor' if c == ('T',) else 'float'}"
            for a, c in zip(names, kids)) + ":")
        body.append("    return MISS")
    flat_names, tensors = [], []  # per flat index: its name; the caller's tensors' indices
    for i, c in enumerate(kids):
        if c == ("T",):
            tensors.append(len(flat_names))
            flat_names.append(f"a{i}")
        elif c == ("N",):
            body.append(f"n{i} = NUMBER(a{i})")
            flat_names.append(f"n{i}")
        else:  # a float constant: the same bits (-0.0, NaN) or the generic path
            ns[f"H{i}"] = c[2][1]
            body.append(f"if a{i}.hex() != H{i}:")
            body.append("    return MISS")
    flat = "args" if len(tensors) == len(kids) else f"[{', '.join(flat_names)}]"
    if flat != "args":
        body.append(f"flat = {flat}")
        flat = "flat"
    for i in tensors:
        shape, dtype, req, hooks, kind, layout = items[i]
        a = flat_names[i]
        ns[f"SH{i}"], ns[f"DT{i}"], ns[f"RG{i}"], ns[f"AT{i}"] = shape, dtype, req, kind
        body.append(f"d = {a}._data")
        body.append(f"if d.shape != SH{i} or d.dtype != DT{i} or {a}._requires_grad != RG{i}"
                    f" or {'not ' if hooks else ''}{a}._hooks or type(d) is not AT{i}:")
        body.append("    return MISS")
        # the layout class (function.layout_class), from the flags read once
        body.append("f = d.flags")
        body.append("if " + ("not f.c_contiguous" if layout == 0 else
                             "f.c_contiguous or not f.f_contiguous" if layout == 1 else
                             "f.c_contiguous or f.f_contiguous") + ":")
        body.append("    return MISS")
        if len(tensors) > 1 and pattern is None:  # the root arrays: arguments sharing memory
            body.append(f"r{i} = d.base")
            body.append(f"if r{i} is None: r{i} = d")
    if len(tensors) > 1:  # which arguments share memory is part of the key (arg_aliasing)
        if pattern is not None:
            body.append(f"if ARG_ALIASING({flat}) != PAT:")
        elif len(tensors) <= 4:  # pairwise identity tests beat building a set
            pairs = " or ".join(f"r{i} is r{j}" for i in tensors for j in tensors if j > i)
            body.append(f"if ({pairs}) and ARG_ALIASING({flat}) is not None:")
        else:
            roots = ", ".join(f"id(r{i})" for i in tensors)
            body.append(f"if len({{{roots}}}) != {len(tensors)} and "
                        f"ARG_ALIASING({flat}) is not None:")
        body.append("    return MISS")
    checks = closure.fast_checks(entry.closure_ids, ns)
    access = entry.access.fast_checks(ns) if entry.access else []
    access_failed = access is None
    if access is None:  # chains from non-tensor arguments: the generic path checks them
        access = ["return MISS"]
    if checks or access:
        body.append("try:")
        body += ["    " + c for c in checks + access]
        body += ["except Exception:  # an emptied cell, a chain that no longer reads",
                 "    return MISS"]
    if entry.guards:  # captured tensors' and .grads' states, inline; else through HOLD
        inline = fast_guard_lines(entry.guards, ns, flat)
        body += inline if inline is not None and not access_failed else [
            f"if HOLD(args, None, {flat}) is not None:", "    return MISS"]
    body += ['STATS["calls"] += 1', 'STATS["cache_hits"] += 1', f"return RUN({flat})"]
    fast = _exec("fast", body, ns)
    fast.entry = entry  # (a call that raises asks it whether the plan changed anything)
    return fast
