"""The CPU renderer: a :class:`KernelDesc` as a Numba module.

The kernel reads like hand-written code: operands are loaded once per element (``full``
``a[t]``, ``row`` ``a[uj]``, ``col`` ``a[ui]``, ``scalar`` ``a``, ``strided`` ``a[i, j]``),
each line is one assignment, stores write ``o[t]``. Indices are unsigned: Numba then emits no
negative-index wraparound branches, which would stop LLVM from vectorising the loop
(measured: 13.5 ms -> 1.3 ms for W2). The function is one sequential ``nogil`` Numba function
over parts ``[lo, hi)``; ``kernels/pool.py`` runs ranges of parts on several threads.

Floating-point flags: none. No ``contract`` (``a * b + c`` of two ops never becomes an FMA)
and no ``reassoc`` (LLVM would rewrite ``(x * d) * d`` as ``x * (d * d)``): every line rounds
exactly as the one-op eager kernel of its op does, so a fused chain gives the bits of the
eager sequence. Sums need no reordering either: a sum adds each position of a block of
:data:`LANES` elements into its own lane (``lanes[j] += v``, one vector add per vector of
elements, since the lanes are independent), then the lanes in order, so its bits never depend
on how LLVM vectorised the loop, nor on what else the loop computes (with ``reassoc`` and an
inline accumulator, a fused kernel and the eager kernel summing the materialised value added
in different orders: 25 of 55 sizes differed).

A loop that calls the transcendental math also carries ``seen |= v != v`` (whether its last
float line produced a NaN), returned by the kernel and unused by jitgrad. It is there for
LLVM: its loop vectoriser interleaves a loop that carries a reduction (two vector iterations
in flight, hiding the math's latency) and, for loops as large as fused kernels, not one that
only stores. Numba offers no loop pragma; this one compare and OR per vector made the W2
kernels 4-6% faster (1e6 float32, one thread); loops of plain arithmetic are memory-bound and
go without. A flat kernel without sums is one loop over its parts' elements: a loop per part
(chunk) ran 16% slower (float32 and float64 tanh at 1e6).
"""

from __future__ import annotations

from ..kernels.mathtable import DTYPE_SUFFIXES, SCALAR_HELPERS
from .kernel_desc import CHUNK, COLBLOCK, LANES, RBLOCK, KernelDesc

__all__ = ["render_cpu", "module_source"]

_HEADER = """import numpy as np

from jitgrad.kernels.cached import cached_njit
from jitgrad.kernels.scratch import scratch_f32, scratch_f64
{imports}
f32 = np.float32
f64 = np.float64
u64 = np.uint64

"""
_DECOR = '@cached_njit(nogil=True, error_model="numpy")'


def module_source(desc: KernelDesc) -> str:
    """The module defining ``kernel``: imports of the kernel math it calls, the function."""
    helpers = sorted(m for m in desc.math if m in SCALAR_HELPERS)
    vmath = sorted(m for m in desc.math if m not in SCALAR_HELPERS)
    imports = "".join(f"from jitgrad.kernels.{mod} import {', '.join(names)}\n"
                      for mod, names in (("scalar", helpers), ("vmath", vmath)) if names)
    return _HEADER.format(imports=imports) + _DECOR + "\n" + render_cpu(desc) + "\n"


def _np(dtype: str) -> str:
    return f"np.{dtype}" if dtype in ("bool", "bool_") else (
        DTYPE_SUFFIXES.get(dtype) or f"np.{dtype}")


def render_cpu(desc: KernelDesc, name: str = "kernel") -> str:
    """The source of the kernel function ``name``."""
    m = desc.mode
    idx = {"full": "[t]", "row": "[uj]", "col": "[ui]", "scalar": "", "item": "[0]",
           "strided": "[i, j]"}
    if m == "flat":
        idx["row"] = idx["col"] = "[t]"
    loads = [f"x{k} = a{k}{idx[op.pattern]}" for k, op in enumerate(desc.operands)]
    lines = [f"{ln.target} = {ln.expr}" + (f"  # {ln.note}" if ln.note else "")
             for ln in desc.lines]
    out = "[i, j]" if m == "strided" else "[t]"
    # in place (into, aliases): element t of the operand is read, then written
    stores = [f"{desc.store_array(k)}{out} = {v}" for k, (v, _) in enumerate(desc.stores)]
    latency_bound = any(m not in SCALAR_HELPERS for m in desc.math)  # calls vmath
    probe = [ln.target for ln in desc.lines if ln.dtype in DTYPE_SUFFIXES][-1:] \
        if latency_bound else []
    body = loads + lines + stores + [f"seen |= {v} != {v}" for v in probe]
    src = [f"def {name}({', '.join(desc.signature())}):"]
    if desc.title:
        src.append(f"    # {desc.title}")
    src.append("    seen = False")
    if desc.reductions and m in ("flat", "rows"):
        src += _lane_sums(desc, body)
    elif desc.reductions:
        src += _column_sums(desc, body)
    else:
        src += _plain_loop(m, body)
    src.append("    return seen")
    return "\n".join(src)


