"""The backend-neutral description of a generated element-wise kernel.

A :class:`KernelDesc` says *what* a kernel computes, per element of an iteration space, and
nothing about how a backend writes the loop: the operands it loads (with their access
pattern), the scalar lines it evaluates, the values it stores and the sums it reduces. Fused
groups of a compiled plan and single eager ops are both described this way
(:mod:`jitgrad.compiler.describe`); a renderer turns a description into source
(:mod:`jitgrad.compiler.render_cpu` for Numba on the CPU; a CUDA renderer would be a second
one).

**Iteration space and arguments.** A kernel computes *parts* ``[lo, hi)`` of its space, so a
caller can split the parts over threads; its arguments are ``lo, hi``, the sizes (``n`` in
``flat`` mode, ``R, C`` otherwise), the operands ``a0, a1...``, the scalar arguments
``s0, s1...``, the stored outputs ``o0, o1...`` and one float64 array per reduction
``r0, r1...``. Modes:

* ``flat``: ``n`` elements in chunks of :data:`CHUNK` (a part is a chunk);
* ``rows``: an ``R x C`` space, a part is a row;
* ``cols``: an ``R x C`` space, a part is a block of :data:`COLBLOCK` columns;
* ``strided``: an ``R x C`` space over strided 2-D operands (eager broadcasting that no split
  expresses), a part is a row; no reductions.

**Operand patterns.** ``full`` (one value per element), ``row`` (varies along C only),
``col`` (along R only), ``scalar`` (passed by value), ``item`` (one value, read from a
one-element array: a device scalar, which passing by value would first copy to the host),
``strided`` (a 2-D array indexed ``[i, j]``, any strides).

**Expressions** are Python expression syntax over the loads ``x0, x1...``, the scalar
arguments ``s0...``, earlier lines' targets, typed literals and casts (``f32(1.5)``,
``f64(np.inf)``, ``f32(x0)``), the kernel-math functions of
:mod:`jitgrad.kernels.mathtable` per dtype (``tanh_f32(x)``) and its scalar helpers
(``maximum``, ``minimum``, ``pow_scalar``), ``abs``, arithmetic, comparisons, ``and``/``or``/
``not`` and conditional expressions.

**Sums** have one order, whatever else the kernel computes, so a sum gives the same bits in a
fused kernel as in the eager kernel that sums a materialised array (eager == compiled), and
the order never depends on how a compiler vectorised the loop:

* ``all`` (flat mode only): in each chunk, position ``j`` of every block of :data:`LANES`
  elements adds into lane ``j``, in the value's dtype, blocks in order; the chunk's partial
  is its lanes added in order in float64; the caller adds the chunks' partials in order;
* ``rows`` (rows mode): each row likewise, in segments of :data:`CHUNK` elements whose
  partials add up in float64;
* ``cols`` (cols mode): each column sums :data:`RBLOCK` rows at a time in the value's dtype,
  then adds them to a float64 total, rows in order.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import numpy as np

from ..kernels.mathtable import DTYPE_SUFFIXES, FUNCTIONS, SCALAR_HELPERS
from ..trace.ir import dtype_name

__all__ = ["KernelDesc", "Operand", "Line", "Reduction", "CHUNK", "LANES", "RBLOCK",
           "COLBLOCK", "MODES", "PATTERNS", "unsupported_float"]

CHUNK = 1 << 14     # elements per part of a flat kernel (fixed: results never depend on threads)
LANES = 256         # lanes of a flat or row sum: each adds CHUNK / LANES values in its dtype
RBLOCK = 32         # rows summed per column likewise in column sums
COLBLOCK = 256      # columns per part of a cols kernel

MODES = ("flat", "rows", "cols", "strided")
PATTERNS = ("full", "row", "col", "scalar", "item", "strided")
_MATH_CALL = re.compile(r"\b(" + "|".join(
    [f"{f}_{t}" for f in FUNCTIONS for t in DTYPE_SUFFIXES.values()] + list(SCALAR_HELPERS))
    + r")\(")


@functools.lru_cache(maxsize=8192)
def _math_calls(expr: str) -> tuple:
    """The kernel-math functions ``expr`` calls (memoised: kernels repeat their lines)."""
    return tuple(_MATH_CALL.findall(expr))


@dataclass(frozen=True)
class Operand:
    """An array (or scalar) the kernel reads: its NumPy dtype name and access pattern."""

    dtype: str
    pattern: str


@dataclass(frozen=True)
class Line:
    """``target = expr`` evaluated per element, of NumPy dtype ``dtype``; ``note`` names what
    it computes."""

    target: str
    expr: str
    note: str = ""
    dtype: str = ""


@dataclass(frozen=True)
class Reduction:
    """A sum of ``value`` (a load or a line's target) of dtype ``dtype``, of ``kind``
    "all", "rows" or "cols"."""

    value: str
    kind: str
    dtype: str


@dataclass(frozen=True)
class KernelDesc:
    """What one generated kernel computes (see the module docstring)."""

    mode: str
    operands: tuple[Operand, ...]
    scalars: tuple[str, ...]                 # dtype names of s0, s1...
    lines: tuple[Line, ...]
    stores: tuple[tuple[str, str], ...]      # (value, dtype name) written to o0, o1...
    reductions: tuple[Reduction, ...] = ()
    title: str = ""                          # one line saying what it computes
    into: bool = False   # the one store goes to a0: an update in place, no o0 argument
    # (store k, operand m) pairs: store k goes into operand m, read at the same element
    # before it is written (a plan's update in place, e.g. ``p - lr * g`` into ``p``): no
    # o_k argument, and no second array over the same memory for the compiler to guard
    aliases: tuple[tuple[int, int], ...] = ()
    math: frozenset = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown kernel mode {self.mode!r}")
        for op in self.operands:
            if op.pattern not in PATTERNS:
                raise ValueError(f"unknown operand pattern {op.pattern!r}")
        kinds = {r.kind for r in self.reductions}
        allowed = {"flat": {"all"}, "rows": {"rows"}, "cols": {"cols"}, "strided": set()}
        if not kinds <= allowed[self.mode]:
            raise ValueError(f"{self.mode} kernels cannot compute {sorted(kinds)} sums "
                             "(each kind of sum has one order: see the module docstring)")
        if self.into and (len(self.stores) != 1 or self.reductions or not self.operands
                          or self.operands[0].pattern != "full"
                          or self.operands[0].dtype != self.stores[0][1]):
            raise ValueError("an in-place kernel stores one value into its first operand, "
                             "a full array of the value's dtype")
        for k, m in self.aliases:
            if not (0 <= k < len(self.stores) and 0 <= m < len(self.operands)) or \
                    self.operands[m].pattern != "full" or \
                    self.operands[m].dtype != self.stores[k][1]:
                raise ValueError("a store aliased to an operand needs a full operand of the "
                                 "stored value's dtype")
        if len({k for k, _ in self.aliases}) != len(self.aliases) or \
                len({m for _, m in self.aliases}) != len(self.aliases) or \
                (self.into and self.aliases):
            raise ValueError("each store and operand may be aliased once (and not with into)")
        called = set()
        for line in self.lines:
            called.update(_math_calls(line.expr))
        object.__setattr__(self, "math", frozenset(called))

    def parts(self, n: int = 0, R: int = 0, C: int = 0) -> int:
        """How many parts the iteration space has (what ``lo, hi`` range over)."""
        if self.mode == "flat":
            return (n + CHUNK - 1) // CHUNK
        if self.mode == "cols":
            return (C + COLBLOCK - 1) // COLBLOCK
        return R

    def partials(self, kind: str, n: int = 0, R: int = 0, C: int = 0) -> int:
        """Length of the float64 array a reduction of ``kind`` writes."""
        if kind == "rows":
            return R
        if kind == "cols":
            return C
        return max(self.parts(n, R, C), 1)

    def store_array(self, k: int) -> str:
        """The name of the array store ``k`` writes: ``o{k}``, or the operand it updates in
        place (``into``, ``aliases``)."""
        if self.into:
            return "a0"
        m = dict(self.aliases).get(k)
        return f"o{k}" if m is None else f"a{m}"

    def signature(self) -> list[str]:
        """The kernel's parameter names, in order."""
        sizes = ["n"] if self.mode == "flat" else ["R", "C"]
        return (["lo", "hi"] + sizes + [f"a{k}" for k in range(len(self.operands))]
                + [f"s{k}" for k in range(len(self.scalars))]
                + [a for k in range(len(self.stores)) if (a := self.store_array(k))[0] == "o"]
                + [f"r{k}" for k in range(len(self.reductions))])


def unsupported_float(graph) -> str | None:
    """Why ``graph`` cannot become kernels because of a float dtype they do not compute in
    (float16: kernels compute in float32 and float64), or None. Such a signature runs
    eagerly, where every op handles float16."""
    for v in [*graph.inputs, *graph.externals, *(e.out for e in graph.eqns)]:
        dt = np.dtype(v.dtype)
        if dt.kind == "f" and (name := dtype_name(dt)) not in DTYPE_SUFFIXES:
            return (f"it computes on {name} tensors ({v!r}); compiled kernels compute in "
                    "float32 and float64")
    return None
