"""What a compiled entry checks before it serves a call, besides its key.

* :func:`external_guards`: captured tensors keep their shape, dtype and requires_grad; leaves
  whose ``.grad`` the trace read keep its state (None, or shape and dtype);
* :class:`ClosureGuard`: what the function refers to that a trace bakes in (identities of
  tensors, modules' parameters, train/eval flags, hooks and plain attributes, optimizers'
  parameters, hyper-parameters and per-parameter state, plain numbers in the closure and in
  the globals the code names), read at every call and compared with the entry's snapshot;
* :class:`AccessGuard`: every access chain user code read while tracing (``observe.py``:
  ``h.w``, ``scale[0]``, a string global, a module passed as an argument...), re-read and
  compared by :func:`value_state`.

A failed check is a miss (the generic path retraces or finds another entry): never a stale
result.
"""

from __future__ import annotations

import dis
import functools
import hashlib
import os
import sys
import threading
import time
import types
import warnings
import weakref
from itertools import islice

import numpy as np

from .. import dtypes as _dtypes
from ..autograd.anomaly import MODE as _ANOMALY
from ..determinism import _FLAGS as _DETERMINISM
from ..devices import _DEFAULTS as _DEVICE_DEFAULTS
from ..nn.mutation import (
    EPOCH,
    OPTIM_EPOCH,
    OptimDict,
    OptimList,
    OptimState,
    TrackedDict,
    TrackedOrderedDict,
    TrackedSet,
)
from ..tensor import HOOK_EPOCH, Tensor, hooks_key

__all__ = ["ClosureGuard", "AccessGuard", "global_settings", "external_guards", "fast_guard_lines",
           "groups_written",
           "closure_names", "state_of",
           "value_state", "guarded_state", "is_stateful", "closure_relevant", "default_value",
           "RAISES"]


def external_guards(graph, tracer) -> list:
    """Checks of the call's flattened arguments ``flat`` (each returns a reason string on
    failure) for state read from outside the key: captured tensors' shape, dtype and
    requires_grad; the ``.grad`` state of every leaf whose gradient the trace read -- a
    captured leaf's, or the ``.grad`` of the tensor passed as that argument."""
    checks = []
    for v in graph.externals:
        src = v.source
        if src.kind == "tensor":
            t = src.obj
            shape, dtype, req, name = v.shape, v.dtype, t._requires_grad, src.describe()

            def chk(flat, t=t, shape=shape, dtype=dtype, req=req, name=name):
                if t._data.shape != shape or t._data.dtype != dtype:
                    return (f"captured tensor {name} changed shape/dtype "
                            f"{shape} -> {t._data.shape}")
                if t._requires_grad != req:
                    return f"captured tensor {name}: requires_grad changed"
                return None
            chk.spec = ("tensor", t, shape, np.dtype(dtype), req)  # for generated checks
            checks.append(chk)
    captured = [v.source.obj for v in graph.externals if v.source.kind == "tensor"]
    if captured:
        checks.append(_hooks_check(captured))
    for read, value in tracer.setting_reads.items():
        def chk(flat, read=read, value=value):
            now = read()
            return None if now == value else f"{read.__name__}() went from {value} to {now}"
        chk.spec = ("setting", read, value)
        checks.append(chk)
    for _, state, ref in tracer.grad_guards.values():
        if state == "any":
            continue

        def chk(flat, ref=ref, state=state):
            g = ref.tensor(flat)._grad
            now = None if g is None else (g._data.shape, g._data.dtype)
            if now != state:
                return f".grad of {ref.describe()} went from {state} to {now}"
            return None
        chk.spec = ("grad", ref, state)
        checks.append(chk)
    return checks


def _hooks_check(tensors: list):
    """The check that captured leaves still have the hooks the trace ran (a plan bakes in
    what they computed): read again only when some leaf's hooks changed since
    (``tensor.HOOK_EPOCH``), then the epoch it holds for is moved on."""
    keys = [hooks_key(t) for t in tensors]
    seen = [HOOK_EPOCH[0]]

    def chk(flat):
        epoch = HOOK_EPOCH[0]
        if epoch == seen[0]:
            return None
        for t, key in zip(tensors, keys):
            if hooks_key(t) != key:
                return "a hook of a captured tensor was registered or removed"
        seen[0] = epoch
        return None
    chk.spec = ("hooks", seen)
    return chk