def _indent(lines, n: int) -> list:
    return [" " * (4 * n) + s for s in lines]


def _plain_loop(mode: str, body: list) -> list:
    if mode == "flat":  # one loop over the parts' elements (a loop per part: 16% slower)
        out = [f"    start = lo * {CHUNK}",
               f"    for k in range(min(hi * {CHUNK}, n) - start):",
               "        t = u64(start) + u64(k)"]
        return out + _indent(body, 2)
    out = ["    for i in range(lo, hi):", "        ui = u64(i)", "        for j in range(C):"]
    if mode != "strided":
        out += ["            uj = u64(j)", "            t = ui * u64(C) + uj"]
    return out + _indent(body, 3)


def _lane_sums(desc: KernelDesc, body: list) -> list:
    """Flat chunks, or rows in segments of CHUNK: position j of each block of LANES
    elements adds into lane j in the value's dtype; a chunk's (segment's) lanes are added in
    order in float64 (see the module docstring)."""
    flat = desc.mode == "flat"
    reds = list(enumerate(desc.reductions))
    out = [f"    lanes{k} = scratch_{DTYPE_SUFFIXES[r.dtype]}({LANES})" for k, r in reds]
    if flat:
        out += ["    for c in range(lo, hi):", f"        base = c * {CHUNK}",
                f"        m = min({CHUNK}, n - base)"]
        out += [f"        acc{k} = 0.0" for k, _ in reds]
        seg, ind, done = [], 2, "c"
    else:
        out += ["    for i in range(lo, hi):", "        ui = u64(i)",
                "        row = ui * u64(C)"]
        out += [f"        acc{k} = 0.0" for k, _ in reds]
        out += [f"        for base in range(0, C, {CHUNK}):",
                f"            m = min({CHUNK}, C - base)"]
        seg, ind, done = [""], 3, "i"
    pad = "    " * ind
    out += [pad + "w = min(m, " + str(LANES) + ")", pad + "for j in range(w):"]
    out += [pad + f"    lanes{k}[j] = 0.0" for k, _ in reds]
    out += [pad + f"for b0 in range(0, m, {LANES}):",
            pad + f"    for q in range(min({LANES}, m - b0)):",
            pad + "        uq = u64(q)"]
    if flat:
        out.append(pad + "        t = u64(base + b0 + q)")
    else:
        out += [pad + "        uj = u64(base + b0 + q)", pad + "        t = row + uj"]
    out += _indent(body, ind + 2)
    out += [pad + f"        lanes{k}[uq] += {r.value}" for k, r in reds]
    if flat:  # the chunk's partial
        out += [pad + "for j in range(w):"]
        out += [pad + f"    acc{k} += lanes{k}[j]" for k, _ in reds]
    else:  # the segment's partial, added to the row's in order (as CUDA's segments)
        out += [pad + f"part{k} = 0.0" for k, _ in reds]
        out += [pad + "for j in range(w):"]
        out += [pad + f"    part{k} += lanes{k}[j]" for k, _ in reds]
        out += [pad + f"acc{k} += part{k}" for k, _ in reds]
    del seg
    out += [f"        r{k}[{done}] = acc{k}" for k, _ in reds]
    return out


def _column_sums(desc: KernelDesc, body: list) -> list:
    """Blocks of COLBLOCK columns per part; per column, RBLOCK rows summed in the value's
    dtype (a stack array the column loop updates lane-wise), then float64, rows in order."""
    out = []
    for k, r in enumerate(desc.reductions):
        out += [f"    acc{k} = scratch_f64({COLBLOCK})",
                f"    p{k} = scratch_{DTYPE_SUFFIXES[r.dtype]}({COLBLOCK})"]
    out += ["    for b in range(lo, hi):", f"        j0 = b * {COLBLOCK}",
            f"        j1 = min(j0 + {COLBLOCK}, C)", "        for j in range(j1 - j0):"]
    out += [f"            acc{k}[j] = 0.0" for k in range(len(desc.reductions))]
    out.append(f"        for i0 in range(0, R, {RBLOCK}):")
    out += ["            for j in range(j1 - j0):"]
    out += [f"                p{k}[j] = 0.0" for k in range(len(desc.reductions))]
    out += [f"            for i in range(i0, min(i0 + {RBLOCK}, R)):",
            "                ui = u64(i)",
            "                for j in range(j0, j1):",
            "                    uj = u64(j)",
            "                    t = ui * u64(C) + uj"]
    out += _indent(body, 5)
    out += [f"                    p{k}[uj - u64(j0)] += {r.value}"
            for k, r in enumerate(desc.reductions)]
    for k in range(len(desc.reductions)):
        out += ["            for j in range(j1 - j0):", f"                acc{k}[j] += p{k}[j]"]
    for k in range(len(desc.reductions)):
        out += ["        for j in range(j0, j1):", f"            r{k}[j] = acc{k}[j - j0]"]
    return out
