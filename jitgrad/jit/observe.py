"""Watching a traced call: which outside state user code read, and what cannot be traced.

While :class:`~jitgrad.jit.function.CompiledFunction` traces a call, an :class:`Observer`
(``sys.settrace``, ``call`` events only) sees every Python frame the call enters. For frames
of user code (anything but jitgrad itself, its dependencies -- NumPy, Numba, llvmlite, CuPy,
mpi4py -- and the standard library; installed packages are user code, except where the
import system or the garbage collector runs them) it evaluates the frame's access chains
(``access.py``) as the frame starts:

* a chain whose value is a call that cannot be traced faithfully (Python's ``random``,
  NumPy's global random functions, ``time``, ``print``/``input``/``open``) or a write to
  outside state (an attribute or item set on a non-tensor object, a mutating method such as
  ``list.append``, a ``global``/``nonlocal`` assignment) is a *graph break*: the tracer stops
  before that frame runs a single line, the call finishes eagerly (or, under
  ``fullgraph=True``, raises), so the side effect happens exactly as in eager mode;
* a chain that is read becomes a guard (``guards.AccessGuard``): rooted at a global of the
  frame's module, or -- in the compiled function's own frame -- at a closure variable or an
  argument. A later call re-reads each chain and compares it with the value seen here.

Only ``call`` events are traced (no line or opcode events): the cost is one Python call per
frame entered while tracing, nothing at all on compiled calls.
"""

from __future__ import annotations

import builtins
import gc
import importlib.util
import inspect
import os
import random
import sys
import sysconfig
import types

import numpy as np

from ..tensor import Tensor
from ..trace.numbers import TracedFloat
from ..trace.state import STATE as _TRACE
from .access import Chain, analyze
from .guards import RAISES, closure_relevant, default_value, is_stateful, value_state

__all__ = ["Observer", "untraceable_reason"]

#: arguments the key holds (a dynamic float: its kind, the value read at every call)
_PLAIN_ARGUMENTS = (int, float, bool, str, bytes, TracedFloat)


def _library_dirs() -> tuple:
    """(the directories of jitgrad and its dependencies -- NumPy, Numba, llvmlite,
    numba-cuda, CuPy, mpi4py --; the standard library's; the installed packages', which sit
    inside the standard library's in a venv or a system Python but are a user's models and
    configs: observed)."""
    import jitgrad
    import jitgrad.kernels as jk

    packages = {os.path.dirname(os.path.abspath(jitgrad.__file__))}
    packages.update(os.path.abspath(p) for p in jk.__path__)
    packages.add(os.path.dirname(os.path.abspath(np.__file__)))
    for mod in ("numba", "llvmlite", "numba_cuda", "cupy", "cupy_backends", "mpi4py"):
        try:  # (located, not imported: jitgrad imports them lazily)
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            spec = None
        for p in (spec.submodule_search_locations or ()) if spec is not None else ():
            packages.add(os.path.abspath(p))
    paths = sysconfig.get_paths()
    stdlib = {os.path.abspath(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)}
    installed = {os.path.abspath(paths[k]) for k in ("purelib", "platlib") if paths.get(k)}
    installed.update(os.path.abspath(p) for p in sys.path
                     if p and os.path.basename(p) in ("site-packages", "dist-packages"))
    return tuple(tuple(d + os.sep for d in s) for s in (packages, stdlib, installed))


def _library_or_installed(path: str):
    """False for user code, True for library code, ``INSTALLED`` for an installed
    package's (observed, except where the import system runs it: a finder on
    ``sys.meta_path``, such as pytest's or an editable install's)."""
    packages, stdlib, installed = _LIB_DIRS
    if path.startswith(packages):
        return True
    if path.startswith(installed):
        return INSTALLED
    return path.startswith(stdlib)


INSTALLED = "installed"


_LIB_DIRS: tuple | None = None
#: pseudo file names of code typed by a user (an interactive session)
_USER_PSEUDO_FILES = ("<stdin>", "<ipython-input", "<console>", "<input>")
#: methods whose first argument is an object the call is making (writes to it are not side
#: effects)
_CONSTRUCTORS = frozenset({"__init__", "__new__", "__post_init__", "__setattr__",
                           "__set_name__", "__init_subclass__"})
