"""Numba source for a fused group.

The generated function reads like hand-written code: a header comment lists the equations it
fuses, operands are loaded once per element (``full`` ``a[t]``, ``row`` ``a[j]``, ``col``
``a[i]``, ``scalar`` ``a``), each equation's scalar expression from the op registry becomes one
assignment with typed literals (``f32(1.0)``: float32 math never widens), and reductions
accumulate in float64 (per chunk / row / column block, combined in a fixed order, so results
do not depend on the thread count). Shapes are arguments: one source serves every size.
Scalar literals and op params are arguments too, so a new learning rate compiles nothing.
The function computes a range ``[lo, hi)`` of its parts (chunks, rows or column blocks), so
the plan runs it on several threads (``kernels/pool.py``) from one sequential compilation.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import numpy as np

from ..trace.ir import Lit, Var
from .fusion import Group, pattern, reduction_kind

__all__ = ["GroupCode", "generate_group", "CHUNK", "COLBLOCK", "SCALAR_HELPERS"]

CHUNK = 1 << 14     # elements per partial sum of a flat reduction (fixed: determinism)
COLBLOCK = 256      # columns per task of a column-reduction loop
BLOCK = 256         # elements summed in the value's dtype before joining a float64 total
RBLOCK = 32         # rows summed per column likewise in column reductions
_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_MATH = ("cos", "erf", "exp", "expm1", "log", "log1p", "pow", "rsqrt", "sigmoid", "sin",
         "softplus", "sqrt", "tanh")   # kernels/vmath: called per dtype (tanh_f32, ...)
SCALAR_HELPERS = ("maximum", "minimum", "pow_scalar")   # kernels/scalar.py
_NP_TYPES = {"f32": np.float32, "f64": np.float64}


@dataclass
class GroupCode:
    """A generated kernel and how the plan calls it."""

    body: str                       # the function's source (named by ``{NAME}``)
    mode: str                       # "flat", "rows" or "cols"
    split: int
    operands: list                  # (Var, pattern) read by the loop
    scalars: list                   # literal / param values, in argument order (with dtypes)
    outputs: list                   # member Vars written as full arrays
    reductions: list                # (Eqn, kind, scale)
    math: set = field(default_factory=set)
    cost: float = 0.0               # estimated work per element (see ``element_cost``)


def _tname(dt) -> str:
    return _TYPES.get(np.dtype(dt), "np." + np.dtype(dt).name)


def _choose_split(group: Group) -> int:
    if 0 in group.splits:
        return 0
    inner = [p for p in group.splits if 0 < p < len(group.shape)]
    return max(inner) if inner else min(group.splits)


class _Expr(ast.NodeTransformer):
    """Rewrites an op's scalar expression over the loop's local names."""

    def __init__(self, names: dict, tname: str):
        self.names = names
        self.tname = tname

    def visit_Name(self, node):
        if node.id in self.names:
            ref = self.names[node.id]
            if not ref.isidentifier():  # an inlined param literal: f32(2.0)
                return ast.copy_location(ast.parse(ref, mode="eval").body, node)
            return ast.copy_location(ast.Name(id=ref, ctx=node.ctx), node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _MATH:
            # the dtype's implementation directly: the generic overload would cost Numba an
            # extra typing/inlining pipeline per function and kernel
            node.func = ast.Name(id=f"{node.func.id}_{self.tname}", ctx=ast.Load())
        return node

    def visit_Constant(self, node):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return ast.copy_location(ast.Call(
                func=ast.Name(id=self.tname, ctx=ast.Load()),
                args=[ast.Constant(float(node.value))], keywords=[]), node)
        return node


def _called(tree) -> set:
    """Names of the kernel-math functions an expression calls."""
    known = {f"{m}_{t}" for m in _MATH for t in _NP_TYPES} | set(SCALAR_HELPERS)
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name) and n.func.id in known}


_BINOPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply,
           ast.Div: np.true_divide}
_CMPOPS = {ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
           ast.Gt: np.greater, ast.GtE: np.greater_equal}


class _Fold(ast.NodeTransformer):
    """Constant folding over typed literals (``f32(2.0)``), in the literal's own precision,
    and ``pow_scalar`` with a literal exponent specialised as ``kernels.scalar.pow_scalar``
    would branch at run time (x*x, sqrt, 1/x...). Op params are literals in fused kernels,
    so ``pow_backward``'s ``exponent - 1.0`` and GELU's ``approx`` branch fold away and
    Numba never compiles the general ``pow``/``erf`` a kernel does not use."""

    def __init__(self, tname: str):
        self.tname = tname

    def _value(self, node):
        """The literal's value as a NumPy scalar (or a bool), else None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return node.value
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _NP_TYPES and len(node.args) == 1):
            return None
        arg, sign = node.args[0], 1.0
        if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub):
            arg, sign = arg.operand, -1.0
        if isinstance(arg, ast.Constant) and isinstance(arg.value, float):
            value = arg.value
        elif (isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name)
              and arg.value.id == "np" and arg.attr in ("nan", "inf")):
            value = getattr(np, arg.attr)
        else:
            return None
        return _NP_TYPES[node.func.id](sign * value)

    def _literal(self, v, like: ast.AST) -> ast.AST:
        if isinstance(v, (bool, np.bool_)):
            return ast.copy_location(ast.Constant(bool(v)), like)
        tname = {np.float32: "f32", np.float64: "f64"}[type(v)]
        return ast.copy_location(ast.parse(_literal(v, tname), mode="eval").body, like)

    def visit_BinOp(self, node):
        self.generic_visit(node)
        a, b = self._value(node.left), self._value(node.right)
        fn = _BINOPS.get(type(node.op))
        if fn and isinstance(a, np.floating) and isinstance(b, np.floating) \
                and type(a) is type(b):
            with np.errstate(all="ignore"):
                return self._literal(fn(a, b), node)
        return node

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        v = self._value(node.operand)
        if isinstance(node.op, ast.USub) and isinstance(v, np.floating):
            return self._literal(-v, node)
        if isinstance(node.op, ast.Not) and isinstance(v, bool):
            return self._literal(not v, node)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) != 1:
            return node
        a, b = self._value(node.left), self._value(node.comparators[0])
        fn = _CMPOPS.get(type(node.ops[0]))
        if fn and isinstance(a, np.floating) and isinstance(b, np.floating):
            return self._literal(bool(fn(a, b)), node)
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        t = self._value(node.test)
        if isinstance(t, bool):
            return node.body if t else node.orelse
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Name) and node.func.id == "pow_scalar"):
            return node
        base, e = node.args
        ev = self._value(e)
        if not isinstance(ev, np.floating):
            return node
        t = self.tname
        one = ast.parse(f"{t}(1.0)", mode="eval").body
        sqrt = f"sqrt_{t}"

        def mul(*xs):
            out = xs[0]
            for x in xs[1:]:
                out = ast.BinOp(out, ast.Mult(), x)
            return out

        def call(name, arg):
            return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=[arg], keywords=[])

        forms = {2.0: lambda: mul(base, base), 3.0: lambda: mul(base, base, base),
                 1.0: lambda: base, 0.5: lambda: call(sqrt, base),
                 -0.5: lambda: ast.BinOp(one, ast.Div(), call(sqrt, base)),
                 -1.0: lambda: ast.BinOp(one, ast.Div(), base),
                 -2.0: lambda: ast.BinOp(one, ast.Div(), mul(base, base))}
        make = forms.get(float(ev))
        if make is None:  # what pow_scalar falls back to
            return ast.copy_location(ast.Call(func=ast.Name(id=f"pow_{t}", ctx=ast.Load()),
                                              args=[base, e], keywords=[]), node)
        return ast.copy_location(make(), node)


