"""The CUDA renderer: a :class:`KernelDesc` as a Numba ``@cuda.jit`` module.

The second renderer of the one description (``render_cpu`` is the first): the same loads,
lines and stores per element, and the sums in the CPU kernels' order, so a CUDA sum of
values the device computed exactly (arithmetic, comparisons, selections) has the CPU's bits,
and nothing depends on the launch configuration:

* elements: grid-stride loops over the iteration space (``flat``: ``n`` elements; ``rows``:
  ``R x C`` with ``row`` operands indexed by ``j = t % C``, ``col`` operands by ``i``);
* ``all`` sums: a block per chunk of :data:`CHUNK` elements (grid-stride over chunks); lane
  ``q`` of :data:`LANES` adds positions ``q, q + LANES, ...`` of the chunk in the value's
  dtype (a thread adds lanes ``tid, tid + blockDim...``: any block size gives the same
  lanes); thread 0 adds the lanes in order in float64 into the chunk's partial; the caller
  finishes the partials (``cuda/launch.finish_sum``: in order, float64, on the device);
* ``rows`` sums: a block per row and segment of :data:`CHUNK` columns, whose lane totals
  add up in float64 into the segment's partial; ``finish_segments`` adds a row's partials
  in order, as the CPU adds its segments;
* ``cols`` sums: a thread per column and segment of :data:`RBLOCK` rows, adding them in the
  value's dtype into a float64 partial; ``finish_segments`` adds each column's partials in row
  order in float64 (coalesced: neighbouring threads read neighbouring columns);
* element loops and sum lanes take :data:`UNROLL` elements a turn, all their loads first
  (then the remainder one by one): the compiler cannot move a load above a store to an
  array it cannot tell apart, so without it a thread has one element's loads in flight.

No float atomics; no fast-math (a fastmath *set* would turn on approximate division and
flush-to-zero). NVVM contracts ``a * b + c`` into an FMA by default (its ``-fma=1``), which
numba-cuda does not let a kernel turn off, and a fused kernel would then round a
multiply-add once where the eager sequence (and the CPU) rounds twice. So every float
product of a line is rendered as ``mul_f32``/``mul_f64`` (libdevice's ``fmul_rn``/``dmul_rn``:
PTX ``mul.rn``, which is never contracted): element-wise arithmetic has the CPU's bits, and
compiled CUDA kernels equal the eager CUDA sequence bit for bit.
"""

from __future__ import annotations

import ast
import re

from ..kernels.mathtable import DTYPE_SUFFIXES
from .kernel_desc import CHUNK, LANES, RBLOCK, KernelDesc

__all__ = ["render_cuda", "module_source_cuda"]

_HEADER = """import numpy as np
from numba import cuda

{imports}
f32 = np.float32
f64 = np.float64

"""
_POW_SCALAR = re.compile(r"\bpow_scalar\(")


def module_source_cuda(desc: KernelDesc) -> str:
    """The module defining ``kernel`` (a ``@cuda.jit`` function) for ``desc``."""
    names = set(desc.math)
    for line in desc.lines:
        if "pow_scalar(" in line.expr:
            names.discard("pow_scalar")
            names.add(f"pow_scalar_{DTYPE_SUFFIXES.get(line.dtype, 'f64')}")
        if "*" in line.expr and line.dtype in DTYPE_SUFFIXES:
            names.add(f"mul_{DTYPE_SUFFIXES[line.dtype]}")
    imports = (f"from jitgrad.cuda.device_math import {', '.join(sorted(names))}\n"
               if names else "")
    return (_HEADER.format(imports=imports) + "@cuda.jit(cache=True)\n" + render_cuda(desc)
            + "\n")


def signature_cuda(desc: KernelDesc) -> list[str]:
    """The kernel's parameter names: the CPU kernel's without ``lo, hi`` (the grid covers
    the whole space)."""
    return desc.signature()[2:]