_user_code: dict = {}


def unwrap_library_wrappers(fn):
    """The function whose frame a call of ``fn`` runs the user's code in: ``fn`` itself, or,
    for a library's transparent decorator (``functools.wraps``: ``@jitgrad.no_grad()``,
    ``@torch.inference_mode()``), the function it wraps -- its arguments are the call's."""
    for _ in range(16):
        inner = getattr(fn, "__wrapped__", None)
        code = getattr(fn, "__code__", None)
        if inner is None or code is None or _is_user_code(code) or not callable(inner):
            return fn
        fn = inner
    return fn


def _is_user_code(code):
    """True for user code, False for library code, ``INSTALLED`` for an installed
    package's code (user code unless the import system runs it)."""
    global _LIB_DIRS
    got = _user_code.get(code)
    if got is None:
        if _LIB_DIRS is None:
            _LIB_DIRS = _library_dirs()
        fn = code.co_filename
        if fn.startswith("<"):  # generated code (dataclass methods, jitgrad's own plans...)
            got = fn.startswith(_USER_PSEUDO_FILES)
        else:
            lib = _library_or_installed(os.path.abspath(fn))
            got = INSTALLED if lib is INSTALLED else not lib
        _user_code[code] = got
    return got


def _run_by_the_import_system(frame) -> bool:
    """Whether ``frame`` runs inside an import (a frame of ``importlib._bootstrap`` below
    it): a finder's or loader's caches are not the traced function's state."""
    f = frame.f_back
    while f is not None:
        if f.f_code.co_filename.startswith("<frozen importlib"):
            return True
        f = f.f_back
    return False


#: objects whose methods draw random numbers in Python (frozen by a trace)
_RANDOM_STATES = (random.Random, np.random.Generator, np.random.RandomState,
                  np.random.BitGenerator)
_UNTRACEABLE_MODULES = ("random", "_random", "time", "secrets", "uuid", "numpy.random")
_IO = {builtins.print: "print()", builtins.input: "input()", builtins.open: "open()",
       builtins.breakpoint: "breakpoint()"}
_CALLABLES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              types.BuiltinMethodType)


def untraceable_reason(v) -> str | None:
    """Why calling ``v`` inside a compiled function cannot be captured by a trace (its result
    or effect would be frozen at the first call), or None."""
    if not isinstance(v, _CALLABLES):
        return None
    try:
        io = _IO.get(v)
    except TypeError:  # unhashable
        io = None
    if io is not None:
        return f"calls {io} (a Python side effect)"
    owner = getattr(v, "__self__", None)
    if isinstance(owner, _RANDOM_STATES):
        return (f"calls {type(owner).__module__}.{type(owner).__name__}."
                f"{getattr(v, '__name__', '?')} (random numbers drawn in Python)")
    mod = getattr(v, "__module__", None) or ""
    if mod in _UNTRACEABLE_MODULES or mod.startswith("numpy.random"):
        kind = "the clock" if mod == "time" else "random numbers drawn in Python"
        return f"calls {mod}.{getattr(v, '__name__', '?')} ({kind})"
    if v is os.urandom:
        return "calls os.urandom (random bytes)"
    return None


_MISSING = object()


def _imported(bindings: tuple) -> dict:
    """``{local name: object}`` for a code's ``import`` bindings (``access._import_bindings``)
    whose module is imported already or imports now (the frame is about to import it)."""
    import importlib

    out = {}
    for name, module, package, attr in bindings:
        try:
            mod = importlib.import_module(module)
            base = sys.modules[module.partition(".")[0]] if package else mod
            out[name] = base if attr is None else getattr(base, attr)
        except Exception:  # noqa: BLE001 - the frame's own import raises it, as eager
            continue
    return out


def _root_value(frame, chain, args: frozenset):
    if chain.kind == "global":
        v = frame.f_globals.get(chain.name, _MISSING)
        if v is _MISSING:
            v = frame.f_builtins.get(chain.name, _MISSING)
        return v
    if chain.kind == "fast" and chain.name not in args:
        return _MISSING  # a local the frame computes itself
    return frame.f_locals.get(chain.name, _MISSING)