def _literal(value, tname: str) -> str:
    v = float(value)
    if v != v:
        return f"{tname}(np.nan)"
    if v in (float("inf"), float("-inf")):
        return f"{tname}({'-' if v < 0 else ''}np.inf)"
    return f"{tname}({v!r})"


def generate_group(group: Group, needed_outside: set) -> GroupCode:
    """The kernel source for ``group``; ``needed_outside``: ids of member Vars read by other
    steps, outputs or effects (they are written to arrays)."""
    p = _choose_split(group)
    full = group.shape
    reds = []
    for r in group.reductions:
        kind = reduction_kind(r.params["dims"], full, p)
        n = int(np.prod([full[d] for d in r.params["dims"]])) if r.params["dims"] else 1
        scale = 1.0 / n if r.op.name == "mean" and n else 1.0
        reds.append((r, kind, scale))
    kinds = {k for _, k, _ in reds if k != "all"}
    mode = "flat" if p == 0 else ("cols" if "cols" in kinds else "rows")

    operands = [(v, pattern(v.shape, full, p)) for v in group.operands()]
    names: dict = {}
    loads = []
    for k, (v, pat) in enumerate(operands):
        names[id(v)] = f"x{k}"
        # unsigned indices: Numba then emits no negative-index wraparound branches, which
        # would stop LLVM from vectorising the loop (measured: 13.5 ms -> 1.3 ms for W2)
        idx = {"full": "[t]", "row": "[uj]", "col": "[ui]", "scalar": ""}[pat]
        if mode == "flat" and pat == "row":
            idx = "[t]"
        loads.append(f"x{k} = a{k}{idx}")
    scalars: list = []
    lines: list = []
    math: set = set()
    cost = 0.0
    for e in group.eqns:
        cdt = np.dtype(e.cdt) if e.cdt is not None else np.dtype(e.out.dtype)
        tname = _tname(cdt)
        local = {}
        no_promote = e.op.extra.get("no_promote", ())
        for k, (argname, i) in enumerate(zip(e.op.inputs, e.ins)):
            if isinstance(i, Var):
                ref = names[id(i)]
                if k not in no_promote and np.dtype(i.dtype) != cdt:
                    ref = f"{tname}({ref})"
            else:  # a Python literal: a kernel argument of the compute dtype
                scalars.append((i.value if isinstance(i, Lit) else i, cdt))
                ref = f"s{len(scalars) - 1}"
            local[argname] = ref
        for pname in e.op.params:
            # op params are structural (an exponent, a threshold): inlined as typed literals,
            # so LLVM folds e.g. pow_scalar(x, 2.0) to x * x and the loop vectorises
            local[pname] = _literal(e.params[pname], tname)
        tree = ast.parse(e.op.expr, mode="eval")
        tree = _Expr(local, tname).visit(tree)
        tree = ast.fix_missing_locations(_Fold(tname).visit(tree))
        calls = _called(tree)
        math |= calls
        cost += 0.5 + 4.0 * sum(1 for c in calls if c not in SCALAR_HELPERS)
        var = f"v{e.out.n}"
        names[id(e.out)] = var
        lines.append(f"{var} = {ast.unparse(tree.body)}  # {e.name}")
    outputs = [e.out for e in group.eqns if id(e.out) in needed_outside]
    stores = [f"o{k}[t] = {names[id(v)]}" for k, v in enumerate(outputs)]
    accs = []
    for k, (r, kind, _) in enumerate(reds):
        src = r.ins[0]
        accs.append((k, kind, names[id(src)], _tname(src.dtype)))

    header = ["# fuses: " + "; ".join(f"{e.out!r} = {e.name}" for e in group.eqns + [
        r for r, _, _ in reds])]
    args = ["lo", "hi"] + (["n"] if mode == "flat" else ["R", "C"]) \
        + [f"a{k}" for k in range(len(operands))] + [f"s{k}" for k in range(len(scalars))] \
        + [f"o{k}" for k in range(len(outputs))] \
        + [f"r{k}" for k in range(len(reds))]
    body = _loop(mode, loads, lines, stores, accs)
    src = "\n".join(
        ["def {NAME}(" + ", ".join(args) + "):"] + ["    " + h for h in header] + body)
    cost += len(operands) + len(outputs) + len(reds)
    return GroupCode(src, mode, p, operands, scalars, outputs, reds, math, cost)


