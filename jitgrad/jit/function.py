"""``jitgrad.compile``: trace a function per input signature, compile the graph, plug it into
eager autograd.

A call is keyed by its argument structure, shapes, dtypes, requires_grad mask and grad mode; an
entry also guards what the trace read from outside (``guards.py``). A miss traces the function
and compiles the graph into a plan; then the plan runs the call (``CompiledFunction._trace``).

If outputs require grad (and the function did not call ``.backward()`` itself), the backward
graph is traced too (``compiler/autodiff.py``): the outputs get one
``CompiledFunctionBackward`` node that runs the compiled backward (``autograd_glue.py``).
"""

from __future__ import annotations

import functools
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable
from contextlib import nullcontext

import numpy as np

from .. import config
from .._thread_modes import AUTOCASTING
from ..amp.autocast_mode import autocasting
from ..autograd import grad_mode
from ..autograd.anomaly import MODE as _ANOMALY
from ..compiler.autodiff import differentiable, trace_backward
from ..compiler.joint import speculation_blocker
from ..compiler.kernel_desc import unsupported_float
from ..tensor import Tensor
from ..trace.numpy_args import conversions_watched, wrap_numpy_arguments
from ..trace.pytree import NotRebuildable, flatten, number_tensor, numbers_erased
from ..trace.state import STATE as _TRACE
from ..trace.tracer import TraceError, Tracer
from . import aliasing, call_path
from .autograd_state import unreproducible_autograd
from .dynamic_floats import DynamicFloats, restore_swapped, traced_numbers
from .entry import EagerEntry, Entry, Lowered
from .guards import (
    AccessGuard,
    ClosureGuard,
    closure_names,
    external_guards,
    groups_written,
    is_stateful,
)
from .observe import Observer
from .options import resolve
from .tiering import ShapeTiering, shape_kind

__all__ = ["compile", "CompiledFunction", "explain", "MAX_RETRACES_BEFORE_WARNING"]

MAX_RETRACES_BEFORE_WARNING = 8


_T, _N, _FLOAT = ("T",), ("N",), ("number", float)  # treedef leaves (trace/pytree.py)
_NO_KWARGS = ("dict", (), ())


def _log(topic: str, msg: str) -> None:
    if topic in config.log_topics():
        print(f"[jitgrad:{topic}] {msg}", flush=True)