def _keeps_state(f) -> bool:
    """Whether function ``f`` holds values a call reads: closure cells or defaults."""
    return bool(f.__closure__ or f.__defaults__ or f.__kwdefaults__)


_COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})


def _in_caller(code, frame) -> list:
    """The functions with ``code`` among the local variables of ``frame``'s caller (plain
    functions and bound methods' functions)."""
    caller = frame.f_back if frame is not None else None
    if caller is None:
        return []
    found = []
    for v in caller.f_locals.values():
        f = v.__func__ if type(v) is types.MethodType else v
        if type(f) is types.FunctionType and f.__code__ is code and not any(
                g is f for g in found):
            found.append(f)
    return found


def _method_of(code, frame) -> list | None:
    """``[function]`` when ``frame`` runs a method of its first argument's class (the
    function found under ``code``'s name in that class has ``code``), else None."""
    if frame is None or not code.co_argcount:
        return None
    this = frame.f_locals.get(code.co_varnames[0], _MISSING)
    if this is _MISSING:
        return None
    for klass in type(this).__mro__:
        attr = klass.__dict__.get(code.co_name)
        if attr is None:
            continue
        func = getattr(attr, "__func__", attr)  # staticmethod / classmethod: the function
        if isinstance(func, types.FunctionType) and func.__code__ is code:
            return [func]
        return None
    return None


def _walk(value, steps) -> tuple:
    """``(value, k)``: ``value`` after the first ``k`` steps of a chain, stopping after the
    first tensor, module or optimizer on the way (their state is guarded as a whole: a
    module's tree, a tensor's identity) or where a step raises (``_MISSING``: a branch this
    call does not take)."""
    if is_stateful(value):
        return value, 0
    for k, (kind, s) in enumerate(steps):
        try:
            value = getattr(value, s) if kind == "attr" else value[s]
        except Exception:  # noqa: BLE001
            return _MISSING, k + 1
        if is_stateful(value):
            return value, k + 1
    return value, len(steps)


def _follow(value, steps):
    """``value`` after every step of a chain (``_MISSING`` where a step raises)."""
    for kind, s in steps:
        try:
            value = getattr(value, s) if kind == "attr" else value[s]
        except Exception:  # noqa: BLE001
            return _MISSING
    return value


_NOT_HELD = (int, float, bool, str, bytes, complex, tuple, frozenset, np.ndarray, np.generic,
             type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
             types.MethodType)


def _plain_step(obj, kind: str, name) -> tuple:
    """``(ok, value, from_class)`` of one chain step without running code: an item of a
    dict / list / tuple, an attribute from the instance's ``__dict__``, a ``__slots__``
    member, a module's submodule / parameter / buffer, or a plain class attribute (not a
    property or other descriptor: those run code a guard should not run at every call)."""
    if kind != "attr":
        if isinstance(obj, (dict, list, tuple)):
            try:
                return True, obj[name], False
            except Exception:  # noqa: BLE001
                return False, None, False
        return False, None, False
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict) and name in d:
        return True, d[name], False
    for table in ("_modules", "_parameters", "_buffers"):
        t = d.get(table) if isinstance(d, dict) else None
        if isinstance(t, dict) and name in t:
            return True, t[name], False
    try:
        raw = inspect.getattr_static(obj, name)
    except AttributeError:
        return False, None, False
    if type(raw).__name__ == "member_descriptor":  # a __slots__ member
        try:
            return True, getattr(obj, name), False
        except AttributeError:
            return False, None, False
    if hasattr(type(raw), "__get__") or isinstance(raw, (staticmethod, classmethod)):
        return False, None, False  # a method, property or other descriptor
    return True, raw, True


def _argument_leaf(root, steps) -> bool:
    """Whether ``steps`` from argument ``root`` go through the containers ``jitgrad.compile``
    flattens into its key (dicts, lists, tuples; namedtuple fields) to a tensor or to a
    container of only tensors, numbers, strings and such containers: all of it at positions
    the key's structure fixes, so the chain needs no guard of its own (guarding a tensor in
    it by identity traced every call of ``step(batch)`` with a fresh batch dict)."""
    if not steps:
        return isinstance(root, (dict, list, tuple)) and _flattened_whole(root, 0)
    v = root
    for kind, s in steps:
        if kind != "attr" and isinstance(v, (dict, list, tuple)):
            try:
                v = v[s]
            except Exception:  # noqa: BLE001
                return False
        elif kind == "attr" and isinstance(v, tuple) and s in getattr(v, "_fields", ()):
            v = getattr(v, s)
        else:
            return False
    return isinstance(v, Tensor) or (isinstance(v, (dict, list, tuple))
                                     and _flattened_whole(v, 0))


