"""Straight-line Python generated per compiled entry: the cache-hit path of a call.

A compiled call's cost on small graphs is Python, not kernels: computing the cache key,
reading the closure's state, checking guards, wrapping outputs, deciding the output
structure. Everything an entry's key fixes (argument count, shapes, dtypes, requires_grad
mask, hooks, grad mode, the closure's state, the output structure, whether a backward node
is attached) is known when the entry is built, so each entry gets:

* ``run(flat)``: its plan, the output tensors, the autograd glue, the output structure;
* ``fast(args)``: for calls with tensor-only positional arguments, checks that the call
  matches this entry exactly (the same checks as the generic path, unrolled) and runs it, or
  returns :data:`MISS` and the generic path decides. A miss is never wrong, only slower.

Plain Python, generated once per entry (``compiler/pysource.py``: nothing here is compiled by
Numba).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..autograd import grad_mode
from ..autograd.node import edge
from ..compiler.pysource import build_function
from ..tensor import Tensor, alias
from ..trace.pytree import unflatten
from ..trace.state import STATE as _TRACE
from .autograd_glue import attach_backward, mark_joint_output

__all__ = ["MISS", "entry_run", "entry_fast"]

#: What ``fast`` returns when the call does not match its entry.
MISS = object()


def _exec(name: str, body: list, ns: dict) -> Callable:
    return build_function(f"call_{name}", ["args" if name == "fast" else "flat"], body, ns)


def entry_run(entry, grad_enabled: bool) -> Callable[[Any], Any]:
    """``entry.run`` unrolled: the plan, one tensor per output, the backward node (or the
    joint-output marks) when grad mode is on, the output structure."""
    n_out = len(entry.graph.outputs)
    ns: dict = {"PLAN_RUN": entry.plan.run, "ALIAS": alias, "ENTRY": entry,
                "TREE": entry.out_tree, "UNFLATTEN": unflatten, "ATTACH": attach_backward,
                "MARK": mark_joint_output, "EDGE": edge}
    ts = [f"t{i}" for i in range(n_out)]
    body = ["outs = PLAN_RUN(flat)"]
    if entry.escaped:  # only until the first run has filled them
        body += ["if ENTRY.escaped:", "    ENTRY.fill_escaped(outs)"]
    body += [f"t{i} = ALIAS(outs[{i}])" for i in range(n_out)]
    if entry.grad_info is not None and grad_enabled:
        n_res = len(entry.grad_info.residuals)
        body.append(f"ATTACH(ENTRY, flat, [{', '.join(ts)}], outs[{n_out}:{n_out + n_res}])")
    elif entry.joint and grad_enabled and entry.joint_outputs:
        body.append("edges = tuple(EDGE(t) for t in flat if t._requires_grad)")
        body += [f"MARK(t{i}, edges)" for i in entry.joint_outputs]
    tree = entry.out_tree
    if tree == ("T",):
        body.append("return t0")
    elif tree[0] == "tuple" and all(c == ("T",) for c in tree[1]):
        body.append(f"return ({''.join(t + ', ' for t in ts)})")
    else:
        body.append(f"return UNFLATTEN(TREE, [{', '.join(ts)}])")
    return _exec("run", body, ns)


def entry_fast(entry, key: tuple, closure, stats: dict) -> Callable[[tuple], Any]:
    """The cache-hit path for tensor-only positional calls matching ``key`` (see module)."""
    _tree, items, grad_enabled = key
    n = len(items)
    ns: dict = {"MISS": MISS, "Tensor": Tensor, "TRACE": _TRACE, "GRAD": grad_mode.STATE,
                "GM": grad_enabled, "STATS": stats, "RUN": entry.run,
                "HOLD": entry.guards_hold}
    body = [f"if len(args) != {n} or TRACE.tracer is not None or GRAD.enabled != GM:",
            "    return MISS"]
    if n:
        names = [f"a{i}" for i in range(n)]
        body.append(f"{', '.join(names)}, = args")
        body.append("if " + " or ".join(f"type({a}) is not Tensor" for a in names) + ":")
        body.append("    return MISS")
    for i, (shape, dtype, req, hooks) in enumerate(items):
        ns[f"SH{i}"], ns[f"DT{i}"], ns[f"RG{i}"] = shape, dtype, req
        body.append(f"d = a{i}._data")
        body.append(f"if d.shape != SH{i} or d.dtype != DT{i} or a{i}._requires_grad != RG{i}"
                    f" or {'not ' if hooks else ''}a{i}._hooks:")
        body.append("    return MISS")
    checks = closure.fast_checks(entry.closure_ids, ns)
    access = entry.access.fast_checks(ns) if entry.access else []
    if access is None:  # chains from non-tensor arguments: the generic path checks them
        access = ["return MISS"]
    if checks or access:
        body.append("try:")
        body += ["    " + c for c in checks + access]
        body += ["except Exception:  # an emptied cell, a chain that no longer reads",
                 "    return MISS"]
    if entry.guards:
        body += ["if HOLD() is not None:", "    return MISS"]
    body += ['STATS["calls"] += 1', 'STATS["cache_hits"] += 1', "return RUN(args)"]
    return _exec("fast", body, ns)