class CompiledFunction:
    """A function compiled by :func:`compile` (see there); the arguments are ``compile``'s.

    ``fullgraph``: whether a graph break is an error (else that signature runs eagerly);
    ``compile_options``: the checked arguments; ``stats``: calls, traces, retraces and cache
    hits; ``lower(*args)`` / ``eager_reason(*args)``: what these arguments compile to, or why
    they run eagerly."""

    _jitgrad_guard_by_identity = True  # guards of a function calling this one: identity

    def __init__(self, fn: Callable, backend: str = "inductor", fallback: str | None = None,
                 cache_dir=None, *, fullgraph: bool = False, dynamic: bool | None = None,
                 mode: str | None = None, options: dict | None = None) -> None:
        opts = resolve(backend, fallback, fullgraph, dynamic, mode, options, cache_dir)
        if opts.eager:
            raise ValueError(f"backend={backend!r} runs the function uncompiled: use "
                             f"jitgrad.compile(fn, backend={backend!r})")
        self.fn = fn
        self.backend = backend
        self.compile_options = opts
        self.fullgraph = opts.fullgraph
        self.fallback = opts.fallback  # the tracer's escape policy: "error" or "eager"
        self.cache_dir = cache_dir
        self._entries: dict = {}
        self._lru: OrderedDict = OrderedDict()  # id(entry) -> (key, entry), oldest first
        self._warned_breaks: set = set()
        # (what, id of the object read) -> the call at which a traced call changed it
        self._changed_in_call: dict = {}
        self._retraces_of: dict = {}  # key -> traces again for failed guards
        self._given_up: dict = {}  # key -> why its calls run eagerly (config.recompile_limit)
        self._number_keys: dict = {}  # shape_kind -> the numbers (treedefs) traced for it
        self._tiering = ShapeTiering()  # new shapes: eager until a retrace pays (tiering.py)
        self._tracing_forced = 0  # lower() / eager_reason(): new shapes trace at once
        self._tier_traces = 0  # retraces shape tiering chose (not warned about)
        self.stats = {"calls": 0, "traces": 0, "retraces": 0, "cache_hits": 0, "evictions": 0,
                      "eager_new_shapes": 0}
        self.last_retrace_reason: str | None = None
        self._warned = False
        self._warned_autocast = False
        self._warned_anomaly = False
        self._last_key = None
        self._fast = None  # call_path's fast path of the last entry hit
        self._lock = threading.RLock()  # one trace at a time; plans run concurrently
        self._closure = ClosureGuard(fn)
        self._floats = DynamicFloats(opts.dynamic, self._closure,
                                     lambda msg: _log("recompiles", f"{self.__name__}: {msg}"))
        _LIVE.add(self)
        functools.update_wrapper(self, fn, updated=())
        if not hasattr(self, "__name__"):  # a Module-like callable
            self.__name__ = type(fn).__name__

    def reset(self) -> None:
        """Forget every trace (``jitgrad.compiler.reset()``): the next call traces again."""
        with self._lock:
            self._entries.clear()
            self._lru.clear()
            self._retraces_of.clear()
            self._given_up.clear()
            self._number_keys.clear()
            self._tiering.clear()
            self._floats.clear()
            self._changed_in_call.clear()
            self._fast = None
            self._last_key = None

    def __get__(self, obj, objtype=None):  # decorating methods
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    # ------------------------------------------------------------------------ calls
    def _key(self, flat, treedef) -> tuple:
        # the array's type is the device (ndarray, a CUDA array): one plan per device
        return (treedef, tuple([(t._data.shape, t._data.dtype, t._requires_grad,
                                 bool(t._hooks), type(t._data), layout_class(t._data))
                                for t in flat]),
                grad_mode.STATE.enabled, aliasing.arg_aliasing(flat))

    def __call__(self, *args, **kwargs):
        if AUTOCASTING and autocasting():
            return self._autocast_eager(args, kwargs)
        fast = self._fast
        if fast is not None and not kwargs:  # the newest hit's generated path, if it fits
            try:
                out = fast(args)
            except Exception as exc:
                if fast.entry.committed():
                    raise
                failed = exc  # (eager mode runs outside this handler: no chained error)
            else:
                if out is not call_path.MISS:
                    return out
                failed = None
            if failed is not None:
                return self._plan_raised(failed, fast.entry, args, kwargs)
        self.stats["calls"] += 1
        if _TRACE.tracer is not None:  # nested compiled call: inline into the outer trace
            return self.fn(*args, **kwargs)
        if _ANOMALY[0]:  # (entries are traced with it off: their fast paths miss here)
            return self._anomaly_eager(args, kwargs)
        key = None
        tensor_args = False  # positional tensors only: the generated fast path applies
        if not kwargs:  # the common case, tensor arguments only: the key in one pass
            items = []
            for a in args:
                if type(a) is not Tensor:
                    break
                d = a._data
                items.append((d.shape, d.dtype, a._requires_grad, bool(a._hooks), type(d),
                              layout_class(d)))
            else:
                flat = list(args)
                treedef = _TENSOR_ARGS_TREES.get(len(args)) or _tensor_args_tree(len(args))
                key = (treedef, tuple(items), grad_mode.STATE.enabled,
                       aliasing.arg_aliasing(flat))
                tensor_args = True
            if key is None and self._floats.args:
                flat, key = self._tensor_float_key(args)
                tensor_args = key is not None  # (the generated fast path applies too)
        if key is None:
            flat, key = self._call_key(args, kwargs)
        if self._given_up and key in self._given_up:  # past config.recompile_limit
            return self.fn(*args, **kwargs)
        closure_ids = self._closure.current()
        entries = self._entries.get(key)
        if entries:  # fast path: the newest entry of this key, guards holding
            entry = entries[0]
            if entry.closure_ids == closure_ids and (
                    not entry.has_guards or entry.guards_hold(args, kwargs, flat) is None):
                self._used(entry)
                if entry.eager_reason is not None:
                    return self.fn(*args, **kwargs)
                self.stats["cache_hits"] += 1
                if tensor_args:
                    self._fast = self._fast_path(entry, key)
                return self._run(entry, flat, args, kwargs)
        entry, reason = self._lookup(key, closure_ids, args, kwargs, flat)
        if entry is None:
            eager = None
            with self._lock:  # one trace at a time; a thread that waited may find it done
                entry, reason = self._lookup(key, closure_ids, args, kwargs, flat)
                if entry is None:
                    eager = self._new_key_eagerly(key)
                    if eager is None:
                        paid = self._tiering.paid(key)  # (a tiered shape that paid)
                        return self._trace(args, kwargs, flat, key, closure_ids, reason,
                                           paid)
            # (outside the lock: other threads' calls with new shapes run meanwhile)
            if eager == "tiered":
                return self._eager_new_shapes(key, args, kwargs)
            if eager is not None:  # (past the recompile limit for numbers)
                return self.fn(*args, **kwargs)
        self._used(entry)
        if entry.eager_reason is not None:
            return self.fn(*args, **kwargs)
        self.stats["cache_hits"] += 1
        return self._run(entry, flat, args, kwargs)

    def _run(self, entry, flat: list, args: tuple, kwargs: dict):
        """``entry.run(flat)``; a call whose plan raised before it changed anything outside
        it runs eagerly instead (:meth:`_plan_raised`)."""
        try:
            return entry.run(flat)
        except Exception as exc:
            if entry.committed():
                raise
            failed = exc
        return self._plan_raised(failed, entry, args, kwargs)

    def _plan_raised(self, exc: Exception, entry, args: tuple, kwargs: dict):
        """A compiled call whose plan raised (an index out of range, a failed value check)
        before changing anything outside it runs again eagerly: eager mode's error, with
        eager mode's effects up to it (``zero_grad()``'s ``.grad = None``, which a plan sets
        only at its end), from the random states the plan started with. Should eager mode
        not raise, its result is returned, with a warning: the plan and eager mode disagree
        (a jitgrad bug)."""
        entry.restore_rng()
        self.stats["eager_after_error"] = self.stats.get("eager_after_error", 0) + 1
        _log("recompiles", f"{self.__name__}: the plan raised {type(exc).__name__}: {exc}; "
             "the call runs eagerly")
        result = self.fn(*args, **kwargs)
        warnings.warn(f"jitgrad.compile: the compiled plan of {self.__name__} raised "
                      f"{type(exc).__name__}: {exc}, where eager mode does not; this call ran "
                      "eagerly (please report it)", RuntimeWarning, stacklevel=3)
        return result

    def _anomaly_eager(self, args: tuple, kwargs: dict):
        """A call under anomaly detection runs eagerly: its checks (a NaN gradient, the
        forward stack of a failing node) are eager mode's, node by node (warned once)."""
        self.stats["anomaly_eager"] = self.stats.get("anomaly_eager", 0) + 1
        if not self._warned_anomaly:
            self._warned_anomaly = True
            warnings.warn(f"jitgrad.compile: {self.__name__} runs eagerly while anomaly "
                          "detection is on (autograd.detect_anomaly / set_detect_anomaly), "
                          "which checks each backward node", UserWarning, stacklevel=3)
        return self.fn(*args, **kwargs)

    def _specialise(self, key, paths, args: tuple, kwargs: dict):
        """Call again with the dynamic floats ``paths`` of ``key`` as constants."""
        self._floats_need_values(key, paths)
        self.stats["calls"] -= 1  # (one call)
        return self(*args, **kwargs)

    def _floats_need_values(self, key, paths) -> None:
        if self._floats.need_values(key, paths):
            self._fast = None

    def _tensor_float_key(self, args: tuple) -> tuple:
        """``(flat, key)`` of a call of positional tensors and floats whose kind has dynamic
        floats (what ``DynamicFloats.key_view`` gives, without flattening twice); ``(None,
        None)`` for any other call, or one that changes which floats are dynamic."""
        kind_of = []
        for a in args:
            ta = type(a)
            if ta is Tensor:
                kind_of.append(_T)
            elif ta is float:
                kind_of.append(_FLOAT)
            else:
                return None, None
        kind = ("tuple", (("tuple", tuple(kind_of)), _NO_KWARGS))
        floats = self._floats
        dynamic = floats.args.get(kind)
        if not dynamic:
            return None, None
        first = floats.first.get(kind, {})
        static = floats.static.get(kind, ())
        children, flat, items = [], [], []
        for i, a in enumerate(args):
            if type(a) is float:
                p = ("arg", i)
                if p not in dynamic:
                    h = a.hex()
                    if p not in static and first.get(p) != h:
                        return None, None  # (another float becomes dynamic)
                    children.append(("const", a, (float, h)))
                    continue
                a = number_tensor(a)
                children.append(_N)
            else:
                children.append(_T)
            d = a._data
            flat.append(a)
            items.append((d.shape, d.dtype, a._requires_grad, bool(a._hooks), type(d),
                          layout_class(d)))
        treedef = ("tuple", (("tuple", tuple(children)), _NO_KWARGS))
        return flat, (treedef, tuple(items), grad_mode.STATE.enabled,
                      aliasing.arg_aliasing(flat))

    def _numbers_given_up(self, key) -> bool:
        """Whether a new signature ``key`` is one more of calls that differ only in Python
        numbers (a step counter passed at every call), past ``config.recompile_limit``
        traces of them: such calls then run eagerly (a trace each was 16-24x slower than
        eager), with a warning once, as ``torch.compile``'s cache limit does."""
        erased = numbers_erased(key[0])
        if erased == key[0]:
            return False
        # the numbers traced for calls of this kind, whatever their shapes (a step counter
        # passed with batches of changing shapes: the limit counts counter values)
        seen = self._number_keys.setdefault(shape_kind(key, erased), set())
        if key[0] in seen or len(seen) < config.recompile_limit:
            return False  # (counted when it traces: _trace)
        if len(seen) == config.recompile_limit:
            seen.add(None)  # (warned)
            warnings.warn(
                f"jitgrad.compile: {self.__name__} traced {config.recompile_limit} times for "
                f"arguments that differ only in Python numbers (config.recompile_limit = "
                f"{config.recompile_limit}); calls with other numbers run eagerly from now "
                f"on. A float argument is read afresh at every call unless the function needs "
                f"its value (control flow, math functions, op parameters such as clamp(max=)); "
                f"any number that changes at every call compiles once as a 0-d tensor "
                f"argument.", UserWarning, stacklevel=4)
        return True

    def _new_key_eagerly(self, key) -> str | None:
        """Why a call with ``key`` (no entry of it) runs eagerly rather than trace: "numbers"
        (past ``config.recompile_limit`` for calls differing in Python numbers), "tiered"
        (new shapes: ``tiering.py``); None: it traces. Called under the lock."""
        if key in self._entries:
            return None
        if self._numbers_given_up(key):
            return "numbers"
        if (config.shape_tiering and self.compile_options.dynamic is not False
                and not self.fullgraph and not self._tracing_forced
                and self._tiering.runs_eagerly(key)):
            return "tiered"
        return None

    def _eager_new_shapes(self, key, args: tuple, kwargs: dict):
        """Run a call with shapes not traced yet eagerly, timed (``tiering.py``)."""
        started = time.perf_counter()
        result = self.fn(*args, **kwargs)
        seconds = time.perf_counter() - started
        with self._lock:
            n = self._tiering.ran_eagerly(key, seconds)
            self.stats["eager_new_shapes"] += 1
        if "recompiles" in config.log_topics():
            _log("recompiles", f"{self.__name__}: new shapes ({_describe_key(key)}) ran "
                 f"eagerly ({n} time{'s' if n > 1 else ''}); they trace once eager calls have "
                 "cost what a retrace does")
        return result

    def _autocast_eager(self, args: tuple, kwargs: dict):
        """A call under autocast runs eagerly: generated kernels compute in float32/float64,
        autocast's functions in float16 (warned once per compiled function)."""
        self.stats["calls"] += 1
        self.stats["autocast_eager"] = self.stats.get("autocast_eager", 0) + 1
        if not self._warned_autocast and _TRACE.tracer is None:
            self._warned_autocast = True
            warnings.warn(f"jitgrad.compile: {self.__name__} is called under autocast and runs "
                          f"eagerly (compiled kernels have no float16 path); call it outside "
                          f"autocast to run it compiled", UserWarning, stacklevel=3)
        return self.fn(*args, **kwargs)

    def _used(self, entry) -> None:
        """Mark ``entry`` most recently used (hits through the generated fast path are not
        counted: its entry is taken as the most recent one when evicting)."""
        lru = self._lru
        try:
            if next(reversed(lru)) != id(entry):
                lru.move_to_end(id(entry))
        except (KeyError, StopIteration):  # evicted meanwhile by another thread's trace
            pass

    def _add_entry(self, key, entry) -> None:
        """Keep ``entry`` (newest of its key), then evict the least recently used entries
        beyond ``jitgrad.config.cache_size_limit``."""
        if isinstance(entry, EagerEntry):  # no dynamic floats for calls that run eagerly
            self._floats.eager_kinds.add(numbers_erased(key[0]))
        with self._lock:
            self._entries.setdefault(key, []).insert(0, entry)
            self._lru[id(entry)] = (key, entry)
            limit = max(1, int(config.cache_size_limit))
            fast = self._fast
            while len(self._lru) > limit:
                old_key, old = next(iter(self._lru.values()))
                if fast is not None and old.fast is fast and len(self._lru) > 1:
                    self._lru.move_to_end(id(old))  # the fast path's: in use
                    old_key, old = next(iter(self._lru.values()))
                del self._lru[id(old)]
                rest = [e for e in self._entries[old_key] if e is not old]
                if rest:
                    self._entries[old_key] = rest
                else:
                    del self._entries[old_key]
                if fast is not None and old.fast is fast:
                    self._fast = fast = None
                self.stats["evictions"] += 1
                _log("recompiles", f"{self.__name__}: evicted the least recently used entry "
                     f"({_describe_key(old_key)}): cache_size_limit={limit} reached")

    def _fast_path(self, entry, key):
        if entry.fast is None:
            entry.fast = call_path.entry_fast(entry, key, self._closure, self.stats)
        return entry.fast

    def _lookup(self, key, closure_ids, args: tuple = (), kwargs: dict | None = None,
                flat: list | None = None):
        """``(entry, None)`` on a hit; ``(None, why)`` on a miss."""
        entries = self._entries.get(key)
        if not entries:
            return None, (_NEW_KEY if self._entries else None)  # (worded when it traces)
        reason = None
        for entry in entries:
            if entry.closure_ids != closure_ids:
                reason = ("what the function refers to changed (a tensor or module rebound, "
                          "a module's train/eval mode, an optimizer hyper-parameter, a number, the "
                          "default dtype or device)")
                continue
            why = entry.guards_hold(args, kwargs, flat)
            if why is None:
                return entry, None
            reason = why
        return None, reason

    def _why_new_key(self, key) -> str:
        old = self._last_key
        if old is None:
            return "new signature"
        if old == key:
            return ("the last trace of these arguments kept no plan (the call raised, or "
                    "changed the state it reads)")
        if old[0] != key[0]:
            if numbers_erased(old[0]) == numbers_erased(key[0]):
                return "a Python number argument changed (or a float argument became dynamic)"
            return "argument structure or non-tensor arguments changed"
        if old[2] != key[2]:
            return f"grad mode changed ({old[2]} -> {key[2]})"
        if old[3] != key[3]:
            return "which arguments share memory changed"
        for i, (a, b) in enumerate(zip(old[1], key[1])):
            if a != b:
                what = ("shape", "dtype", "requires_grad", "hooks", "device", "layout")
                for name, x, y in zip(what, a, b):
                    if x != y:
                        if name == "device":
                            x, y = _device_name(x), _device_name(y)
                        return f"argument tensor {i}: {name} changed {x} -> {y}"
        return "number of tensor arguments changed"

    def _trace(self, args, kwargs, flat, key, closure_ids, reason, paid: bool = False):
        """A miss: trace the call, compile the graph, then run the call on the plan.

        The function runs once under a tracer, on the NumPy references (no eager kernel is
        compiled for it): that records the graph. Its effects on existing state (arrays
        written in place, ``.grad`` set, random draws) are then taken back, and the compiled
        plan runs the call, so the first call returns what every later call would -- the
        same bits as eager mode, whose ops are the plan's kernels -- and its effects happen
        once. Arrays the traced call made that outside state kept get the plan's values too.
        """
        started = time.perf_counter()
        erased = numbers_erased(key[0])
        if erased != key[0]:  # numbers traced, for config.recompile_limit
            self._number_keys.setdefault(shape_kind(key, erased), set()).add(key[0])
        if reason is _NEW_KEY:
            reason = self._why_new_key(key)
        if reason is not None and key in self._entries:  # a guard failed, not a new key
            n = self._retraces_of[key] = self._retraces_of.get(key, 0) + 1
            if n > config.recompile_limit:
                self._given_up[key] = reason
                self._fast = None
                warnings.warn(
                    f"jitgrad.compile: {self.__name__} traced {n} times for the same argument "
                    f"kinds (config.recompile_limit = {config.recompile_limit}); calls like it "
                    f"run eagerly from now on. Last guard that failed: {reason}",
                    UserWarning, stacklevel=3)
                return self.fn(*args, **kwargs)
        if self._closure.refresh():  # globals / cells defined since: compared from now on
            closure_ids = self._closure.current()
            self._fast = None
        closure_ids, changed = self._floats.closure_view(key, closure_ids,
                                                         self._entries.get(key))
        if changed:
            self._fast = None
        changed_state = False
        self.stats["traces"] += 1
        if reason is not None:
            self.stats["retraces"] += 1
            self.last_retrace_reason = reason
            _log("recompiles", f"{self.__name__}: retrace #{self.stats['retraces']}: {reason}")
            if paid:  # (shape tiering chose it: its eager calls cost what a retrace does)
                self._tier_traces += 1
            if self.stats["retraces"] - self._tier_traces > MAX_RETRACES_BEFORE_WARNING and \
                    not self._warned:
                self._warned = True
                warnings.warn(
                    f"jitgrad.compile: {self.__name__} was retraced "
                    f"{self.stats['retraces']} times; last guard that failed: {reason}",
                    UserWarning, stacklevel=3)
        self._last_key = key
        tracer = Tracer(name=getattr(self.fn, "__name__", "fn"), names=closure_names(self.fn))
        tracer.escape_policy = self.fallback
        for i, t in enumerate(flat):
            tracer.add_input(t, i)
        observer = Observer(tracer, self.fn)
        numbers, traced_args, traced_kwargs = traced_numbers(args, kwargs, flat, key[0])
        numbers, swaps = self._floats.swap_closure(numbers, tracer)
        groups = self._closure.optimizer_groups()
        traced_args, traced_kwargs = wrap_numpy_arguments(traced_args, traced_kwargs, tracer)
        if numbers is not None:  # a graph break stops the trace (below), not eager code
            tracer.escape_policy = "error"  # going on with TracedFloats in hand
        _TRACE.tracer = tracer
        try:
            with observer, (conversions_watched() if traced_args is not args
                            else nullcontext()):
                result = self.fn(*traced_args, **traced_kwargs)
        except TraceError:
            _TRACE.tracer = None
            tracer.undo()  # jitgrad refused the function: it leaves no half-done effects
            if numbers is None or self.fullgraph:
                raise
            restore_swapped(swaps)  # (a graph break: traced again with plain floats, it
            return self._specialise(key, numbers.paths, args, kwargs)  # runs eagerly)
        except Exception:
            if numbers is None:
                raise
            # (a dynamic float where the code wanted a float: ``isinstance``, a library's
            # type check) traced again with plain floats, which raise what is real
            _TRACE.tracer = None
            restore_swapped(swaps)
            tracer.undo()
            return self._specialise(key, numbers.paths, args, kwargs)
        finally:
            _TRACE.tracer = None
            tracer.escape_policy = self.fallback
            restore_swapped(swaps)
            if numbers is not None:  # (kept past the call: its value, a constant)
                numbers.close()
        access = AccessGuard(observer.reads)
        wrote = groups_written(groups) if groups else None
        if wrote is not None and tracer.escaped is None:
            # (after the call: its traced result stands, as after the other breaks found at
            # the end; later calls run eagerly and set the groups themselves)
            tracer.graph_break(f"the call {wrote} (a hyper-parameter a plan would not set "
                               "again)", where="jitgrad.compile")
        if tracer.escaped is not None:
            # a graph break: the call finished eagerly; calls matching this key and these
            # guards run eagerly too (a guard failing traces again)
            if tracer.escaped not in self._warned_breaks:
                self._warned_breaks.add(tracer.escaped)
                warnings.warn(f"jitgrad.compile: running {self.__name__} eagerly: "
                              f"{tracer.escaped}", UserWarning, stacklevel=3)
            self._add_entry(key, EagerEntry(tracer.escaped, [], closure_ids, access))
            self._fast = None  # this key now runs eagerly: the generic path decides
            return result
        why = aliasing.cannot_compile(key[3], tracer)
        if why is not None:  # the graph cannot express it: this signature runs eagerly
            tracer.undo()
            warnings.warn(f"jitgrad.compile: running {self.__name__} eagerly: {why}",
                          UserWarning, stacklevel=3)
            self._add_entry(key, EagerEntry(why, [], closure_ids, access))
            self._fast = None
            return self.fn(*args, **kwargs)
        try:
            try:
                out_flat, out_tree = flatten(result, result=True)
            except NotRebuildable as e:  # the call ran eagerly already: it stays eager
                tracer.graph_break(f"the function returns {e}, which a compiled plan cannot "
                                   "give back afresh at every call", where="jitgrad.compile")
                out_flat, out_tree = [], None
            if numbers is not None:  # (after the result: a dynamic float returned is a value)
                if tracer.calls_type:  # ``type(lr)`` answered TracedFloat where eager code
                    tracer.undo()  # sees float: the trace may have taken another branch
                    del result, out_flat
                    return self._specialise(key, numbers.paths, args, kwargs)
                if numbers.specialized:
                    self._floats_need_values(key, numbers.specialized)
                    changed_state = True  # this trace computed with their values: this call
            graph = tracer.finish(out_flat)
            why = unreproducible_autograd(flat, out_flat, graph, tracer, key[2])
            if why is None and access:
                # outside state the call read and then changed itself, through library code
                # whose writes the observer does not see: its guard fails at the next call,
                # which traces again. Once (an optimizer's first step makes its state) that
                # is how it compiles; the second time the same state changes in a call
                # (scheduler.step() inside a step) it would be a trace per call: eager.
                changed = access.changed_root(args, kwargs)
                if changed is not None:
                    what = changed[0].replace(" since the trace", "")
                    # (the same object: a fresh optimizer passed in -- k-fold training --
                    # changes its state in its first call too, and compiles)
                    seen = (what, id(changed[1]))
                    # again at the call right after the last change: it changes at every
                    # call (a later change -- opt.state.clear() -- makes state once more)
                    last = self._changed_in_call.get(seen)
                    if last is not None and self.stats["calls"] - last <= 1:
                        why = (f"the call changes what it reads ({what} during the call, "
                               "again): it runs eagerly, its effects as in eager mode")
                        access = access.without_changed(args, kwargs)
                    elif is_stateful(changed[1]) and not isinstance(changed[1], Tensor):
                        # an optimizer's or module's state the call made (a first step's
                        # buffers): the plan does not make it again, so it must not serve
                        # a call that finds the state as it was (after opt.state.clear())
                        changed_state = True
                    self._changed_in_call[seen] = self.stats["calls"]
            if why is not None and tracer.escaped is None:
                tracer.graph_break(why, where="jitgrad.compile")
        except TraceError:  # (fullgraph=True: a graph break found at the end)
            tracer.undo()
            raise
        if tracer.escaped is not None:  # an output the trace cannot see (nonzero's), a
            # value read and changed within the call: the call already ran eagerly, and so
            # do calls like it (a graph break)
            if tracer.escaped not in self._warned_breaks:
                self._warned_breaks.add(tracer.escaped)
                warnings.warn(f"jitgrad.compile: running {self.__name__} eagerly: "
                              f"{tracer.escaped}", UserWarning, stacklevel=3)
            self._add_entry(key, EagerEntry(tracer.escaped, [], closure_ids, access))
            self._fast = None
            return result
        why = unsupported_float(graph)
        if why is not None:  # no kernels for it: this signature runs eagerly
            tracer.undo()
            del result, out_flat
            warnings.warn(f"jitgrad.compile: running {self.__name__} eagerly: {why}",
                          UserWarning, stacklevel=3)
            self._add_entry(key, EagerEntry(why, [], closure_ids, access))
            self._fast = None
            return self.fn(*args, **kwargs)
        grad_info = None
        if grad_mode.STATE.enabled and differentiable(tracer, graph, flat, out_flat):
            try:
                grad_info = trace_backward(tracer, graph, flat, out_flat)
            except RuntimeError as e:  # the backward does what a trace cannot capture (a
                # reentrant checkpoint's), or raises (a saved value written in place since:
                # eager mode raises that at backward(), not at the call): this signature
                # runs eagerly
                tracer.undo()
                del result, out_flat
                why = f"its backward: {e}" if isinstance(e, TraceError) else \
                    f"its backward raises: {e}"
                warnings.warn(f"jitgrad.compile: running {self.__name__} eagerly: {why}",
                              UserWarning, stacklevel=3)
                self._add_entry(key, EagerEntry(why, [], closure_ids, access))
                self._fast = None
                return self.fn(*args, **kwargs)
        if "graph" in config.log_topics():  # (a graph's text is built only to be shown)
            _log("graph", f"{self.__name__}:\n{graph}")
            if grad_info is not None:
                _log("graph", f"{self.__name__} backward:\n{grad_info.graph}")
        guards = external_guards(graph, tracer)
        aliases = aliasing.analyse(flat, out_flat, graph, tracer, grad_info)
        # backward()/grad() ran inside: outputs that required grad carry no history of it
        joint_outputs = [i for i, t in enumerate(out_flat) if t._requires_grad]
        out_sizes = [(t._data.size, t._data.dtype) for t in out_flat]
        tracer.undo()
        del result, out_flat  # the traced outputs: not results (the plan computes those)
        escaped = tracer.escaped_values()
        why_not = "disabled (JITGRAD_SPECULATE=0)" if not config.speculate() else (
            "the function calls backward() itself" if tracer.backward_runs else
            speculation_blocker(graph, grad_info, out_sizes, aliases, escaped))
        if grad_info is not None:
            _log("speculate", f"{self.__name__}: " + (
                "speculates the gradients (joint forward+backward plan)" if why_not is None
                else f"no speculation: {why_not}"))
        entry = Entry(self.__name__, graph, out_tree, guards, grad_info, closure_ids,
                      self.cache_dir, escaped, spec_reason=why_not)
        entry.aliases, entry.residual_anchors = aliases
        if tracer.backward_runs:
            entry.joint = True
            entry.joint_outputs = joint_outputs
        entry.access = access
        entry.finish(key[2], flat)
        kept = self._closure.current() == closure_ids and not changed_state
        self._tiering.traced(key, time.perf_counter() - started, kept)
        if kept:
            self._add_entry(key, entry)
        elif numbers is not None and numbers.specialized:
            _log("recompiles", f"{self.__name__}: the trace needed the value of a dynamic "
                 "float argument; its plan runs this call only")
        else:
            # the call changed what the guards read (a first optimizer step creates its
            # state): the plan does not repeat that change, so it must not serve a later
            # call that finds the state as it was before (after ``opt.state.clear()``):
            # it runs this call only (the same for what it read through its arguments)
            _log("recompiles", f"{self.__name__}: the traced call changed the state its "
                 "guards read; its plan runs this call only")
        tracer.release()  # the trace's arrays: not alive while the plan runs the call
        return entry.run(flat)

    # ------------------------------------------------------------------- debugging
    def lower(self, *args, **kwargs) -> Lowered:
        """The traced graph, backward graph, fusion groups and generated source for these
        arguments (traces them if needed). RuntimeError if they run eagerly (a graph break
        under ``fullgraph=False``): there is nothing compiled to show."""
        why = self.eager_reason(*args, **kwargs)
        if why is not None:
            raise RuntimeError(f"{self.__name__} runs eagerly for these arguments, nothing was "
                               f"compiled: {why}")
        flat, key = self._call_key(args, kwargs)
        entry, _ = self._lookup(key, self._closure.current(), args, kwargs, flat)
        return Lowered(entry)

    def _call_key(self, args: tuple, kwargs: dict) -> tuple:
        """``(flat, key)`` of a call, as :meth:`__call__` computes them (dynamic floats
        included)."""
        flat, treedef = flatten((args, kwargs))
        if self.compile_options.dynamic is not False:
            flat, treedef = self._floats.key_view(args, kwargs, flat, treedef)
        return flat, self._key(flat, treedef)

    def eager_reason(self, *args, **kwargs) -> str | None:
        """Why calls with these arguments run eagerly (the graph break that stopped their
        trace), or None when they run compiled. Traces them if they never ran."""
        flat, key = self._call_key(args, kwargs)
        self._tracing_forced += 1  # (new shapes trace at once: there is a plan to show)
        try:
            if key not in self._entries:
                self(*args, **kwargs)
            entry, _ = self._lookup(key, self._closure.current(), args, kwargs, flat)
            if entry is None:  # the state changed since: trace these arguments again
                self(*args, **kwargs)
                entry, _ = self._lookup(key, self._closure.current(), args, kwargs, flat)
        finally:
            self._tracing_forced -= 1
        return entry.eager_reason if entry is not None else None