def _flattened_whole(v, depth: int) -> bool:
    if isinstance(v, (Tensor, int, float, bool, str, bytes)) or v is None:
        return True
    if depth > 8 or not isinstance(v, (dict, list, tuple)):
        return False
    items = v.values() if isinstance(v, dict) else v
    return len(items) <= 256 and all(_flattened_whole(i, depth + 1) for i in items)


def _outside_mutable(v) -> bool:
    """An object whose mutation is a Python side effect the trace cannot replay (tensors
    are traced; numbers and strings are immutable)."""
    if v is None or isinstance(v, (Tensor, int, float, complex, str, bytes, bool, tuple,
                                   frozenset, np.ndarray, np.generic, type) + _CALLABLES):
        return False
    return True


def _user_method(owner, write: str) -> bool:
    """Whether ``write`` (``"calls .update()"``: a method whose name mutates builtin
    containers) calls a Python method of ``owner``'s class (a timm-style ``ModelEma.update``):
    its own frame is observed, so what it does is judged there, not by its name."""
    if not write.startswith("calls ."):
        return False
    method = getattr(type(owner), write[7:].split("(", 1)[0], None)
    return isinstance(method, types.FunctionType)


def _nested_in(tracer, target) -> bool:
    """Whether ``tracer`` runs inside ``target``'s trace (``vmap``'s trace of one element
    in a compiled function: the function's code is still the compiled call's)."""
    tr = getattr(tracer, "outer", None)
    while tr is not None:
        if tr is target:
            return True
        tr = getattr(tr, "outer", None)
    return False