def fast_guard_lines(checks: list, ns: dict, flat: str = "args") -> list | None:
    """:func:`external_guards`' checks as generated lines (over the call's tensors, the
    sequence named ``flat``) that ``return MISS`` when one fails (a compiled entry's hit
    path: no call per captured tensor); None if some check has no such form."""
    lines = []
    for j, chk in enumerate(checks):
        spec = getattr(chk, "spec", None)
        if spec is None:
            return None
        if spec[0] == "hooks":  # (a change: the slow path's check reads the hooks again)
            ns["HOOK_EPOCH"], ns[f"GH{j}"] = HOOK_EPOCH, spec[1]
            lines += [f"if HOOK_EPOCH[0] != GH{j}[0]:", "    return MISS"]
        elif spec[0] == "setting":
            _, read, value = spec
            ns[f"GR{j}"], ns[f"GV{j}"] = read, value
            lines += [f"if GR{j}() != GV{j}:", "    return MISS"]
        elif spec[0] == "tensor":
            _, t, shape, dtype, req = spec
            ns[f"GT{j}"], ns[f"GS{j}"], ns[f"GD{j}"] = t, shape, dtype
            lines += [f"d = GT{j}._data",
                      f"if d.shape != GS{j} or d.dtype != GD{j} or "
                      f"GT{j}._requires_grad != {bool(req)}:", "    return MISS"]
        else:
            _, ref, state = spec
            if ref.kind == "arg":
                leaf = f"{flat}[{ref.index}]"
            else:
                ns[f"GL{j}"] = ref.obj
                leaf = f"GL{j}"
            if state is None:
                lines += [f"if {leaf}._grad is not None:", "    return MISS"]
            else:
                ns[f"GS{j}"], ns[f"GD{j}"] = state
                lines += [f"g = {leaf}._grad",
                          f"if g is None or g._data.shape != GS{j} or g._data.dtype != GD{j}:",
                          "    return MISS"]
    return lines


def global_settings() -> tuple:
    """The process and thread settings a trace bakes in: the default dtype and device
    (factories and Python floats inside the function), deterministic algorithms and
    anomaly detection (code may branch on them). Part of every entry's closure state: a
    change retraces."""
    d = _DEVICE_DEFAULTS
    return (_dtypes._default_float, d.blocks[-1] if d.blocks else d.default,
            _DETERMINISM["mode"], _ANOMALY[0])


