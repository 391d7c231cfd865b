"""A plan's effects as straight-line code: write-backs, version bumps, ``.grad`` sets.

``trace.interpreter.apply_effects`` loops over a graph's effects at every call; a training
step's plan knows them when it is built, so it writes them out once (``Plan._straight_line``
appends these lines). Same checks, same order, same results:

* write-backs: every destination is read and checked writeable before any is written (a
  read-only one raises PyTorch's error with nothing half-done), then each value not already
  there (a kernel updated it in place: ``inplace_writes.py``) is copied in;
* the written tensors' version counters rise;
* each ``.grad`` is set: ``None``, an argument or captured tensor itself, or an array of its
  own. A value is copied unless it owns its memory -- or the plan knows it is an array this
  call made that nothing else returns or keeps (a bias gradient: a sum reshaped, i.e. a view
  of a fresh array; copying it was three of the six grads' cost in an MLP step).
"""

from __future__ import annotations

import math

import numpy as np

from ..trace.effects import in_place
from ..trace.interpreter import check_writes
from .inplace_writes import sharing_memory
from .recycle import RECYCLE_MIN_BYTES

__all__ = ["effect_lines", "bump_lines", "fresh_grad_values"]


def fresh_grad_values(graph, steps: list, keep, placed: dict, inplace: dict) -> set:
    """Ids of the ``.grad`` values that are, at every call, views of an array the call's
    fused kernels made (a stored output or a finished sum: not placed in an effect's array,
    not a destination updated in place, not a recycled buffer) that no output, kept value,
    write-back or other ``.grad`` may share."""
    view_of = {id(s.eqn.out): s.eqn.ins[0] for s in steps
               if s.kind == "view" and s.eqn is not None}
    made: dict = {}
    for k, s in enumerate(steps):
        if s.kind != "group":
            continue
        taken = set(placed.get(k, {})) | set(inplace.get(k, {}))
        for e in s.group.eqns:
            big = math.prod(e.out.shape) * np.dtype(e.out.dtype).itemsize >= RECYCLE_MIN_BYTES
            if id(e.out) not in taken and not big:
                made[id(e.out)] = e.out
        for e in s.group.reductions:
            if id(e.out) not in taken:
                made[id(e.out)] = e.out
    values = [v for _, v in graph.grad_sets if v is not None]
    ends = list(graph.outputs) + list(keep) + [v for _, v in graph.writes] + values
    fresh = set()
    for v in values:
        root = v
        while id(root) in view_of:
            root = view_of[id(root)]
        if id(root) not in made or sum(u is v for u in ends) != 1:
            continue
        shared = sharing_memory(root, steps)
        if not any(id(u) in shared for u in ends if u is not v):
            fresh.add(id(v))
    return fresh


def bump_lines(graph, ns: dict) -> list[str]:
    """The graph's version bumps (``flat[0]._vc[0] += 1``...: a training step bumps every
    parameter and optimizer buffer it writes); the objects they name are added to ``ns``."""
    lines = []
    for j, (src, n) in enumerate(graph.bumps):
        if src.kind == "arg":
            lines.append(f"flat[{src.index}]._vc[0] += {int(n)}")
        elif src.kind == "grad" and src.index >= 0:  # an argument's .grad
            lines.append(f"flat[{src.index}]._grad._vc[0] += {int(n)}")
        else:
            ns[f"E_B{j}"] = src.obj
            lines.append(f"E_B{j}{'._grad' if src.kind == 'grad' else ''}._vc[0] += {int(n)}")
    return lines


def effect_lines(graph, ns: dict, fresh: set) -> list[str]:
    """Python lines (over ``env`` and ``flat``) applying ``graph``'s effects as
    ``apply_effects`` does; the names they use are added to ``ns``."""
    from ..tensor import wrap

    if not graph.writes and not graph.grad_sets:
        return []
    ns.update({"E_GRAPH": graph, "E_CHECK": check_writes, "E_IN_PLACE": in_place,
               "E_COPYTO": np.copyto, "E_WRAP": wrap})
    lines = []
    for k, (src, _) in enumerate(graph.writes):
        expr, ns[f"E_WS{k}"] = src.read_expr(f"E_WS{k}")
        lines.append(f"w{k} = {expr}")
    if graph.writes:
        lines.append("if not (" + " and ".join(
            f"getattr(w{k}.flags, 'writeable', True)" for k in range(len(graph.writes))) + "):")
        lines.append("    E_CHECK(E_GRAPH, flat)  # raises, naming the tensor")
    for k, (_, v) in enumerate(graph.writes):
        lines += [f"x = env[{id(v)}]",
                  f"if x is not w{k} and not E_IN_PLACE(x, w{k}):",
                  f"    E_COPYTO(w{k}, x, casting='unsafe')"]
    lines += bump_lines(graph, ns)
    for j, (leaf, v) in enumerate(graph.grad_sets):
        if leaf.kind == "arg":  # each call's own argument
            lines.append(f"E_L{j} = flat[{leaf.index}]")
        else:
            ns[f"E_L{j}"] = leaf.obj
        if v is None:
            lines.append(f"E_L{j}._grad = None")
        elif v.kind in ("in", "ext") and v.source is not None and v.source.kind != "scalar":
            ns[f"E_G{j}"] = v.source
            lines.append(f"E_L{j}._grad = E_G{j}.tensor(flat)")
        elif v.kind == "const":
            lines.append(f"E_L{j}._grad = E_WRAP(env[{id(v)}].copy())")
        elif id(v) in fresh:  # (row-major, as eager mode's accumulation makes a new .grad:
            # a transposed view of a fresh product is copied, autograd/accumulate.py)
            lines += [f"x = env[{id(v)}]",
                      f"E_L{j}._grad = E_WRAP(x if x.flags.c_contiguous else x.copy())"]
        else:
            lines += [f"x = env[{id(v)}]",
                      f"E_L{j}._grad = E_WRAP(x if x.flags.owndata and x.flags.c_contiguous "
                      "and getattr(x.flags, 'writeable', True) else x.copy())"]
    return lines