class Observer:
    """Installed around one traced call (a context manager); see the module docstring.

    ``reads``: ``(root, steps, value)`` per distinct chain read, ``root`` being
    ``("global", globals_dict, name)``, ``("cell", cell)`` or ``("arg", position | name)``.
    """

    def __init__(self, tracer, fn) -> None:
        self.tracer = tracer
        self.fn = fn
        if isinstance(fn, types.FunctionType):
            fn = unwrap_library_wrappers(fn)
        target = getattr(type(fn), "forward", None) if not isinstance(
            fn, (types.FunctionType, types.MethodType)) else None
        self.top_code = getattr(target or fn, "__code__", None)
        if isinstance(fn, types.MethodType):
            self.top_code = fn.__func__.__code__
        self.top_func = target or (fn.__func__ if isinstance(fn, types.MethodType) else fn)
        # the object bound to the first parameter of the traced code: the compiled module
        # (guarded as a whole by ClosureGuard) or a bound method's object (guarded here)
        self.module_self = fn if target is not None else getattr(fn, "__self__", None)
        self.self_guarded = target is not None
        call = None if isinstance(fn, type) else next(
            (vars(c)["__call__"] for c in type(fn).__mro__ if "__call__" in vars(c)), None)
        if self.top_code is None and isinstance(call, types.FunctionType):
            # an object with a ``__call__`` of its own: as its bound method (its attributes
            # read by the call are guarded to their end)
            self.top_code, self.top_func, self.module_self = call.__code__, call, fn
        self.reads: list = []
        self._seen: set = set()
        # id -> (holder, steps, object): objects a guard reaches by identity (the compiled
        # module and its submodules, objects read through guarded chains), so an inner
        # frame's chain from one of them can be guarded to its end (``_deep_read``)
        self._holders: dict = {}
        if self.module_self is not None:
            self._remember(self.module_self, ("const", self.module_self), ())
        self._funcs: dict = {}  # code -> functions with that code (inner frames' cells)
        self._top_done = False
        self._old = None
        self._in_gc = False

    def __enter__(self) -> Observer:
        global _LIB_DIRS
        if _LIB_DIRS is None:  # (found before tracing: it asks the import system)
            _LIB_DIRS = _library_dirs()
        # code the garbage collector runs (gc callbacks, finalizers) is not the traced
        # function's: flagged from the first "start" callback to the last "stop" one
        self._in_gc = False
        gc.callbacks.insert(0, self._gc_started)
        gc.callbacks.append(self._gc_stopped)
        self._old = sys.gettrace()
        sys.settrace(self._on_call)
        return self

    def __exit__(self, *exc) -> None:
        sys.settrace(self._old)
        for cb in (self._gc_started, self._gc_stopped):
            try:
                gc.callbacks.remove(cb)
            except ValueError:
                pass

    def _gc_started(self, phase, info) -> None:
        if phase == "start":
            self._in_gc = True

    def _gc_stopped(self, phase, info) -> None:
        if phase == "stop":
            self._in_gc = False

    # ----------------------------------------------------------------------- events
    def _on_call(self, frame, event, arg):
        tr = _TRACE.tracer
        if tr is not self.tracer and not _nested_in(tr, self.tracer):
            return None
        code = frame.f_code
        user = _is_user_code(code)
        if not user or self._in_gc or (user is INSTALLED and _run_by_the_import_system(frame)):
            return None
        top = (not self._top_done and code is self.top_code)
        if top:
            self._top_done = True
        self._visit(frame, code, top)
        return None

    def _visit(self, frame, code, top: bool) -> None:
        acc = analyze(code)
        where = f"{code.co_filename}:"
        if not self.tracer.calls_type and any(
                ch.kind == "global" and ch.name == "type" for ch in acc.chains):
            # ``type(lr) is float``: a dynamic float (trace/numbers.py) answers TracedFloat
            # there, where eager code sees float (the trace is redone with plain floats)
            self.tracer.calls_type = True
        for name, line in acc.global_writes:
            return self._break(f"{where}{line}", f"assigns the global {name!r}")
        if top:
            for name, line in acc.nonlocal_writes:
                return self._break(f"{where}{line}", f"assigns the nonlocal {name!r}")
        imported = _imported(acc.imports) if acc.imports else {}
        for ch in acc.chains:
            if ch.kind == "fast" and ch.name in imported:
                # a module (or a name from one) the code imports itself: what it reads
                # through it is checked as through a global (``import random as r;
                # r.random()`` draws in Python; ``import cfg; cfg.lr`` is outside state)
                self._imported_chain(frame, code, ch, imported[ch.name])
                continue
            root = _root_value(frame, ch, acc.arg_names)
            if root is _MISSING or type(root) is TracedFloat:
                continue  # (a dynamic float: the plan reads it, or a use specialised it)
            if ch.write is None and ch.steps:
                self._deep_read(ch, root)
            value, cut = _walk(root, ch.steps)
            func = value.__func__ if type(value) is types.MethodType else value
            if type(func) is types.FunctionType:  # a function this code may call: the
                known = self._funcs.setdefault(func.__code__, [])  # candidates for its
                if not any(f is func for f in known):  # frame's cells and defaults
                    known.append(func)
            if ch.write is not None:
                if code.co_name in _CONSTRUCTORS and ch.kind == "fast" and code.co_argcount \
                        and ch.name == code.co_varnames[0]:
                    continue  # self.x = ... in a constructor
                if isinstance(value, types.ModuleType) and ch.write.startswith("calls ."):
                    continue  # jitgrad.add(...), torch.update(...): a function, no mutation
                if ch.write.startswith("augments"):
                    owner = _follow(root, ch.steps[:-1])
                    if owner is _MISSING or isinstance(
                            getattr(owner, ch.steps[-1][1], None), Tensor):
                        continue  # self.count += 1 on a tensor: in place, the same object
                    # anything else: a store into the owner, as obj.a = v
                    if _outside_mutable(owner) and id(owner) not in self.tracer.made_here:
                        held = Chain(ch.kind, ch.name, ch.steps[:-1], ch.line).text()
                        return self._break(f"{where}{ch.line}",
                                           f"sets attribute {ch.steps[-1][1]!r} on {held} "
                                           f"(a {type(owner).__name__} that outlives the call)")
                    continue
                if value is not _MISSING and cut == len(ch.steps) and _outside_mutable(value) \
                        and id(value) not in self.tracer.made_here \
                        and not _user_method(value, ch.write):
                    return self._break(f"{where}{ch.line}",
                                       f"{ch.write} on {ch.text()} (a {type(value).__name__} "
                                       "that outlives the call)")
                continue
            why = untraceable_reason(value) if cut == len(ch.steps) else None
            if why is not None:
                return self._break(f"{where}{ch.line}", f"{ch.text()}: {why}")
            if isinstance(root, types.ModuleType) and isinstance(
                    value, (types.ModuleType, type) + _CALLABLES):
                continue  # np.float32, jitgrad.log...: code, not state (never rebound)
            if top and ch.kind == "fast" and not ch.steps and (
                    root is None or isinstance(root, _PLAIN_ARGUMENTS)):
                # a plain argument: the key holds a passed value; a default one (not in the
                # key) is guarded as the function's default (rebinding it retraces)
                self._guard_default(ch, root)
                continue
            if top and ch.kind == "fast" and _argument_leaf(root, ch.steps[:cut]):
                continue  # batch["x"], batch: a flattened argument's part the key holds
            if cut == 0 and (isinstance(root, Tensor) or (
                    top and ch.kind == "fast" and isinstance(root, np.ndarray))):
                # tensor and NumPy arguments, captured tensors: key / tracer guards; a
                # default one is guarded as the function's default (rebinding it retraces)
                if top and ch.kind == "fast":
                    self._guard_default(ch, root)
                continue
            self._record(frame, ch, top, ch.steps[:cut], value)

    def _guard_default(self, ch, root) -> None:
        """Guard the compiled function's default for argument ``ch.name`` when the call
        used it (``root`` is that default): the key does not hold it. A passed argument is
        the key's (guarding the default then compared it with the passed value, so every
        call of ``f(x, mask=None)`` given a mask traced again)."""
        d = default_value(self.top_func, ch.name, _MISSING)
        if d is not _MISSING and d is root:
            self._add(("default", self.top_func, ch.name), ch, (), root)

    def _imported_chain(self, frame, code, ch, root) -> None:
        value, cut = _walk(root, ch.steps)
        why = untraceable_reason(value) if cut == len(ch.steps) else None
        if why is not None:
            return self._break(f"{code.co_filename}:{ch.line}", f"{ch.text()}: {why}")
        if ch.write is not None or cut == 0 or isinstance(
                value, (types.ModuleType, type) + _CALLABLES):
            return None  # code, not state (a module's mutation: its own chains say so)
        self._add(("const", root), ch, ch.steps[:cut], value)
        return None

    def _remember(self, value, holder, steps: tuple) -> None:
        """Note that a guard reaches ``value`` as ``holder`` + ``steps``; a module and its
        submodules as themselves (``("const", m)``: a guarded module tree's state holds
        their identities, so a chain read from one of them starts at it: no walk down
        the tree at every call)."""
        if value is None or isinstance(value, _NOT_HELD) or is_stateful(value) and not (
                isinstance(getattr(value, "_modules", None), dict)):
            return
        if isinstance(getattr(value, "_modules", None), dict) and hasattr(value,
                                                                       "modules"):
            try:
                subs = list(value.modules())
            except Exception:  # noqa: BLE001 - a module-like object
                subs = [value]
            for sub in subs:
                self._holders.setdefault(id(sub), (("const", sub), (), sub))
        else:
            self._holders.setdefault(id(value), (holder, steps, value))

    def _deep_read(self, ch, root) -> None:
        """A read chain from an object a guard reaches by identity (``self`` of the compiled
        module or of a submodule, an object an outer chain read), guarded to its end where
        the state compared of that object would miss it: two or more steps (a config
        object's attribute, a nested list), or a class attribute read through a module
        instance (``self.scale`` set on the class). Only plain attribute and item reads
        (no properties) are followed; tensors end the walk (their identity is guarded)."""
        known = self._holders.get(id(root))
        if known is None or known[2] is not root:
            return
        holder, base, _ = known
        value = root
        class_attr = False
        for k, (kind, s) in enumerate(ch.steps):
            ok, value, from_class = _plain_step(value, kind, s)
            if not ok or isinstance(value, Tensor) or hasattr(value, "param_groups"):
                return
            class_attr = class_attr or (from_class and k == 0)
        if len(ch.steps) >= 2 or class_attr:
            self._add(holder, ch, base + tuple(ch.steps), value)

    def _record(self, frame, ch, top: bool, steps: tuple, value) -> None:
        if ch.kind == "global" and top and not steps:
            self._remember(value, ("global", frame.f_globals, ch.name), ())
        if top and not steps and ch.kind in ("global", "deref") and closure_relevant(value):
            # the compiled function's own global / cell: ClosureGuard compares it (a
            # module's tree by identity: its submodules are remembered as themselves)
            self._remember(value, ("const", value), ())
            return
        if ch.kind == "global":
            g = frame.f_globals
            holder = ("global", g, ch.name) if ch.name in g else ("builtin", frame.f_builtins,
                                                                  ch.name)
        elif not top:
            if ch.kind == "fast":
                # an argument of an inner frame: what its caller passed is covered through
                # the caller; a default value (``def train(x, model=model)``) is guarded as
                # the called function's default
                for func in self._inner_defaults(frame, ch.name):
                    self._add(("default", func, ch.name), ch, steps, value)
                return
            if ch.kind != "deref":
                return
            # a closure cell of a function the compiled one calls (``lambda x: train(x)``
            # reads ``train``, whose cells hold the model and optimizer): guarded by its cell
            for cell in self._inner_cells(frame, ch.name):
                self._add(("cell", cell), ch, steps, value)
            return
        elif ch.kind == "deref":
            func = self.top_func
            try:
                idx = func.__code__.co_freevars.index(ch.name)
                holder = ("cell", func.__closure__[idx])
            except (ValueError, AttributeError, TypeError, IndexError):
                return  # a cell variable of the frame itself: computed by the call
        else:  # an argument of the compiled function (self of a compiled module: fixed)
            code = frame.f_code
            names = code.co_varnames[:code.co_argcount]
            kwonly = code.co_varnames[code.co_argcount:code.co_argcount +
                                      code.co_kwonlyargcount]
            if ch.name in names:
                pos = names.index(ch.name)
            elif ch.name in kwonly:
                pos = -1  # keyword-only: read by name
            else:
                return self._record_packed(code, ch, steps, value)
            # read at each call from the call's arguments, else the function's default
            if self.module_self is not None:
                if pos == 0:
                    holder = ("const", self.module_self)
                else:
                    holder = ("arg", pos - 1 if pos > 0 else -1, ch.name, self.top_func)
            else:
                holder = ("arg", pos, ch.name, self.top_func)
        if holder[0] == "const" and not steps and self.self_guarded:
            return  # the compiled module itself: guarded as a whole (guards.ClosureGuard)
        self._remember(value, holder, steps)
        self._add(holder, ch, steps, value)

    def _record_packed(self, code, ch, steps: tuple, value) -> None:
        """A chain from the compiled function's ``*args`` or ``**kwargs`` (a decorator's
        wrapper passing them on: ``fn(*args, **kwargs)``): ``args[i]...`` / ``kwargs[k]...``
        is guarded as the call's positional argument ``i`` or keyword ``k``; the whole
        tuple or dict, passed on, as each of its entries that the key does not hold (what
        the called function reads of them is covered through them, as for any argument)."""
        flags = code.co_flags
        at = code.co_argcount + code.co_kwonlyargcount
        star = code.co_varnames[at] if flags & inspect.CO_VARARGS else None
        double = code.co_varnames[at + (star is not None)] \
            if flags & inspect.CO_VARKEYWORDS else None
        start = code.co_argcount - (self.module_self is not None)
        if ch.name == star:
            if steps and steps[0][0] == "item" and type(steps[0][1]) is int \
                    and steps[0][1] >= 0:
                parts = [(steps[0][1], steps[1:], value)]
            elif not steps and isinstance(value, tuple):
                parts = [(i, (), v) for i, v in enumerate(value)]
            else:
                return
            for i, rest, v in parts:
                if rest or not _argument_leaf(v, ()) and not isinstance(v, Tensor):
                    self._guard_packed(("arg", start + i, None, self.top_func), ch, rest, v)
        elif ch.name == double:
            if steps and steps[0][0] == "item" and type(steps[0][1]) is str:
                parts = [(steps[0][1], steps[1:], value)]
            elif not steps and isinstance(value, dict):
                parts = [(k, (), v) for k, v in value.items()]
            else:
                return
            for k, rest, v in parts:
                if rest or not _argument_leaf(v, ()) and not isinstance(v, Tensor):
                    self._guard_packed(("arg", -1, k, self.top_func), ch, rest, v)

    def _guard_packed(self, holder, ch, steps: tuple, value) -> None:
        if not steps and (value is None or isinstance(value, _PLAIN_ARGUMENTS)):
            return  # a plain number or string: the key holds it
        self._remember(value, holder, steps)
        self._add(holder, ch, steps, value)

    def _inner_cells(self, frame, name: str) -> list:
        """The cells behind free variable ``name`` of an inner frame: those of the functions
        with the frame's code whose cell holds the value the frame sees (frames do not name
        their function: the candidates are the functions the callers' chains read, else
        every function with that code; all are guarded, so none can go stale)."""
        code = frame.f_code
        if code.co_name in _COMPREHENSIONS and frame.f_back is not None:
            # a comprehension's function is made afresh by each run of the frame around
            # it, whose cell it reads: that frame's own variable (computed by the call) or
            # a cell of that frame's function
            outer = frame.f_back
            if name not in outer.f_code.co_freevars:
                return []
            if outer.f_code is self.top_code:
                top = self.top_func
                return [top.__closure__[top.__code__.co_freevars.index(name)]]
            return self._inner_cells(outer, name)
        try:
            idx = code.co_freevars.index(name)
        except ValueError:
            return []  # a cell variable of the frame itself: computed by the call
        value = frame.f_locals.get(name, _MISSING)
        cells = []
        for f in self._functions_of(code, frame):
            cell = f.__closure__[idx]
            try:
                if cell.cell_contents is value:
                    cells.append(cell)
            except ValueError:  # an empty cell
                continue
        return cells

    def _inner_defaults(self, frame, name: str) -> list:
        """The functions running an inner frame's code whose default for argument ``name`` is
        the value the frame sees (the candidates: :meth:`_functions_of`)."""
        code = frame.f_code
        if name not in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
            return []  # a local variable: no default
        value = frame.f_locals.get(name, _MISSING)
        return [f for f in self._functions_of(code, frame)
                if default_value(f, name, _MISSING) is value]

    def _functions_of(self, code, frame=None) -> list:
        """The functions with ``code`` and cells or defaults: among those the callers' chains
        read; else those the calling frame holds in its local variables (``fn = table[k];
        fn(x)``: the chain was read before ``fn`` was bound); else, for a method's frame, the
        function its ``self``'s class has under the code's name (``Module.__call__`` calls
        ``forward``: no user chain reads it); else (called some other way) every such
        function (``gc.get_referrers``: its time grows with the heap, ~10 ms a call at 150k
        objects, seconds per trace in a large process)."""
        if code.co_name in _COMPREHENSIONS:
            return []  # made afresh by each run of the enclosing frame: nothing to guard
        funcs = self._funcs.get(code)
        if funcs is None:
            funcs = _in_caller(code, frame) or _method_of(code, frame)
            if funcs is None:
                funcs = [f for f in gc.get_referrers(code)
                         if isinstance(f, types.FunctionType) and f.__code__ is code]
            self._funcs[code] = funcs
        return [f for f in funcs if _keeps_state(f)]

    def _add(self, holder, ch, steps: tuple, value) -> None:
        key = (holder[0], id(holder[1]), holder[2] if len(holder) > 2 else None, steps)
        if key in self._seen:
            return
        self._seen.add(key)
        text = Chain(ch.kind, ch.name, steps, ch.line).text()
        # the state of the value this call read (an argument's is the caller's value, not
        # readable from the holder without the call's arguments)
        expected = RAISES if value is _MISSING else value_state(value)
        self.reads.append((holder, steps, text, expected))

    def _break(self, where: str, what: str) -> None:
        self.tracer.graph_break(what, where)