_TENSOR_ARGS_TREES: dict = {}
_NEW_KEY = object()  # _lookup's reason for a key without entries (_why_new_key words it)


def _device_name(array_type) -> str:
    """The device of arrays of ``array_type`` (a compiled entry's key holds the type)."""
    return "cpu" if array_type is np.ndarray else "cuda:0"


def layout_class(d) -> int:
    """0: C-contiguous, 1: a transposed layout (Fortran-contiguous only), 2: other strides.
    Part of a compiled entry's key: a trace may depend on its arguments' layouts (the
    gradient of a transposed matrix operand, ``ops.linalg.rhs_grad``, picks the BLAS form
    that returns it in that layout), so an argument in another layout traces again rather
    than run a plan whose last bits could differ from eager mode's."""
    f = d.flags
    return 0 if f.c_contiguous else (1 if f.f_contiguous else 2)


def _describe_key(key) -> str:
    """A key's tensor arguments, for logs: ``float32[2, 3], int64[4]``."""
    return ", ".join(f"{np.dtype(dt).name}{list(shape)}" for shape, dt, *_ in key[1]) or \
        "no tensor arguments"


def _tensor_args_tree(n: int) -> tuple:
    """The treedef flatten() gives ``(args, {})`` for ``n`` tensor arguments."""
    tree = flatten((tuple(Tensor.__new__(Tensor) for _ in range(n)), {}))[1]
    _TENSOR_ARGS_TREES[n] = tree
    return tree


