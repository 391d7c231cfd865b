"""One builder for the Python source jitgrad generates at run time.

Call paths, straight-line plans, kernel callers and kernel modules are all generated Python.
Every generated *function* is made here, so each gets:

* a unique name (``run_17``) and a unique pseudo file name (``<jitgrad:run_17>``);
* its own globals dict (the values it refers to, given by the caller);
* a :mod:`linecache` entry, so tracebacks and debuggers show the generated line (removed
  again when the function is garbage-collected);
* a dump on stdout under ``JITGRAD_LOGS=code``.

Generated kernel *modules* are real files (Numba's disk cache needs one); they are written by
:mod:`jitgrad.compiler.cache` and dumped by :func:`log_source` likewise (by plans as they are
built, by eager ops when a kernel is first loaded).
"""

from __future__ import annotations

import itertools
import linecache
import re
import types
import weakref
from collections.abc import Callable, Sequence

from .. import config

__all__ = ["build_function", "log_source"]

_ids = itertools.count(1)


def log_source(title: str, source: str) -> None:
    """Print generated source under ``JITGRAD_LOGS=code``."""
    if "code" in config.log_topics():
        print(f"[jitgrad:code] {title}\n{source}", flush=True)


def build_function(name: str, params: Sequence[str], body: Sequence[str],
                   namespace: dict | None = None) -> Callable:
    """``def <name>_<n>(*params): <body>`` compiled in ``namespace`` (a new dict if None).

    ``body`` holds the lines of the function body, unindented (nested blocks indented by four
    spaces relative to it); ``params`` are plain names (no defaults).
    """
    uid = f"{name}_{next(_ids)}"
    filename = f"<jitgrad:{uid}>"
    lines = [f"def {uid}({', '.join(params)}):"]
    lines += ["    " + line for line in body] or ["    pass"]
    source = "\n".join(lines) + "\n"
    ns = {} if namespace is None else namespace
    fn = types.FunctionType(_code_of(name, tuple(params), tuple(body), uid, filename), ns, uid)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    weakref.finalize(fn, linecache.cache.pop, filename, None)
    log_source(filename, source)
    return fn


_CODE: dict = {}
_CODE_MAX = 4096
#: integer literals of two digits or more: the ``id()`` keys a plan's environment uses, and
#: the sizes of a shape (not in names, floats, exponents)
_BIG_INT = re.compile(r"(?<![\w.])(?<![eE][-+])[1-9][0-9]+(?![\w.])")
_SENTINEL = 7 * 10 ** 27  # + k * _STRIDE: the k-th distinct big literal, while compiling
_STRIDE = 10 ** 12


def _code_of(name: str, params: tuple, body: tuple, uid: str, filename: str) -> types.CodeType:
    """The code object of ``def uid(*params): body``.

    Bytecode is compiled once per (name, params, body with its integer literals of two digits
    or more numbered in order): a retrace for a new shape generates the same callers and
    plans again, only with other ``id()`` keys and sizes. Each function gets the cached code
    with its own literals put back (a negated one too), its own name and file name (its
    traceback shows its own source). Where a literal is not a plain constant of the code (a
    digit run inside a string, arithmetic the compiler folded), the source is compiled as it
    is, uncached."""
    values: dict = {}
    plain = [True]

    def number(m: re.Match) -> str:
        plain[0] = plain[0] and _operand_alone(m.string, m.start(), m.end())
        return str(_SENTINEL + _STRIDE * values.setdefault(int(m.group()), len(values)))

    canonical = tuple(_BIG_INT.sub(number, line) for line in body)
    key = (name, params, canonical)
    code = _CODE.get(key) if plain[0] else None
    if code is None:
        code = _compiled(name, params, canonical) if plain[0] else None
        sentinels = {_SENTINEL + _STRIDE * k for k in range(len(values))}
        if code is None or not {abs(c) for c in _constants(code) if abs(c) >= _SENTINEL // 2} \
                <= sentinels or _in_strings(code):
            code, values = _compiled(name, params, body), {}  # (as written, not cached)
        else:
            if len(_CODE) >= _CODE_MAX:
                _CODE.clear()
            _CODE[key] = code
    table = {_SENTINEL + _STRIDE * k: v for v, k in values.items()}
    table.update([(-c, -v) for c, v in table.items()])
    renamed = {"co_name": uid, "co_filename": filename}
    if hasattr(code, "co_qualname"):
        renamed["co_qualname"] = uid
    return _rebuilt(code, filename, table).replace(**renamed)


_AROUND = frozenset("[](){},:=!")


def _operand_alone(line: str, i: int, j: int) -> bool:
    """Whether the literal at ``line[i:j]`` stands alone -- a key, an argument, an item, a
    value assigned or compared -- or negated, so the compiler folds no arithmetic with it
    (``id + 1``, ``n // 7``, ``n << 2`` are constants it would compute from the sentinel)."""
    k = j
    while k < len(line) and line[k] == " ":
        k += 1
    if k < len(line) and not (line[k] in _AROUND or line[k].isalpha()):
        return False  # (an operator after it; a keyword -- for, if, in -- is fine)
    k = i - 1
    while k >= 0 and line[k] == " ":
        k -= 1
    if k >= 0 and line[k] == "-":  # negated (folded to minus the sentinel: put back) unless
        k -= 1  # it is a binary minus
        while k >= 0 and line[k] == " ":
            k -= 1
    return k < 0 or line[k] in _AROUND or line[k].isalnum() or line[k] == "_"


def _compiled(name: str, params: tuple, body: tuple) -> types.CodeType:
    lines = [f"def {name}({', '.join(params)}):"]
    lines += ["    " + line for line in body] or ["    pass"]
    module = compile("\n".join(lines) + "\n", "<jitgrad>", "exec")
    return next(c for c in module.co_consts if isinstance(c, types.CodeType))


def _leaves(code: types.CodeType):
    """The constants of ``code``, of the code it nests and of the tuples, frozensets and
    slices among them."""
    stack = list(code.co_consts)
    while stack:
        c = stack.pop()
        if isinstance(c, types.CodeType):
            stack += c.co_consts
        elif isinstance(c, (tuple, frozenset)):
            stack += c
        elif isinstance(c, slice):
            stack += (c.start, c.stop, c.step)
        else:
            yield c


def _constants(code: types.CodeType) -> set:
    """The int constants of ``code`` (:func:`_leaves`)."""
    return {c for c in _leaves(code) if type(c) is int}


def _in_strings(code: types.CodeType) -> bool:
    """Whether a sentinel's digits ended up inside a string constant."""
    mark = str(_SENTINEL)[:4]
    return any(isinstance(c, (str, bytes)) and mark in str(c) for c in _leaves(code))


def _rebuilt(code: types.CodeType, filename: str, table: dict) -> types.CodeType:
    """``code`` and the code it nests (comprehensions, lambdas) with ``co_filename`` and the
    sentinel constants of ``table`` replaced by their literals."""
    return code.replace(co_filename=filename,
                        co_consts=tuple(_constant(c, filename, table) for c in code.co_consts))


def _constant(c, filename: str, table: dict):
    if isinstance(c, types.CodeType):
        return _rebuilt(c, filename, table)
    if type(c) is int:
        return table.get(c, c)
    if type(c) is tuple and table:
        return tuple(_constant(x, filename, table) for x in c)
    if type(c) is frozenset and table:
        return frozenset(_constant(x, filename, table) for x in c)
    if type(c) is slice and table:
        return slice(*(_constant(x, filename, table) for x in (c.start, c.stop, c.step)))
    return c