def render_cuda(desc: KernelDesc, name: str = "kernel") -> str:
    """The source of the CUDA kernel function ``name``."""
    m = desc.mode
    if m == "strided":
        raise ValueError("strided kernels have no CUDA rendering (eager CUDA ops make such "
                         "operands contiguous first)")
    idx = {"full": "[t]", "row": "[j]", "col": "[i]", "scalar": "", "item": "[0]"}
    if m == "flat":
        idx["row"] = idx["col"] = "[t]"
    body = [f"x{k} = a{k}{idx[op.pattern]}" for k, op in enumerate(desc.operands)]
    for ln in desc.lines:
        expr = ln.expr
        if "pow_scalar(" in expr:
            expr = _POW_SCALAR.sub(f"pow_scalar_{DTYPE_SUFFIXES.get(ln.dtype, 'f64')}(", expr)
        if "*" in expr and ln.dtype in DTYPE_SUFFIXES:
            expr = _uncontracted(expr, f"mul_{DTYPE_SUFFIXES[ln.dtype]}")
        note = f"  # {ln.note}" if ln.note else ""
        body.append(f"{ln.target} = {expr}{note}")
    body += [f"{desc.store_array(k)}[t] = {v}" for k, (v, _) in enumerate(desc.stores)]
    n_loads = len(desc.operands)
    src = [f"def {name}({', '.join(signature_cuda(desc))}):"]
    if desc.title:
        src.append(f"    # {desc.title}")
    if not desc.reductions:
        src += _elements(m, body, n_loads)
    elif m == "cols":
        src += _column_sums(desc, body, n_loads)
    else:
        src += _lane_sums(desc, body, n_loads)
    return "\n".join(src)


class _Products(ast.NodeTransformer):
    """``a * b`` -> ``mul(a, b)`` throughout an expression."""

    def __init__(self, mul: str) -> None:
        self.mul = mul

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Mult):
            return ast.Call(ast.Name(self.mul, ast.Load()), [node.left, node.right], [])
        return node


def _uncontracted(expr: str, mul: str) -> str:
    """``expr`` with every product a call of device function ``mul`` (never an FMA)."""
    tree = _Products(mul).visit(ast.parse(expr, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree))


#: elements a thread loads before it computes any of them. A GPU keeps its memory busy only
#: with enough loads in flight; one element's loads per thread at a time (a store between
#: two elements' loads is a barrier the compiler keeps: it cannot tell the arrays apart)
#: leave an H100/H200 below its copy bandwidth at the occupancy a fused kernel allows.
UNROLL = 4


def _indent(lines, n: int) -> list:
    return [" " * (4 * n) + s for s in lines]


def _per_element(lines: list, u: int, names: str) -> list:
    """``lines`` for the ``u``-th of :data:`UNROLL` elements: each per-element name (the
    loads and values ``x*``/``v*``, the indices in ``names``) suffixed ``_u``, comments
    dropped."""
    pat = re.compile(rf"\b(x\d+|v\d+|{names})\b")
    return [pat.sub(lambda mt: f"{mt.group(1)}_{u}", ln.split("  #")[0]) for ln in lines]


def _unrolled(body: list, n_loads: int, index, names: str, after: list = ()) -> list:
    """:data:`UNROLL` elements at once: each element's ``index(u)`` lines and loads first
    (a thread then has all their loads in flight), then each element's lines, stores and
    ``after``, in element order: the order of the loop it replaces, so the same bits."""
    out = []
    for u in range(UNROLL):
        out += _per_element(index(u), u, names)
    for u in range(UNROLL):
        out += _per_element(body[:n_loads], u, names)
    for u in range(UNROLL):
        out += _per_element(list(body[n_loads:]) + list(after), u, names)
    return out


def _elements(mode: str, body: list, n_loads: int) -> list:
    """A grid-stride loop, :data:`UNROLL` elements a turn (``t0, t0 + step, ...``: each
    coalesced across the threads), then the remaining elements one by one."""
    size = "n" if mode == "flat" else "R * C"
    rows = [] if mode == "flat" else ["i = t // C", "j = t - i * C"]

    def index(u):
        return [f"t = t0 + {u} * step" if u else "t = t0"] + rows
    out = ["    start = cuda.grid(1)", "    step = cuda.gridsize(1)", "    t0 = start",
           f"    while t0 + {UNROLL - 1} * step < {size}:"]
    out += _indent(_unrolled(body, n_loads, index, "t|i|j"), 2)
    out += [f"        t0 += {UNROLL} * step", f"    for t in range(t0, {size}, step):"]
    return out + _indent(rows + body, 2)