def compile(fn: Callable | None = None, *, fullgraph: bool = False,  # noqa: A001
            dynamic: bool | None = None, backend: str | Callable | None = None,
            mode: str | None = None, options: dict | None = None, disable: bool = False,
            fallback: str | None = None, cache_dir=None) -> Callable:
    """Compile ``fn``, a function or a module, as ``torch.compile`` does: traced per input
    signature, differentiated, fused into generated Numba kernels.

    A function gives a :class:`CompiledFunction`; a ``jitgrad.nn.Module`` gives an
    :class:`~jitgrad.jit.OptimizedModule` wrapping it (its ``forward`` is the compiled module,
    everything else is the original's: parameters, ``state_dict`` under ``_orig_mod.``,
    ``train``/``eval``, attributes). ``Module.compile()`` compiles a module in place. With
    ``fn=None``, a decorator.

    * ``fullgraph``: False (the default), a call whose Python needs a tensor's value (``if
      x.sum() > 0``, ``.item()``, printing) runs eagerly from that point, with a warning,
      and calls of that signature stay eager; True makes it an error (``ValueEscape``).
    * ``backend``: ``"inductor"`` (``None``, the default, means it), ``"auto"`` or ``"cpu"``
      compile;
      ``"eager"``/``"aot_eager"`` run ``fn`` uncompiled; ``"cuda"`` is reserved; custom
      (callable) backends are not supported.
    * ``mode`` (``"default"``, ``"reduce-overhead"``, ``"max-autotune"``,
      ``"max-autotune-no-cudagraphs"``, ``"lite"``) and ``options`` are accepted and change nothing;
      ``dynamic`` is accepted: jitgrad specialises each trace on the shapes and retraces
      for a new one (its kernels are shape-generic, so that rarely compiles a kernel).
    * ``disable=True`` returns ``fn`` itself.
    * ``fallback``: the older spelling of ``fullgraph`` (``"error"``: True, ``"eager"``:
      False); ``cache_dir``: where generated kernels go (default ``JITGRAD_CACHE_DIR``).

    >>> import jitgrad
    >>> @jitgrad.compile
    ... def f(x):
    ...     return (x.tanh() * x).sum()
    >>> x = jitgrad.ones(3, requires_grad=True)
    >>> f(x).backward(); x.grad.shape
    jitgrad.Size([3])
    """
    opts = resolve(backend, fallback, fullgraph, dynamic, mode, options, cache_dir)
    if fn is None:
        def decorate(f: Callable) -> Callable:
            if f is None:
                raise RuntimeError("Model can't be None")
            return _compile(f, opts, disable)
        return decorate
    return _compile(fn, opts, disable)


