"""What a function's bytecode reads from and writes to outside state: access chains.

A *chain* is a root (a global name, a closure variable, an argument) followed by attribute
loads and constant subscripts, as the bytecode spells them: ``h.w``, ``scale[0]``,
``cfg["lr"]``, ``self.mode``, ``random.randint``. :func:`analyze` finds every chain of a code
object once (cached per code object) and classifies it:

* ``read``: its value flows into the computation (guarded: ``guards.AccessGuard``);
* ``write``: the chain's object is mutated (``obj.attr = v``, ``obj[k] = v``, ``del``,
  augmented assignment, or a mutating method such as ``append``/``update``);
* every chain may also be *called*: the observer checks its value for calls that cannot be
  traced faithfully (``random``, ``time``, I/O).

Plus the statements that always touch outside state: ``global`` and (in the compiled
function itself) ``nonlocal`` assignments. Lines are kept for messages.

The analysis is static and conservative: a chain in a branch the call does not take is still
guarded (a retrace at worst, never a stale result).
"""

from __future__ import annotations

import dis
import sys
from dataclasses import dataclass

__all__ = ["Chain", "CodeAccess", "analyze", "MUTATING_METHODS"]

#: methods that mutate a builtin container (or deque / set / a queue) in place
MUTATING_METHODS = frozenset({
    "append", "extend", "insert", "pop", "popitem", "remove", "clear", "update",
    "setdefault", "add", "discard", "sort", "reverse", "appendleft", "extendleft",
    "popleft", "rotate", "put", "put_nowait", "__setitem__", "__delitem__", "write",
    "writelines", "intersection_update", "difference_update", "symmetric_difference_update",
})

_ROOTS = {"LOAD_GLOBAL": "global", "LOAD_DEREF": "deref", "LOAD_CLASSDEREF": "deref",
          "LOAD_FAST": "fast", "LOAD_NAME": "global"}
_ATTR_OPS = ("LOAD_ATTR", "LOAD_METHOD")


@dataclass(frozen=True)
class Chain:
    """``root`` (kind, name) and ``steps`` (``("attr", name)`` / ``("item", const)``);
    ``write`` says how the chain's object is mutated (None for a read)."""

    kind: str
    name: str
    steps: tuple
    line: int
    write: str | None = None

    def text(self) -> str:
        out = self.name
        for k, s in self.steps:
            out += f".{s}" if k == "attr" else f"[{s!r}]"
        return out


@dataclass(frozen=True)
class CodeAccess:
    """The chains of one code object and its statements writing outside state."""

    chains: tuple
    global_writes: tuple   # (name, line) of ``global`` assignments / deletions
    nonlocal_writes: tuple  # (name, line) of assignments to free variables
    arg_names: frozenset
    #: local names bound by ``import`` statements: (name, module, whole package?, attribute)
    imports: tuple = ()


_CACHE: dict = {}


def analyze(code) -> CodeAccess:
    """The :class:`CodeAccess` of ``code`` (cached)."""
    got = _CACHE.get(code)
    if got is None:
        got = _CACHE[code] = _analyze(code)
    return got


def _hashable(v) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _analyze(code) -> CodeAccess:
    ins = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
    n = len(ins)
    lines = []
    line = code.co_firstlineno
    for i in ins:
        if i.starts_line is not None:
            line = i.starts_line
        lines.append(line)
    chains: list = []
    ends: dict = {}  # index of a chain's last instruction -> position in chains
    gwrites, nlwrites = [], []
    i = 0
    while i < n:
        op = ins[i]
        kind = _ROOTS.get(op.opname)
        if kind is None:
            if op.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                gwrites.append((op.argval, lines[i]))
            elif op.opname in ("STORE_DEREF", "DELETE_DEREF") and op.argval in code.co_freevars:
                nlwrites.append((op.argval, lines[i]))
            i += 1
            continue
        steps: list = []
        j = i + 1
        while j < n:
            nxt = ins[j]
            if nxt.opname in _ATTR_OPS:
                steps.append(("attr", nxt.argval))
                j += 1
                continue
            if (nxt.opname == "LOAD_CONST" and j + 1 < n and ins[j + 1].opname == "BINARY_SUBSCR"
                    and _hashable(nxt.argval)):
                steps.append(("item", nxt.argval))
                j += 2
                continue
            break
        if steps and steps[-1][0] == "attr" and steps[-1][1] in MUTATING_METHODS and \
                ins[j - 1].opname in _ATTR_OPS:  # obj.append(...): the owner is mutated
            chains.append(Chain(kind, op.argval, tuple(steps[:-1]), lines[i],
                                f"calls .{steps[-1][1]}()"))
        ends[j - 1] = len(chains)
        chains.append(Chain(kind, op.argval, tuple(steps), lines[i]))
        i = j
    for k, op in enumerate(ins):  # obj.a = v, obj[k] = v, del ..., augmented assignments
        depth = _STORE_OBJECT_DEPTH.get(op.opname)
        if depth is None:
            continue
        src = _producer(ins, k, depth)
        if src is not None and src in ends:
            c = chains[ends[src]]
            if op.opname == "STORE_ATTR" and k >= 2 and ins[k - 1].opname == "SWAP" and \
                    ins[k - 2].opname == "BINARY_OP" and ins[k - 2].argrepr.endswith("="):
                # obj.a += v: the attribute's own in-place operator, then a store of its
                # result (the same object for a tensor): a chain to the attribute itself
                chains.append(Chain(c.kind, c.name, (*c.steps, ("attr", op.argval)), c.line,
                                    f"augments attribute {op.argval!r}"))
                continue
            what = (f"sets attribute {op.argval!r}" if "ATTR" in op.opname else "sets an item")
            chains.append(Chain(c.kind, c.name, c.steps, c.line, what))
    nargs = code.co_argcount + code.co_kwonlyargcount
    nargs += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    return CodeAccess(tuple(dict.fromkeys(chains)), tuple(gwrites), tuple(nlwrites),
                      frozenset(code.co_varnames[:nargs]), _import_bindings(ins))