class ClosureGuard:
    """Reads, at every call, the state of what the function refers to that a trace bakes in:
    identities of tensors, of modules' parameters (and their ``training`` flag), of
    optimizers' parameters and their scalar hyper-parameters (``lr``...), and plain numbers
    in the closure and referenced globals. The slots to read are found at ``compile()`` and
    again before every trace (:meth:`refresh`)."""

    def __init__(self, fn) -> None:
        self.fn = fn
        self.module = fn if _is_module(fn) else None
        # a bound method (``compile(opt.step)``, ``compile(model.forward)``): the object it
        # is bound to, like the module of a compiled module -- library code's reads of it
        # (an optimizer's state, a layer's weight and mode) are not observed
        bound = getattr(fn, "__self__", None) if isinstance(fn, types.MethodType) else None
        if self.module is None and bound is not None and closure_relevant(bound):
            self.module = bound
        # a partial's keyword names: one given later (``p.keywords["scale"] = 9``) retraces
        self.keywords = fn.keywords if isinstance(fn, functools.partial) else None
        self._globals: dict | None = None  # the traced code's globals (set by _find_slots)
        self.slots: list = self._find_slots()
        # float globals and cells read afresh at every call (``trace/numbers.py``), and those
        # a trace needed as values (constants for good): keys ``(id(holder), name)``
        self.dynamic: set = set()
        self.static: set = set()

    def _find_slots(self) -> list:
        """What to read at every call: the closure's cells and the globals the code loads
        that hold a tensor, number, module or optimizer -- or nothing yet (an empty cell, a
        global not yet defined or None: a script's ``model`` made after the decorator runs),
        so a value given later is compared too; a ``functools.partial``'s bound arguments
        and keywords of those kinds. Found again before every trace (:meth:`refresh`)."""
        fn = self.fn
        slots: list = []
        if isinstance(fn, functools.partial):
            for v in fn.args:
                if closure_relevant(v):
                    slots.append((v, _CONST))
            for k, v in fn.keywords.items():
                if closure_relevant(v) or v is None:
                    slots.append((fn.keywords, k))
            fn = fn.func
        if isinstance(fn, types.FunctionType):  # (a library decorator's wrapper: the user's
            from .observe import unwrap_library_wrappers  # function is the traced frame)

            fn = unwrap_library_wrappers(fn)
        target = getattr(type(fn), "forward", fn) if self.module is fn else fn
        code = getattr(target, "__code__", None)
        if code is None and not isinstance(fn, type):  # an object with a __call__ of its
            target = next((vars(c)["__call__"] for c in type(fn).__mro__  # own (the
                           if "__call__" in vars(c)), None)  # observer's top frame too)
            code = getattr(target, "__code__", None)
        if code is None:
            return slots
        for cell in getattr(target, "__closure__", None) or ():
            if not _cell_ok(cell) or cell.cell_contents is None or \
                    closure_relevant(cell.cell_contents):
                slots.append((cell, None))
        g = getattr(target, "__globals__", {})
        self._globals = g
        builtins = g.get("__builtins__", {})
        builtins = builtins if isinstance(builtins, dict) else vars(builtins)
        for n in _global_loads(code):
            if n in g:
                if g[n] is None or closure_relevant(g[n]):
                    slots.append((g, n))
            elif n not in builtins:  # not defined yet
                slots.append((g, n))
        return slots

    def refresh(self) -> bool:
        """Find the slots again (before a trace: globals and cells defined since); whether
        they changed (then entries traced before no longer match :meth:`current`)."""
        slots = self._find_slots()
        if [(id(h), n) for h, n in slots] == [(id(h), n) for h, n in self.slots]:
            return False
        self.slots = slots
        return True

    def current(self) -> tuple:
        out = [global_settings()]
        if self.module is not None:
            out.append(state_of(self.module))
        for holder, name in self.slots:
            if name is None:
                obj = holder.cell_contents if _cell_ok(holder) else _EMPTY
            elif name is _CONST:
                obj = holder
            else:
                obj = holder.get(name, _EMPTY)
            if type(obj) is float and self.dynamic and (id(holder), name) in self.dynamic:
                out.append(DYNAMIC_FLOAT)  # read by the plan: any float matches
            else:
                out.append(state_of(obj))
        if self.keywords is not None:
            out.append(tuple(self.keywords))
        return tuple(out)

    def optimizer_groups(self) -> list:
        """``[(optimizer, its param_groups list, [(group, its items)...])]`` for the
        optimizers the function refers to (closure, globals, the bound object): what
        :func:`groups_written` compares after a trace."""
        out = []
        objs = [self.module] if self.module is not None else []
        for holder, name in self.slots:
            if name is None:
                objs.append(holder.cell_contents if _cell_ok(holder) else None)
            elif name is _CONST:
                objs.append(holder)
            else:
                objs.append(holder.get(name))
        seen = set()
        for o in objs:
            groups = getattr(o, "param_groups", None) if o is not None else None
            if isinstance(groups, list) and id(o) not in seen:
                seen.add(id(o))
                out.append((o, groups, list(groups),
                            [(g, list(g.items())) for g in groups if isinstance(g, dict)]))
        return out

    # ------------------------------------------------------------ dynamic floats
    def swappable(self, holder, name) -> bool:
        """Whether slot ``(holder, name)`` is a global of the traced code or a cell of its
        closure: a float there can be read afresh at every call (``trace/numbers.py``)."""
        return (name is None and _cell_ok(holder)) or (
            holder is self._globals and type(name) is str)

    def changed_floats(self, old: tuple, new: tuple) -> list | None:
        """The slots whose float changed between closure states ``old`` and ``new`` (from
        :meth:`current`) when that is all that changed, each swappable and not made a
        constant by a trace; None otherwise."""
        at = 1 + (self.module is not None)
        end = len(new) - (self.keywords is not None)
        if len(old) != len(new) or old[:at] != new[:at] or old[end:] != new[end:] or \
                end - at != len(self.slots):
            return None
        changed = []
        for (holder, name), a, b in zip(self.slots, old[at:end], new[at:end]):
            if a == b:
                continue
            if not (type(a) is tuple and type(b) is tuple and len(a) == 2 == len(b) and
                    a[0] == "n" == b[0] and type(a[1]) is float and type(b[1]) is float):
                return None
            if not self.swappable(holder, name) or (id(holder), name) in self.static:
                return None
            changed.append((holder, name))
        return changed or None

    def float_slots(self) -> list:
        """The swappable slots holding a float, not made constants by a trace."""
        out = []
        for holder, name in self.slots:
            if not self.swappable(holder, name) or (id(holder), name) in self.static:
                continue
            obj = holder.cell_contents if name is None else holder.get(name, _EMPTY)
            if type(obj) is float:
                out.append((holder, name))
        return out

    def fast_checks(self, expected: tuple, ns: dict) -> list:
        """Source lines that ``return MISS`` unless ``current() == expected`` (an entry's
        call path, ``call_path.py``): tensors and plain numbers are compared inline, other
        objects through ``state_of``. Reading an emptied cell raises ValueError."""
        ns["STATE_OF"] = state_of
        # global_settings(), inline: about 40 ns of a cache hit instead of 130
        ns.update({"S_DT": _dtypes, "S_DEV": _DEVICE_DEFAULTS, "S_DET": _DETERMINISM,
                   "S_AG": _ANOMALY, "S_E": expected[0]})
        lines = ["if (S_DT._default_float is not S_E[0] or S_DET['mode'] is not S_E[2]"
                 " or S_AG[0] is not S_E[3] or (S_DEV.blocks[-1] if S_DEV.blocks"
                 " else S_DEV.default) != S_E[1]):", "    return MISS"]
        expected = expected[1:]
        reads = []
        if self.module is not None:
            ns["CMOD"] = self.module
            reads.append("CMOD")
        ns["EMPTY"] = _EMPTY
        for j, (holder, name) in enumerate(self.slots):
            ns[f"CH{j}"] = holder
            reads.append(f"CH{j}.cell_contents" if name is None else f"CH{j}" if name is _CONST
                         else f"CH{j}.get({name!r}, EMPTY)")
        if self.keywords is not None:
            ns["PKW"], ns["E_PKW"] = self.keywords, expected[-1]
            lines += ["if tuple(PKW) != E_PKW:", "    return MISS"]
        for j, (read, exp) in enumerate(zip(reads, expected)):
            lines.append(f"o = {read}")
            if exp is DYNAMIC_FLOAT:  # any float: the plan reads it
                lines += ["if type(o) is not float:", "    return MISS"]
                continue
            plain = (type(exp) is tuple and exp[0] == "n" and type(exp[1]) in (int, float, bool)
                     and exp[1] == exp[1])
            _miss_unless(lines, ns, f"C{j}", exp, "STATE_OF",
                         ident=exp if type(exp) is int else None, tensor=True,
                         plain=(type(exp[1]), exp[1]) if plain else None)
        return lines


