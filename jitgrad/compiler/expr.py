"""An op's scalar expression (``OpDef.expr``) rewritten for one kernel.

``op.expr`` is written once, over the op's input and parameter names (``"g * (1.0 - y * y)"``,
``"pow_scalar(a, exponent)"``). For a kernel, :func:`rewrite` maps the names to the kernel's
locals, types every numeric literal in the compute dtype (``f32(1.0)``: float32 math never
widens), calls the dtype's kernel math directly (``tanh`` -> ``tanh_f32``: no generic overload
for Numba to resolve) and, where parameters are literals (fused kernels of a plan), folds
constant arithmetic and ``pow_scalar`` with a literal exponent (``x ** 2`` -> ``x * x``), so
Numba never compiles the general ``pow`` or ``erf`` a kernel does not use. Folding computes in
the literal's own precision exactly as the kernel would at run time, so a folded kernel gives
the bits of an unfolded one (eager kernels take parameters as arguments).
"""

from __future__ import annotations

import ast
import functools

import numpy as np

from ..kernels.mathtable import DTYPE_SUFFIXES, EXPR_NAMES, FUNCTIONS
from ..trace.ir import dtype_name

__all__ = ["rewrite", "literal", "check_expr"]

_NP_TYPES = {"f32": np.float32, "f64": np.float64}
_BINOPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply,
           ast.Div: np.true_divide}
_CMPOPS = {ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
           ast.Gt: np.greater, ast.GtE: np.greater_equal}


def literal(value, dtype) -> str:
    """``value`` as a typed literal of ``dtype`` (``f32(0.5)``, ``f64(np.inf)``)."""
    tag = DTYPE_SUFFIXES[np.dtype(dtype).name]
    v = float(value)
    if v != v:
        return f"{tag}(np.nan)"
    if v in (float("inf"), float("-inf")):
        return f"{tag}({'-' if v < 0 else ''}np.inf)"
    return f"{tag}({v!r})"


def check_expr(expr: str, names) -> None:
    """Raise ValueError unless ``expr`` only calls the kernel-math table's functions (and
    ``abs``) and only reads ``names`` (an op's inputs and params)."""
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and
                    (node.func.id in EXPR_NAMES or node.func.id == "abs")):
                raise ValueError(f"unknown function in kernel expression: {ast.unparse(node)}")
        elif isinstance(node, ast.Name) and node.id not in names and node.id not in (
                EXPR_NAMES | {"abs"}):
            raise ValueError(f"unknown name {node.id!r} in kernel expression {expr!r}")


def rewrite(expr: str, refs: dict, dtype, fold: bool) -> str:
    """``expr`` over the kernel's names: ``refs`` maps each input/param name to a local name,
    an argument name or a literal's source; computed in ``dtype`` (float32/float64).

    A pure function of its strings, so it is memoised: a retrace (a new shape) rewrites the
    same equations over the same canonical locals again."""
    return _rewrite(expr, tuple(refs.items()), DTYPE_SUFFIXES[dtype_name(dtype)], fold)


@functools.lru_cache(maxsize=8192)
def _rewrite(expr: str, refs: tuple, tag: str, fold: bool) -> str:
    tree = ast.parse(expr, mode="eval")
    tree = _Names(dict(refs), tag).visit(tree)
    if fold:
        tree = _Fold(tag).visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree).body)


class _Names(ast.NodeTransformer):
    """Maps names to the kernel's, types literals, picks the dtype's math functions."""

    def __init__(self, refs: dict, tag: str):
        self.refs = refs
        self.tag = tag

    def visit_Name(self, node):
        ref = self.refs.get(node.id)
        if ref is None:
            return node
        if not ref.isidentifier():  # an inlined literal: f32(2.0)
            return ast.copy_location(ast.parse(ref, mode="eval").body, node)
        return ast.copy_location(ast.Name(id=ref, ctx=node.ctx), node)

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
            node.func = ast.Name(id=f"{node.func.id}_{self.tag}", ctx=ast.Load())
        return node

    def visit_Constant(self, node):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return ast.copy_location(ast.Call(
                func=ast.Name(id=self.tag, ctx=ast.Load()),
                args=[ast.Constant(float(node.value))], keywords=[]), node)
        return node


class _Fold(ast.NodeTransformer):
    """Constant folding over typed literals, in the literal's own precision, and
    ``pow_scalar`` with a literal exponent specialised as ``kernels.scalar.pow_scalar``
    branches at run time (x*x, sqrt, 1/x...)."""

    def __init__(self, tag: str):
        self.tag = tag

    @staticmethod
    def _value(node):
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

    @staticmethod
    def _literal(v, like: ast.AST) -> ast.AST:
        if isinstance(v, (bool, np.bool_)):
            return ast.copy_location(ast.Constant(bool(v)), like)
        return ast.copy_location(ast.parse(literal(v, v.dtype), mode="eval").body, like)

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
        t = self.tag
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