_STORES = ("STORE_FAST", "STORE_NAME", "STORE_DEREF")


def _import_bindings(ins: list) -> tuple:
    """``(name, module, package, attribute)`` for each local name an ``import`` statement
    binds: ``import numpy as np`` -> ("np", "numpy", True, None) (``package``: the name is
    bound to the top-level package, as ``IMPORT_NAME`` without a from-list returns);
    ``from random import random as r`` -> ("r", "random", False, "random")."""
    out = []
    for k, op in enumerate(ins):
        if op.opname != "IMPORT_NAME":
            continue
        fromlist = ins[k - 1].argval if k and ins[k - 1].opname == "LOAD_CONST" else None
        package = fromlist is None
        attr = None
        for nxt in ins[k + 1:]:
            if nxt.opname == "IMPORT_FROM":
                attr = nxt.argval
            elif nxt.opname in _STORES:
                out.append((nxt.argval, op.argval, package, attr))
                if attr is None:
                    break
            else:
                break
    return tuple(out)


#: stack position (0 = top) of the object a store / delete mutates
_STORE_OBJECT_DEPTH = {"STORE_ATTR": 0, "DELETE_ATTR": 0, "STORE_SUBSCR": 1,
                       "DELETE_SUBSCR": 1}
_NO_STACK = ("NOP", "PRECALL", "KW_NAMES", "RESUME", "EXTENDED_ARG")


def _pops_pushes(op) -> tuple | None:
    """``(items popped, items pushed)`` of the instructions that build the operands of a
    store (None for anything else: the object is then not found)."""
    name, arg = op.opname, op.arg or 0
    if name == "LOAD_GLOBAL":
        return (0, 2) if arg & 1 else (0, 1)
    if name == "LOAD_METHOD":
        return 1, 2
    if name == "LOAD_ATTR":
        return (1, 2) if sys.version_info >= (3, 12) and arg & 1 else (1, 1)
    if name.startswith("LOAD_") or name == "PUSH_NULL":
        return 0, 1
    if name in ("BINARY_OP", "BINARY_SUBSCR", "COMPARE_OP", "CONTAINS_OP", "IS_OP"):
        return 2, 1
    if name.startswith("UNARY_") or name in ("GET_ITER", "FORMAT_VALUE"):
        return 1, 1
    if name in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_SLICE", "BUILD_STRING"):
        return arg, 1
    if name == "BUILD_MAP":
        return 2 * arg, 1
    if name == "CALL":
        return arg + 2, 1
    if name in _NO_STACK:
        return 0, 0
    return None


def _producer(ins: list, k: int, depth: int) -> int | None:
    """Index of the instruction that pushed the stack item ``depth`` below the top just
    before instruction ``k`` (following ``COPY``/``SWAP``), or None if not found."""
    j = k - 1
    while j >= 0:
        op = ins[j]
        if op.opname == "COPY":
            if depth == 0:
                depth = op.arg - 1  # the copy of the item op.arg - 1 below it
            else:
                depth -= 1
            j -= 1
            continue
        if op.opname == "SWAP":
            if depth == 0:
                depth = op.arg - 1
            elif depth == op.arg - 1:
                depth = 0
            j -= 1
            continue
        pp = _pops_pushes(op)
        if pp is None:
            return None
        pops, pushes = pp
        if depth < pushes:
            return j
        depth += pops - pushes
        j -= 1
    return None