def groups_written(snapshot: list) -> str | None:
    """What a traced call changed in the param groups of an optimizer that keeps them in
    plain lists and dicts (``snapshot`` from :meth:`ClosureGuard.optimizer_groups` before
    it): a hyper-parameter set through a local (``for g in opt.param_groups: g["lr"] =
    lr``), which the observer, reading names as a frame starts, does not see, and a plan
    would not repeat. (jitgrad's optimizers keep them in ``nn.mutation``'s containers,
    whose writes from user code are graph breaks as they happen.) None when nothing
    changed. A dynamic float left in any group is given back its plain value."""
    from ..nn.mutation import OptimDict, OptimList
    from ..trace.numbers import TracedFloat

    what = None
    for opt, groups, old_groups, old_items in snapshot:
        tracked = isinstance(groups, OptimList)
        if not tracked and (len(groups) != len(old_groups) or
                            any(a is not b for a, b in zip(groups, old_groups))):
            what = f"changes {type(opt).__name__}.param_groups"
        for g, items in old_items:
            for k, v in list(g.items()):
                if type(v) is TracedFloat:
                    g[k] = v.value
            if isinstance(g, OptimDict) or what is not None:
                continue
            if len(g) != len(items) or any(k not in g or g[k] is not v for k, v in items):
                key = next((k for k, v in items if k not in g or g[k] is not v), None)
                what = (f"sets {type(opt).__name__}.param_groups[...][{key!r}]"
                        if key is not None else
                        f"adds an entry to a {type(opt).__name__} param group")
    return what


def _miss_unless(lines: list, ns: dict, key: str, expected, state_fn: str, *, ident=None,
                 plain=None, tensor: bool = False) -> None:
    """Append the generated check ``return MISS`` unless ``o`` matches: by identity
    (``ident``: an id), by type and value (``plain``: ``(type, value)``), else by comparing
    ``state_fn(o)`` with ``expected``."""
    if ident is not None:
        ns[f"I{key}"] = ident
        cond = f"id(o) != I{key}" + (" or not isinstance(o, Tensor)" if tensor else "")
    elif plain is not None:
        ns[f"T{key}"], ns[f"V{key}"] = plain
        cond = f"type(o) is not T{key} or o != V{key}"
    else:
        ns[f"E{key}"] = expected
        cond = f"{state_fn}(o) != E{key}"
    lines += [f"if {cond}:", "    return MISS"]


#: a ClosureGuard slot holding its object itself (a partial's bound argument)
_CONST = object()
#: the state of a float global or cell read afresh at every call (any float matches)
DYNAMIC_FLOAT = ("dynamic", float)
#: what an empty cell or an undefined global reads as (its own state: one that is given a
#: value later no longer matches)
_EMPTY = object()


def _global_loads(code) -> list:
    """The global names ``code`` loads (``LOAD_GLOBAL``; attribute names are not globals)."""
    names = []
    for ins in dis.get_instructions(code):
        if ins.opname == "LOAD_GLOBAL" and ins.argval not in names:
            names.append(ins.argval)
    return names


def _is_module(o) -> bool:
    return hasattr(o, "parameters") and callable(getattr(o, "parameters", None)) and \
        not isinstance(o, type) and not isinstance(o, Tensor)


def closure_relevant(o) -> bool:
    """What :class:`ClosureGuard` compares when the compiled function's closure or the
    globals it names hold it: tensors, plain numbers, modules, optimizers."""
    return (isinstance(o, (Tensor, int, float, bool)) or _is_module(o)
            or hasattr(o, "param_groups"))


class _InProgress(threading.local):
    ids: set

    def __init__(self) -> None:
        self.ids = set()


_IN_PROGRESS_LOCAL = _InProgress()


def state_of(o):
    if isinstance(o, Tensor):
        return id(o)
    if isinstance(o, (int, float, bool)) or o is None:
        return ("n", o)
    if isinstance(getattr(o, "_modules", None), dict) and \
            isinstance(getattr(o, "_parameters", None), dict):
        busy = _IN_PROGRESS_LOCAL.ids
        if id(o) in busy:  # a module reached again through its own attributes
            return ("m", id(o))
        busy.add(id(o))
        try:
            return ("m", _module_state_cached(o))
        finally:
            busy.discard(id(o))
    if _is_module(o):
        try:
            return ("m", tuple(id(p) for p in o.parameters()),
                    tuple(getattr(m, "training", None) for m in _modules(o)))
        except TypeError:
            return ("m", id(o))
    if hasattr(o, "param_groups"):
        return _optimizer_state_cached(o)
    return ("x", id(o))


