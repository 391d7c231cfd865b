"""Source-level inlining: each public math function becomes one Numba function.

The implementations are written as small jitted helpers (``reduce``, ``scale``, Horner
polynomials...) that LLVM inlines into the caller. Numba, though, runs a whole compilation
pipeline (typing, lowering, an LLVM module, linking) for every helper and signature before
LLVM sees any of it: ``tanh`` alone was eight pipelines, a third of a second of each new
fused kernel's compile time. :func:`flatten` rewrites a function's Python source with every
call to another implementation replaced by that implementation's body (its locals and free
names renamed apart), so Numba types and lowers one function. The operations, their order
and their per-instruction flags are unchanged (the flattened function is compiled with the
same options as the helpers were), so results are bit-identical; a test compares them.

Helpers must be straight-line: one ``return`` as the last statement. Intrinsics (``fma``,
``select``...) and anything that is not an implementation dispatcher stay calls.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap

import numpy as np
from numba.core.dispatcher import Dispatcher

__all__ = ["generate_module", "source_of"]


def source_of(fn) -> str:
    """The Python source of a helper (``__jg_source__`` for functions built with ``exec``)."""
    src = getattr(fn, "__jg_source__", None)
    return src if src is not None else textwrap.dedent(inspect.getsource(fn))


def _function_def(fn) -> ast.FunctionDef:
    tree = ast.parse(source_of(fn))
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise TypeError(f"{fn.__name__}: expected a function definition")
    node.decorator_list = []
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # docstring
    node.body = body
    for k, stmt in enumerate(body):
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Return) and not (sub is stmt and k == len(body) - 1):
                raise TypeError(f"{fn.__name__}: only a final return can be inlined")
        if isinstance(stmt, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            raise TypeError(f"{fn.__name__}: nested definitions cannot be inlined")
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        raise TypeError(f"{fn.__name__}: must end with 'return <expr>'")
    return node


def _free_values(fn) -> dict:
    """Name -> value of every global and closure variable ``fn`` can see."""
    values = dict(fn.__globals__)
    if fn.__closure__:
        values.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))
    return values


def _locals(node: ast.FunctionDef) -> set:
    names = {a.arg for a in node.args.args}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
    return names


def _same(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, np.generic) and isinstance(b, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return False


class _Flattener:
    """Flattens functions into one module; ``names`` is the module's namespace of free values
    (shared, so a constant used by several functions is defined once)."""

    def __init__(self, inlinable, reserved: set) -> None:
        self.inlinable = inlinable
        self.names: dict = {}
        self.reserved = reserved  # the top-level functions' own locals
        self.counter = itertools.count()

    def global_name(self, name: str, value) -> str:
        """A namespace name bound to ``value`` (``name`` itself unless taken by another)."""
        candidate, k = name, 0
        while candidate in self.reserved or (
                candidate in self.names and not _same(self.names[candidate], value)):
            k += 1
            candidate = f"{name}_{k}"
        self.names[candidate] = value
        return candidate

    def body(self, fn, prefix: str, args: list | None) -> tuple[list, ast.expr]:
        """``fn``'s statements (renamed) and its return expression. ``args``: the caller's
        argument expressions (bound to the renamed parameters first), None at top level."""
        node = _function_def(fn)
        local = _locals(node)
        free = _free_values(fn)
        rename = {n: (prefix + n if prefix else n) for n in local}
        stmts: list = []
        if args is not None:
            params = [a.arg for a in node.args.args]
            if len(params) != len(args):
                raise TypeError(f"{fn.__name__}: called with {len(args)} arguments")
            for p, a in zip(params, args):
                stmts.append(ast.Assign(targets=[ast.Name(rename[p], ast.Store())], value=a))

        flattener = self

        class Rewrite(ast.NodeTransformer):
            def __init__(self):
                self.pre: list = []

            def visit_Name(self, n):
                if n.id in rename:
                    return ast.copy_location(ast.Name(rename[n.id], n.ctx), n)
                if n.id in free:
                    return ast.copy_location(
                        ast.Name(flattener.global_name(n.id, free[n.id]), n.ctx), n)
                return n

            def visit_Call(self, n):
                target = free.get(n.func.id) if isinstance(n.func, ast.Name) \
                    and n.func.id not in local else None
                if target is None or not flattener.inlinable(target):
                    return self.generic_visit(n)
                if n.keywords:
                    raise TypeError(f"{target.__name__}: keyword arguments cannot be inlined")
                call_args = [self.visit(a) for a in n.args]  # inner calls first
                inner = f"_{next(flattener.counter)}_"
                sub, ret = flattener.body(target.py_func, inner, call_args)
                self.pre.extend(sub)
                tmp = f"{inner}ret"
                self.pre.append(ast.Assign(targets=[ast.Name(tmp, ast.Store())], value=ret))
                return ast.copy_location(ast.Name(tmp, ast.Load()), n)

        for stmt in node.body:
            rw = Rewrite()
            new = rw.visit(stmt)
            stmts.extend(rw.pre)
            if isinstance(new, ast.Return):
                return stmts, new.value
            stmts.append(new)
        raise AssertionError("unreachable: _function_def checked the final return")

    def function(self, disp, name: str, doc: str) -> str:
        """Source of ``disp`` flattened, as ``def name(...)`` with docstring ``doc``."""
        node = _function_def(disp.py_func)
        stmts, ret = self.body(disp.py_func, "", None)
        node.name = name
        node.body = [ast.Expr(ast.Constant(doc))] + stmts + [ast.Return(ret)]
        return ast.unparse(ast.fix_missing_locations(node))


def _is_impl(value) -> bool:
    """Whether ``value`` is an implementation helper (compiled with ``IMPL_OPTIONS``)."""
    return isinstance(value, Dispatcher) and value.targetoptions.get("forceinline", False)


def _constant_source(name: str, value, intrinsics: dict) -> str:
    """A module-level definition of ``name`` = ``value`` (exact for floats)."""
    if isinstance(value, np.floating):
        tname = {np.float32: "np.float32", np.float64: "np.float64"}[type(value)]
        return f"{name} = {tname}(float.fromhex({float(value).hex()!r}))"
    if isinstance(value, np.integer):
        return f"{name} = np.{type(value).__name__}({int(value)})"
    if isinstance(value, bool | int):
        return f"{name} = {value!r}"
    if value is np.float32 or value is np.float64:
        return f"{name} = np.{value.__name__}"
    if intrinsics.get(name) is value:
        return ""  # imported
    raise TypeError(f"cannot write {name} = {value!r} into a generated math module")


def generate_module(fns: dict, suffix: str, title: str, docs: dict) -> str:
    """Source of a module defining ``{name}_{suffix}`` for every ``name -> dispatcher`` in
    ``fns``, each flattened into one function, with module-level constants."""
    from . import _llvm

    intrinsics = {k: v for k, v in vars(_llvm).items() if not k.startswith("_")}
    reserved = set()
    for disp in fns.values():
        reserved |= _locals(_function_def(disp.py_func))
    fl = _Flattener(_is_impl, reserved)
    bodies = [fl.function(d, f"{name}_{suffix}", docs[name]) for name, d in fns.items()]
    used_intrinsics = sorted(k for k, v in fl.names.items() if intrinsics.get(k) is v)
    consts = [_constant_source(k, v, intrinsics) for k, v in sorted(fl.names.items())]
    head = (f'"""{title}\n\nGENERATED by ``python -m jitgrad.kernels.vmath`` from the '
            f'helper implementations\n(``_exp.py``, ``_log.py``...) with every helper call '
            f'inlined in source (``_flatten.py``):\ndo not edit."""\n# ruff: noqa\n\n'
            f"import numpy as np\n\n"
            f"from ..cached import cached_njit\n"
            f"from ._common import IMPL_OPTIONS\n"
            f"from ._llvm import {', '.join(used_intrinsics)}\n\n")
    out = [head] + [c for c in consts if c] + [""]
    for b in bodies:
        out += ["", "@cached_njit(**IMPL_OPTIONS)", b, ""]
    return "\n".join(out).rstrip() + "\n"