def _loop(mode: str, loads, lines, stores, accs) -> list:
    inner = loads + lines + stores
    out = []
    if mode in ("flat", "rows") and accs:
        # Blocked accumulation: BLOCK elements in the value's own dtype (the vectoriser
        # splits them over SIMD lanes: 8 float32 lanes of 32), float64 across blocks. A
        # float64 accumulator per element would make LLVM vectorise the whole loop 4 wide
        # (the float32 math at half speed: W2 1.9x slower single-threaded).
        if mode == "flat":
            out.append("    for c in range(lo, hi):")
            out += [f"        acc{k} = 0.0" for k, *_ in accs]
            out.append(f"        base = c * {CHUNK}")
            out.append(f"        m = min({CHUNK}, n - base)")
            out.append(f"        for b0 in range(0, m, {BLOCK}):")
            out += [f"            p{k} = {tn}(0.0)" for k, _, _, tn in accs]
            out.append(f"            for k in range(b0, min(b0 + {BLOCK}, m)):")
            out.append("                t = np.uint64(base + k)")
            done = "c"
        else:
            out.append("    for i in range(lo, hi):")
            out += [f"        acc{k} = 0.0" for k, *_ in accs]
            out.append("        ui = np.uint64(i)")
            out.append(f"        for b0 in range(0, C, {BLOCK}):")
            out += [f"            p{k} = {tn}(0.0)" for k, _, _, tn in accs]
            out.append(f"            for j in range(b0, min(b0 + {BLOCK}, C)):")
            out.append("                uj = np.uint64(j)")
            out.append("                t = ui * np.uint64(C) + uj")
            done = "i"
        out += ["                " + s for s in inner]
        out += [f"                p{k} += {v}" for k, _, v, _ in accs]
        out += [f"            acc{k} += p{k}" for k, *_ in accs]
        out += [f"        r{k}[{done}] = acc{k}" for k, *_ in accs]
        return out
    if mode == "flat":
        out.append("    for c in range(lo, hi):")
        out.append(f"        base = c * {CHUNK}")
        out.append(f"        for k in range(min({CHUNK}, n - base)):")
        out.append("            t = np.uint64(base + k)")
        out += ["            " + s for s in inner]
        return out
    if mode == "rows":
        out.append("    for i in range(lo, hi):")
        out.append("        ui = np.uint64(i)")
        out.append("        for j in range(C):")
        out.append("            uj = np.uint64(j)")
        out.append("            t = ui * np.uint64(C) + uj")
        out += ["            " + s for s in inner]
        return out
    # cols: blocks of columns across threads, rows inside; per column, RBLOCK rows are summed
    # in the value's dtype (an array the j loop updates 8 float32 lanes wide), then float64
    out.append("    for b in range(lo, hi):")
    out.append(f"        j0 = b * {COLBLOCK}")
    out.append(f"        j1 = min(j0 + {COLBLOCK}, C)")
    for k, kind, _, tn in accs:
        if kind == "cols":
            out.append(f"        acc{k} = np.zeros(j1 - j0, np.float64)")
            out.append(f"        p{k} = np.empty(j1 - j0, {_np_name(tn)})")
        else:
            out.append(f"        acc{k} = 0.0")
    out.append(f"        for i0 in range(0, R, {RBLOCK}):")
    for k, kind, _, tn in accs:
        if kind == "cols":
            out.append(f"            p{k}[:] = 0")
        else:
            out.append(f"            p{k} = {tn}(0.0)")
    out.append(f"            for i in range(i0, min(i0 + {RBLOCK}, R)):")
    out.append("                ui = np.uint64(i)")
    out.append("                for j in range(j0, j1):")
    out.append("                    uj = np.uint64(j)")
    out.append("                    t = ui * np.uint64(C) + uj")
    out += ["                    " + s for s in inner]
    for k, kind, v, _ in accs:
        if kind == "cols":
            out.append(f"                    p{k}[uj - np.uint64(j0)] += {v}")
        else:
            out.append(f"                    p{k} += {v}")
    for k, kind, _, _ in accs:
        if kind == "cols":
            out.append("            for j in range(j1 - j0):")
            out.append(f"                acc{k}[j] += p{k}[j]")
        else:
            out.append(f"            acc{k} += p{k}")
    for k, kind, _, _ in accs:
        if kind == "cols":
            out.append("        for j in range(j0, j1):")
            out.append(f"            r{k}[j] = acc{k}[j - j0]")
        else:
            out.append(f"        r{k}[b] = acc{k}")
    return out


def _np_name(tname: str) -> str:
    return {"f32": "np.float32", "f64": "np.float64"}.get(tname, tname)