def _step_hooks(o) -> tuple:
    """The step hooks ``o.step()`` runs (its own and the global ones), by identity: a hook
    registered or removed after a trace is a miss (it runs in the trace, and a plan would
    not run it)."""
    from ..optim.optimizer import _GLOBAL_STEP_POST_HOOKS, _GLOBAL_STEP_PRE_HOOKS

    d = getattr(o, "__dict__", {})
    return tuple(id(h) for hooks in (_GLOBAL_STEP_PRE_HOOKS, d.get("_optimizer_step_pre_hooks"),
                                     d.get("_optimizer_step_post_hooks"),
                                     _GLOBAL_STEP_POST_HOOKS) if hooks for h in hooks.values())


def _optimizer_state(o) -> tuple:
    traced = getattr(o, "traced_options", None)
    dynamic = ("params", *(traced() if traced is not None else ()))  # read at every call
    state = getattr(o, "state", {})
    return ("o", _step_hooks(o), tuple(
        (id(grp),  # traced hyper-parameters are read from this very dict at every call
         tuple(id(p) for p in grp["params"]),
         # (a tuple holding mutable things, by their contents: it is the one stored too)
         tuple((k, v if type(v) is not tuple or _frozen(v) else value_state(v, 1))
               for k, v in grp.items()
               if k not in dynamic and isinstance(v, (int, float, bool, tuple, type(None)))),
         tuple((k, grp[k] == 0) for k in getattr(o, "traced_zero_tests", ())
               if k in dynamic and type(grp.get(k)) in (int, float)),
         # per-parameter state (momentum buffers, Adam moments) is created by the first
         # step: a trace made before it exists must not serve calls after
         tuple(tuple((k, id(v)) for k, v in state[p].items()) if p in state else ()
               for p in grp["params"]))
        for grp in o.param_groups))


#: optimizer -> (OPTIM_EPOCH, its param_groups, its state, :func:`_optimizer_state`)
_OPTIMIZER_STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _optimizer_state_cached(o) -> tuple:
    """:func:`_optimizer_state` of ``o``, read again only when some optimizer changed since
    (``nn/mutation.OPTIM_EPOCH``: jitgrad's optimizers keep their groups and state in
    tracked containers); an optimizer holding anything the count cannot see (a plain list
    or dict put in, a tuple option with mutable contents) is read at every call. A GPT's
    AdamW: ~25-40 us a call -> ~0.6 us."""
    epoch = OPTIM_EPOCH[0]  # before the read: a change during it makes the next call re-read
    d = getattr(o, "__dict__", {})
    try:
        seen = _OPTIMIZER_STATES.get(o)
    except TypeError:  # unhashable
        return _optimizer_state(o)
    if seen is not None and seen[0] == epoch and d.get("param_groups") is seen[1] and \
            d.get("state") is seen[2]:
        return seen[3]
    state = _optimizer_state(o)
    groups, per_param = d.get("param_groups"), d.get("state")
    if type(groups) is OptimList and type(per_param) is OptimState and all(
            type(g) is OptimDict and type(g.get("params")) is OptimList
            and all(type(v) is not tuple or _frozen(v) for v in g.values())
            for g in groups) and all(type(v) is OptimDict for v in per_param.values()):
        _OPTIMIZER_STATES[o] = (epoch, groups, per_param, state)
    return state


_NUMBERS = (int, float, bool, tuple, type(None), str, bytes, complex)
#: hook dicts of a module: a hook registered (or removed) after a trace is a miss
_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
               "_backward_pre_hooks", "_forward_hooks_with_kwargs",
               "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")
#: hook dicts that do not affect a call (not compared; absent on modules pickled earlier)
_STATE_DICT_HOOKS = ("_state_dict_hooks", "_state_dict_pre_hooks",
                     "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")
#: member containers of a module whose changes bump the epoch when they are jitgrad's own
_TRACKED_MEMBERS = ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set",
                    *_HOOK_DICTS)
_TREE_DICTS = frozenset({"_parameters", "_buffers", "_modules", "_non_persistent_buffers_set",
                         "_compiled_call_impl", *_HOOK_DICTS, *_STATE_DICT_HOOKS})


#: root module -> (epoch, its state) of trees whose every change bumps the epoch
_TREE_STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _module_state_cached(root) -> tuple:
    """:func:`_module_state` of ``root``, walked again only when some module tree changed
    since it was last walked (``nn/mutation.py``); attributes whose contents can change
    without a rebinding (a config object, a list) are compared again at every call. Trees
    with member dicts that are not jitgrad's tracked ones are walked at every call."""
    epoch = EPOCH[0]  # before the walk: a change during it makes the next call re-read
    try:
        seen = _TREE_STATES.get(root)
    except TypeError:  # an unhashable module (a subclass defining __eq__)
        return _module_state(root)[0]
    if seen is not None and seen[0] == epoch and all(
            _attr_state(ref(), k) == vs for ref, k, vs in seen[2]):
        return seen[1]
    state, volatile = _module_state(root)
    if volatile is not None:
        _TREE_STATES[root] = (epoch, state, volatile)
    return state


_GONE = object()


def _attr_state(mod, k: str):
    """What ``_module_state`` compares of attribute ``k`` of ``mod`` (None: ``mod`` gone)."""
    return None if mod is None else value_state(mod.__dict__.get(k, _GONE), 1)