def _lane_sums(desc: KernelDesc, body: list, n_loads: int) -> list:
    """``all`` sums (a block per chunk) and ``rows`` sums (a block per row and segment of
    :data:`CHUNK` columns, each a float64 partial that ``cuda/launch.finish_segments`` adds
    in order per row: a few long rows no longer leave most of the GPU idle). A lane adds
    its positions :data:`UNROLL` at a time (loads first), then the rest."""
    flat = desc.mode == "flat"
    reds = list(enumerate(desc.reductions))
    out = [f"    lanes{k} = cuda.shared.array({LANES}, {_nb(r.dtype)})" for k, r in reds]
    out += ["    tid = cuda.threadIdx.x", "    nt = cuda.blockDim.x"]
    if flat:
        out += [f"    nblocks = (n + {CHUNK - 1}) // {CHUNK}",
                "    for c in range(cuda.blockIdx.x, nblocks, cuda.gridDim.x):",
                f"        base = c * {CHUNK}", f"        m = min({CHUNK}, n - base)"]
        pad, start = 2, "base"
    else:  # a block per (segment, row): partial r[sg * R + i]
        out += [f"    segs = (C + {CHUNK - 1}) // {CHUNK}",
                "    for u in range(cuda.blockIdx.x, segs * R, cuda.gridDim.x):",
                "        sg = u // R", "        i = u - sg * R",
                f"        seg = sg * {CHUNK}", f"        m = min({CHUNK}, C - seg)"]
        pad, start = 2, "i * C + seg"
    p = "    " * pad
    out += [p + f"for q in range(tid, {LANES}, nt):"]
    out += [p + f"    lane_acc{k} = {_nb(r.dtype)}(0.0)" for k, r in reds]
    names = "t" if flat else "t|j"

    def index(u):
        off = f" + {u * LANES}" if u else ""
        return [f"t = {start} + b0 + q{off}"] + ([] if flat else [f"j = seg + b0 + q{off}"])
    accumulate = [f"lane_acc{k} += {r.value}" for k, r in reds]
    out += [p + "    b0 = 0", p + f"    while b0 + {(UNROLL - 1) * LANES} < m - q:"]
    out += _indent(_unrolled(body, n_loads, index, names, accumulate), pad + 2)
    out += [p + f"        b0 += {UNROLL * LANES}"]
    out += [p + f"    for b0 in range(b0, m - q, {LANES}):"]
    out += _indent(index(0), pad + 2) + _indent(body, pad + 2)
    out += [p + f"        {a}" for a in accumulate]
    out += [p + f"    lanes{k}[q] = lane_acc{k}" for k, _ in reds]
    out += [p + "cuda.syncthreads()", p + "if tid == 0:"]
    out += [p + f"    part{k} = 0.0" for k, _ in reds]
    out += [p + f"    for q in range(min(m, {LANES})):"]
    out += [p + f"        part{k} += f64(lanes{k}[q])" for k, _ in reds]
    out += [p + f"    r{k}[{'c' if flat else 'u'}] = part{k}" for k, _ in reds]
    out.append(p + "cuda.syncthreads()")
    return out


def _column_sums(desc: KernelDesc, body: list, n_loads: int) -> list:
    """A thread per (segment of :data:`RBLOCK` rows, column): the segment's rows added in
    the value's dtype into float64 partial ``r[s * C + j]``; ``cuda/launch.finish_segments``
    then adds each column's partials in row order in float64 -- the CPU's order (segments
    in the value's dtype, float64 across them), with ``ceil(R / RBLOCK) * C`` threads
    instead of ``C`` (a thread per column left a bias gradient of a 4096-row batch to 10 or
    256 threads each walking every row)."""
    reds = list(enumerate(desc.reductions))
    out = ["    start = cuda.grid(1)", "    step = cuda.gridsize(1)",
           f"    segs = (R + {RBLOCK - 1}) // {RBLOCK}",
           "    for u in range(start, segs * C, step):",
           "        s = u // C", "        j = u - s * C",
           f"        i0 = s * {RBLOCK}", f"        i1 = min(i0 + {RBLOCK}, R)"]
    out += [f"        col_part{k} = {_nb(r.dtype)}(0.0)" for k, r in reds]

    def index(u):
        return [f"i = i0 + {u}" if u else "i = i0", "t = i * C + j"]
    accumulate = [f"col_part{k} += {r.value}" for k, r in reds]
    out += [f"        while i0 + {UNROLL - 1} < i1:"]
    out += _indent(_unrolled(body, n_loads, index, "t|i", accumulate), 3)
    out += [f"            i0 += {UNROLL}", "        for i in range(i0, i1):",
            "            t = i * C + j"]
    out += _indent(body + accumulate, 3)
    out += [f"        r{k}[u] = f64(col_part{k})" for k, _ in reds]
    return out


def _nb(dtype: str) -> str:
    """The NumPy type of a sum's value dtype (a shared array's dtype, a typed zero)."""
    return f"np.{dtype}"