def _compile(fn: Callable, opts, disable: bool) -> Callable:
    if disable:
        return fn
    from .module_wrapper import OptimizedModule, is_module

    if is_module(fn):
        return OptimizedModule(fn, opts)
    if opts.eager:
        return _uncompiled(fn)
    return CompiledFunction(fn, **opts.as_kwargs())


def _uncompiled(fn: Callable) -> Callable:
    """What an eager backend gives: ``fn``, called as it is."""
    @functools.wraps(fn)
    def run_eagerly(*args, **kwargs):
        return fn(*args, **kwargs)
    return run_eagerly


_LIVE: weakref.WeakSet = weakref.WeakSet()


def live_compiled_functions() -> list[CompiledFunction]:
    """Every :class:`CompiledFunction` still alive."""
    return list(_LIVE)


def compiled_function_of(f) -> CompiledFunction | None:
    """The :class:`CompiledFunction` behind ``f``: ``f`` itself, an ``OptimizedModule``'s
    ``forward``, or what ``Module.compile()`` installed; None if there is none."""
    if isinstance(f, CompiledFunction):
        return f
    d = getattr(f, "__dict__", {})
    for cand in (d.get("forward"), d.get("_compiled_call_impl")):
        if isinstance(cand, CompiledFunction):
            return cand
    return None