def _frozen(v) -> bool:
    """Whether guarding ``v`` (a module attribute) by its binding is enough: no change to
    what a guard compares of it can happen without rebinding the attribute."""
    t = type(v)
    if t in _PLAIN or isinstance(v, Tensor) or is_stateful(v):
        return True
    if t is tuple or t is frozenset:
        return all(_frozen(e) for e in v)
    return isinstance(v, (types.FunctionType, types.BuiltinFunctionType, type,
                          types.ModuleType)) and t is not types.MethodType


def _module_state(root) -> tuple[tuple, list | None]:
    """Identity, ``training`` flag and plain-number attributes of every submodule, identities
    of their parameters and buffers: one walk over jitgrad's ``Module`` dicts. Also the
    attributes a change of which may not bump the module epoch (``nn/mutation.py``) --
    ``(weakref to the module, name, state)`` of those not ``_frozen`` -- or None if some
    member dict is not a tracked one (then nothing of the walk can be reused)."""
    tracked = True
    volatile: list = []
    out: list = []
    seen: set = set()
    stack = [root]
    while stack:
        mod = stack.pop()
        if id(mod) in seen:
            continue
        seen.add(id(mod))
        out.append(id(mod))
        out.append(getattr(mod, "training", None))
        d = mod.__dict__
        if tracked and not (all(isinstance(d.get(k), _TRACKED_TYPES) for k in _TRACKED_MEMBERS)
                            and all(isinstance(d.get(k, _NO_HOOKS), _TRACKED_TYPES)
                                    for k in _STATE_DICT_HOOKS)):
            tracked = False
        for k, v in d.items():
            # plain attributes a forward reads (Dropout.p, a mode string, a config dict, a
            # tensor that is not a parameter) are baked into a trace
            tv = type(v)
            if tv in _NUMBERS:
                out.append((k, v))
                if tv is tuple and not _frozen(v):
                    volatile.append((weakref.ref(mod), k, value_state(v, 1)))
            elif is_stateful(v):  # a module or optimizer kept outside _modules: by identity
                out.append((k, id(v)))
            elif k not in _TREE_DICTS and tv is not types.MethodType:
                vs = value_state(v, 1)
                out.append((k, vs))
                if not _frozen(v):
                    volatile.append((weakref.ref(mod), k, vs))
        for name in _HOOK_DICTS:
            hooks = d.get(name)
            if hooks:
                out.append((name, tuple(hooks)))
        out.extend(id(p) for p in mod._parameters.values())
        out.extend(id(b) for b in getattr(mod, "_buffers", {}).values())
        stack.extend(c for c in reversed(mod._modules.values()) if c is not None)
    return tuple(out), (volatile if tracked else None)


_PLAIN = (int, float, bool, str, bytes, complex, type(None))
_TRACKED_TYPES = (TrackedDict, TrackedOrderedDict, TrackedSet)
_NO_HOOKS = TrackedDict()  # what an absent optional hook dict reads as
#: entries of a container (or attributes of an object) a guard compares
MAX_ENTRIES = 64


def is_stateful(v) -> bool:
    """Values guarded as a whole where an access chain reaches them: tensors (identity),
    modules (their tree: ``_module_state``), optimizers."""
    return isinstance(v, Tensor) or _is_module(v) or hasattr(v, "param_groups")


#: a NumPy array whose contents take at least this long to compare is named in a warning
SLOW_ARRAY_GUARD_S = 1e-3
_WARNED_ARRAYS: dict = {}  # id -> weak reference of the arrays warned about


def array_digest(a: np.ndarray) -> bytes:
    """A NumPy array's contents as a guard compares them (a 128-bit BLAKE2 digest). NumPy
    arrays have no version counter, so an array a compiled function reads (or an attribute
    of a module it uses) is hashed whole at every call; where that takes over
    :data:`SLOW_ARRAY_GUARD_S`, a warning (once per array) says so and what to do."""
    start = time.perf_counter()
    digest = hashlib.blake2b(np.ascontiguousarray(a).view(np.uint8).reshape(-1),
                             digest_size=16).digest()
    spent = time.perf_counter() - start
    if spent >= SLOW_ARRAY_GUARD_S:
        _warn_slow_array(a, spent)
    return digest


def _warn_slow_array(a: np.ndarray, spent: float) -> None:
    ref = _WARNED_ARRAYS.get(id(a))
    if ref is not None and ref() is a:
        return
    try:
        _WARNED_ARRAYS[id(a)] = weakref.ref(a)
    except TypeError:
        pass
    warnings.warn(
        f"jitgrad.compile: a guard compares the contents of a NumPy array of shape "
        f"{list(a.shape)} and dtype {a.dtype} ({a.nbytes / 2**20:.1f} MiB) at every call of a "
        f"compiled function ({spent * 1e3:.1f} ms each): the function reads it, or it is an "
        "attribute of a module or object the function uses. A tensor is compared by "
        "identity: make it one (a module buffer, or a tensor made once outside the "
        "function), or pass it as an argument", RuntimeWarning, stacklevel=_user_level())


