"""Kernels described: a plan's fused group, or one eager op, as a :class:`KernelDesc`.

Both go through :func:`_equation_line`, so one op computes with the same expression in an
eager kernel and inside a fused one. Locals are numbered canonically (loads ``x0...``, lines
``v0...``), never by graph variable numbers, so equal work renders equal source and shares
one cached kernel across graphs and processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.mathtable import DTYPE_SUFFIXES
from ..trace.ir import Lit, Var, dtype_name
from .expr import literal, rewrite
from .fusion import Group, pattern, reduction_kind
from .kernel_desc import KernelDesc, Line, Operand, Reduction

__all__ = ["GroupBinding", "describe_group", "describe_op", "describe_sum", "choose_split",
           "element_cost"]


@dataclass
class GroupBinding:
    """What a plan passes a group's kernel: the graph values behind its arguments."""

    split: int
    operands: list        # Vars, in argument order (a0, a1...)
    scalars: list         # (value, dtype) of the literal arguments (s0, s1...)
    outputs: list         # Vars stored (o0, o1...)
    reductions: list      # (Eqn, kind, scale) in order (r0, r1...)
    cost: float           # estimated work per element (see ``element_cost``)


def choose_split(group: Group) -> int:
    """The split point of the group's ``(R, C)`` collapse: flat when possible."""
    if 0 in group.splits:
        return 0
    inner = [p for p in group.splits if 0 < p < len(group.shape)]
    return max(inner) if inner else min(group.splits)


def element_cost(n_math: int, n_lines: int, n_arrays: int) -> float:
    """Estimated work per element: 0.5 per line, 4 per transcendental call, 1 per array
    touched (a unit is ~0.1 ns on the 2-core project machine)."""
    return 0.5 * n_lines + 4.0 * n_math + n_arrays


def _equation_line(op, params: dict, in_refs: list, cdt, fold: bool, param_refs=None) -> str:
    """``op``'s expression over ``in_refs`` (one per input); params inlined as typed
    literals (``fold``) or read from ``param_refs`` (argument names)."""
    refs = dict(zip(op.inputs, in_refs))
    for k, pname in enumerate(op.params):
        refs[pname] = param_refs[k] if param_refs is not None else literal(params[pname], cdt)
    return rewrite(op.expr, refs, cdt, fold)


def describe_group(group: Group, needed_outside: set) -> tuple[KernelDesc, GroupBinding]:
    """The kernel of a fused group; ``needed_outside``: ids of member Vars read by other
    steps, outputs or effects (they are stored to arrays)."""
    p = choose_split(group)
    full = group.shape
    reds = []
    for r in group.reductions:
        dims = r.params["dims"]
        kind = reduction_kind(dims, full, p)
        n = int(np.prod([full[d] for d in dims])) if dims else 1
        scale = (1.0 / n if n else float("nan")) if r.op.averages else 1.0
        reds.append((r, kind, scale))
    kinds = {k for _, k, _ in reds}
    mode = "flat" if p == 0 else ("cols" if "cols" in kinds else "rows")

    operand_vars = group.operands()
    names: dict = {}
    operands = []
    for k, v in enumerate(operand_vars):
        pat = pattern(v.shape, full, p)
        operands.append(Operand(dtype_name(v.dtype), "full" if (
            mode == "flat" and pat == "row") else pat))
        names[id(v)] = f"x{k}"
    scalars: list = []
    lines: list = []
    for e in group.eqns:
        cdt = np.dtype(e.cdt) if e.cdt is not None else np.dtype(e.out.dtype)
        no_promote = e.op.extra.get("no_promote", ())
        in_refs = []
        for k, i in enumerate(e.ins):
            if isinstance(i, Var):
                ref = names[id(i)]
                if k not in no_promote and np.dtype(i.dtype) != cdt:
                    ref = f"{DTYPE_SUFFIXES[cdt.name]}({ref})"  # a cast: f32(x0)
            else:  # a Python literal: a kernel argument of the compute dtype
                scalars.append((i.value if isinstance(i, Lit) else i, cdt))
                ref = f"s{len(scalars) - 1}"
            in_refs.append(ref)
        target = f"v{len(lines)}"
        lines.append(Line(target, _equation_line(e.op, e.params, in_refs, cdt, True), e.name,
                          dtype_name(e.out.dtype)))
        names[id(e.out)] = target
    outputs = [e.out for e in group.eqns if id(e.out) in needed_outside]
    desc = KernelDesc(
        mode=mode, operands=tuple(operands),
        scalars=tuple(dtype_name(dt) for _, dt in scalars), lines=tuple(lines),
        stores=tuple((names[id(v)], dtype_name(v.dtype)) for v in outputs),
        reductions=tuple(Reduction(names[id(r.ins[0])], kind, dtype_name(r.ins[0].dtype))
                         for r, kind, _ in reds),
        title="fuses: " + ", ".join([e.name for e in group.eqns]
                                    + [f"{r.name}({kind})" for r, kind, _ in reds]))
    cost = element_cost(len(desc.math), len(lines), len(operands) + len(outputs) + len(reds))
    return desc, GroupBinding(p, operand_vars, scalars, outputs, reds, cost)


def describe_op(op, cdt, patterns: tuple, mode: str, out_dtype, into: bool = False
                ) -> KernelDesc:
    """The eager kernel of element-wise ``op`` computing in ``cdt``: one pattern per input
    (``"arg"``: a Python number, passed as a scalar argument; else an operand pattern; array
    operands have dtype ``cdt`` except ``no_promote`` inputs, which are bool); params are
    scalar arguments after the numbers, so one kernel serves every parameter value.
    ``into``: the result is written into the first operand (``KernelDesc.into``)."""
    cdt = np.dtype(cdt)
    no_promote = op.extra.get("no_promote", ())
    operands, scalars, in_refs = [], [], []
    for k, pat in enumerate(patterns):
        dt = "bool" if k in no_promote else cdt.name
        if pat == "arg":
            scalars.append(dt)
            in_refs.append(f"s{len(scalars) - 1}")
        else:
            operands.append(Operand(dt, pat))
            in_refs.append(f"x{len(operands) - 1}")
    param_refs = []
    for _ in op.params:
        scalars.append(cdt.name)
        param_refs.append(f"s{len(scalars) - 1}")
    expr = _equation_line(op, {}, in_refs, cdt, False, param_refs)
    return KernelDesc(mode=mode, operands=tuple(operands), scalars=tuple(scalars),
                      lines=(Line("v0", expr, op.name, dtype_name(out_dtype)),),
                      stores=(("v0", dtype_name(out_dtype)),), title=op.name, into=into)


def describe_sum(dtype, kind: str) -> KernelDesc:
    """The eager kernel summing an array of ``dtype``: ``all`` (flat), ``rows`` or ``cols``
    (the same order as a fused sum of that kind)."""
    mode = {"all": "flat", "rows": "rows", "cols": "cols"}[kind]
    name = dtype_name(dtype)
    return KernelDesc(mode=mode, operands=(Operand(name, "full"),), scalars=(), lines=(),
                      stores=(), reductions=(Reduction("x0", kind, name),),
                      title=f"sum({kind})")