def explain(f: Callable, *args, **kwargs) -> str:
    """How ``f`` (what :func:`compile` returned, or a module after ``.compile()``) compiles
    for these arguments: graphs, kernels, the last retrace reason; or why these arguments
    run eagerly (a graph break under ``fullgraph=False``)."""
    cf = compiled_function_of(f)
    if cf is None:
        raise TypeError("explain() expects a function or module returned by jitgrad.compile "
                        "(or a module after .compile()) with a compiling backend")
    why = cf.eager_reason(*args, **kwargs)  # traces these arguments if they never ran
    stats = (f"traces: {cf.stats['traces']}, retraces: {cf.stats['retraces']}, cache hits: "
             f"{cf.stats['cache_hits']}, eager calls of new shapes (shape tiering): "
             f"{cf.stats['eager_new_shapes']}")
    if why is not None:
        return "\n".join([f"{cf.__name__}: runs eagerly for these arguments (a graph break; "
                          "fullgraph=True makes it an error)", f"graph break: {why}", stats])
    low = cf.lower(*args, **kwargs)
    e = low.entry
    n_graphs = 1 + (1 if e.grad_info else 0)
    n_kernels = e.plan.n_kernels + (e.bplan.n_kernels if e.bplan else 0) + (
        e.spec_plan.n_kernels if e.spec_plan else 0)
    lines = [
        f"{cf.__name__}: {n_graphs} graph(s) ({'forward + backward' if e.grad_info else 'one'})"
        f", {len(e.graph.eqns)} forward op(s), {n_kernels} generated kernel(s)",
        stats,
        f"last retrace reason: {cf.last_retrace_reason or 'none'}",
    ]
    if e.grad_info is not None:
        lines.append("speculated gradients: " + (
            "yes (the forward call runs the joint forward+backward plan)"
            if e.spec_reason is None else f"no ({e.spec_reason})"))
    return "\n".join(lines)