def _user_level() -> int:
    """The ``stacklevel`` that names the first frame outside jitgrad (the user's call)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(here):
        frame, level = frame.f_back, level + 1
    return level


def value_state(v, depth: int = 2):
    """What a guard compares of a value Python code read while tracing: plain values by
    type and value, tensors and functions by identity, NumPy arrays by content, modules and
    optimizers by :func:`state_of`, containers and objects by their entries (``depth``
    levels, :data:`MAX_ENTRIES` each; deeper or further entries by identity and length)."""
    t = type(v)
    if t in _PLAIN:  # (a float by its bits: -0.0 is not 0.0 to x / v, every NaN one key)
        return (t, v.hex()) if t is float else (t, v)
    if isinstance(v, Tensor):
        return ("T", id(v))
    if isinstance(v, np.generic):
        return (t, v.item()) if v == v else (t, "nan")
    if isinstance(v, np.ndarray):
        return ("A", id(v), v.shape, v.dtype.str, array_digest(v))
    if isinstance(v, types.BuiltinFunctionType):  # also a bound method of a builtin object
        owner = v.__self__
        if owner is None or isinstance(owner, types.ModuleType):
            return ("F", id(v))
        return ("B", v.__name__, value_state(owner, depth))
    if isinstance(v, (types.FunctionType, type, types.ModuleType)):
        return ("F", id(v))
    if isinstance(v, types.MethodType):  # a bound method: its function and its object
        return ("M", id(v.__func__), value_state(v.__self__, depth))
    if is_stateful(v):
        return state_of(v)
    if getattr(v, "_jitgrad_guard_by_identity", False):  # a compiled function (its state
        return ("F", id(v))                              # is its own business)
    if depth <= 0:
        try:
            return ("X", t, id(v), len(v))
        except TypeError:
            return ("X", t, id(v))
    if t in (list, tuple) or isinstance(v, (list, tuple)):
        return (t, len(v), tuple(value_state(e, depth - 1) for e in v[:MAX_ENTRIES]),
                _tail(v[MAX_ENTRIES:]))
    if isinstance(v, dict):
        return (t, len(v), tuple((k, value_state(e, depth - 1))
                                 for k, e in islice(v.items(), MAX_ENTRIES)),
                _tail(islice(v.items(), MAX_ENTRIES, None)))
    if isinstance(v, (set, frozenset)):
        return (t, len(v), frozenset(e for e in islice(v, MAX_ENTRIES) if type(e) in _PLAIN))
    d = getattr(v, "__dict__", None)
    if isinstance(d, dict):
        return ("O", t, tuple((k, value_state(e, depth - 1))
                              for k, e in islice(d.items(), MAX_ENTRIES)))
    return ("X", t, id(v))


def _tail(entries) -> tuple:
    """The entries of a container beyond :data:`MAX_ENTRIES` (a dict's as ``(key, value)``
    pairs), compared whole: plain values by type and value, tuples of them entry by entry,
    anything else by identity (a list of 100 coefficients changed at entry 90 retraces)."""
    return tuple(_shallow(e) for e in entries)


def _shallow(e):
    t = type(e)
    if t is float:
        return (t, e.hex())
    if t in _PLAIN:
        return (t, e)
    if t is tuple:
        return tuple(_shallow(i) for i in e)
    return ("X", id(e))


RAISES = ("raises",)
_NO_DEFAULT = object()


def default_value(fn, name: str, missing=_NO_DEFAULT):
    """The current default of ``fn``'s argument ``name`` (``__defaults__`` or
    ``__kwdefaults__``); ``missing`` if it has none (KeyError if ``missing`` is not given)."""
    code = getattr(fn, "__code__", None)
    if code is not None:
        names = code.co_varnames[:code.co_argcount]
        if name in names:
            d = fn.__defaults__ or ()
            i = names.index(name) - (len(names) - len(d))
            if i >= 0:
                return d[i]
        kw = fn.__kwdefaults__ or {}
        if name in kw:
            return kw[name]
    if missing is _NO_DEFAULT:
        raise KeyError(name)
    return missing


def _read_root(holder, args: tuple, kwargs: dict):
    kind = holder[0]
    if kind in ("global", "builtin"):
        return holder[1][holder[2]]
    if kind == "cell":
        return holder[1].cell_contents
    if kind == "arg":  # ("arg", position or -1, name, function): passed, else its default
        pos, name = holder[1], holder[2]
        if 0 <= pos < len(args):
            return args[pos]
        if name in kwargs:
            return kwargs[name]
        return default_value(holder[3], name)
    if kind == "default":  # ("default", function, name): an inner function's default
        return default_value(holder[1], holder[2])
    return holder[1]  # "const"


def guarded_state(holder, steps: tuple, args: tuple, kwargs: dict):
    """:func:`value_state` of the value at ``holder`` + ``steps`` now (``("raises",)`` if
    reading it raises)."""
    try:
        v = _read_root(holder, args, kwargs)
        for kind, s in steps:
            v = getattr(v, s) if kind == "attr" else v[s]
        return value_state(v)
    except Exception:  # noqa: BLE001 - compared like any other state
        return RAISES


class AccessGuard:
    """The access chains a trace read (``observe.Observer.reads``): holds while each one's
    :func:`guarded_state` equals the state seen while tracing."""

    def __init__(self, reads: list) -> None:
        self.reads = reads

    def __bool__(self) -> bool:
        return bool(self.reads)

    def check(self, args: tuple = (), kwargs: dict | None = None) -> str | None:
        """None when every chain reads as traced, else which one changed, in words."""
        kw = kwargs or {}
        for holder, steps, text, expected in self.reads:
            if guarded_state(holder, steps, args, kw) != expected:
                return f"{text} changed since the trace"
        return None

    def changed_root(self, args: tuple = (), kwargs: dict | None = None):
        """``(text, root)`` of the first chain that no longer reads as traced -- ``root``
        the object it starts at now -- or None."""
        kw = kwargs or {}
        for holder, steps, text, expected in self.reads:
            if guarded_state(holder, steps, args, kw) != expected:
                try:
                    root = _read_root(holder, args, kw)
                except Exception:  # noqa: BLE001 - (the chain's start is gone)
                    root = None
                return text, root
        return None

    def without_changed(self, args: tuple = (), kwargs: dict | None = None) -> AccessGuard:
        """The chains that still read as traced (an eager entry for a call that changes
        what it reads keeps guarding the rest: those would fail at every call)."""
        kw = kwargs or {}
        return AccessGuard([r for r in self.reads
                            if guarded_state(r[0], r[1], args, kw) == r[3]])

    def fast_checks(self, ns: dict) -> list | None:
        """Source lines that ``return MISS`` unless every chain reads as traced, for an
        entry's generated cache-hit path (``call_path.py``): identities and plain values
        compared inline, anything else through :func:`value_state`. None if some chain
        starts at an argument (the fast path serves tensor arguments only)."""
        if self.needs_args():
            return None
        ns["VALUE_STATE"] = value_state
        lines = []
        for j, (holder, steps, _text, exp) in enumerate(self.reads):
            kind = holder[0]
            ns[f"AH{j}"] = holder[1]
            if kind in ("global", "builtin"):
                lines.append(f"o = AH{j}[{holder[2]!r}]")
            elif kind == "cell":
                lines.append(f"o = AH{j}.cell_contents")
            elif kind == "default":
                ns["DEFAULT_VALUE"] = default_value
                lines.append(f"o = DEFAULT_VALUE(AH{j}, {holder[2]!r})")
            else:
                lines.append(f"o = AH{j}")
            for k, (sk, sv) in enumerate(steps):
                if sk == "attr":  # (a ModuleList's child "0": not an identifier)
                    lines.append(f"o = o.{sv}" if str(sv).isidentifier() else
                                 f"o = getattr(o, {str(sv)!r})")
                else:
                    ns[f"AK{j}_{k}"] = sv
                    lines.append(f"o = o[AK{j}_{k}]")
            plain = type(exp[0]) is type and exp[0] in _PLAIN and exp[1] != "nan"
            if plain and exp[0] is float:  # (its state holds the bits: compare the value,
                value = float.fromhex(exp[1])  # a zero's sign and NaN by the state)
                plain = value != 0.0 and value == value
                exp_plain = (float, value)
            else:
                exp_plain = exp
            _miss_unless(lines, ns, f"A{j}", exp, "VALUE_STATE",
                         ident=exp[1] if exp[0] in ("F", "T") else None,
                         plain=exp_plain if plain else None)
        return lines

    def needs_args(self) -> bool:
        """Whether some chain starts at an argument (then the check needs the call's)."""
        return any(h[0] == "arg" for h, *_ in self.reads)


def _modules(m):
    mods = getattr(m, "modules", None)
    return list(mods()) if callable(mods) else [m]


def closure_names(fn) -> dict:
    """Readable names of the tensors a function refers to (closure, globals, module params),
    used to print captured tensors in the IR."""
    names: dict = {}
    target = fn
    if hasattr(fn, "named_parameters") and callable(fn.named_parameters):
        for n, p in fn.named_parameters():
            names[id(p)] = n
        target = getattr(type(fn), "forward", fn)
    code = getattr(target, "__code__", None)
    if code is None:
        return names
    pairs = list(zip(code.co_freevars, getattr(target, "__closure__", None) or ()))
    g = getattr(target, "__globals__", {})
    objs = [(n, c.cell_contents) for n, c in pairs if _cell_ok(c)]
    objs += [(n, g[n]) for n in code.co_names if n in g]
    optimizers = []
    for n, o in objs:
        if isinstance(o, Tensor):
            names.setdefault(id(o), n)
        elif hasattr(o, "named_parameters") and callable(getattr(o, "named_parameters", None)) \
                and not isinstance(o, type):
            try:
                for pn, p in o.named_parameters():
                    names.setdefault(id(p), f"{n}.{pn}")
            except TypeError:
                pass
        elif hasattr(o, "param_groups") and isinstance(getattr(o, "state", None), dict):
            optimizers.append((n, o))
    for n, o in optimizers:  # e.g. opt.state[model.0.weight].momentum_buffer
        for p, st in o.state.items():
            pname = names.get(id(p), "param")
            for k, v in st.items():
                if isinstance(v, Tensor):
                    names.setdefault(id(v), f"{n}.state[{pname}].{k}")
    return names


def _cell_ok(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
        return True
    except ValueError:
        return False
