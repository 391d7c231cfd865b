"""Tracing by execution: the function runs eagerly on real tensors while every op is recorded.

Values are identified by their NumPy array (``id(t._data)``), so ``detach()``, ``.data`` and
other aliases of one array are one graph value. The eager engine itself runs under the tracer:
``.backward()`` inside the function records the VJP rules it executes, so the backward graph
falls out of the same op registry, and gradient accumulation, ``p.grad = None`` and in-place
parameter updates become explicit effects of the graph.

Arrays the function reads that no recorded op produced are *externals*: arguments, captured
tensors (closures, module parameters) and leaves' gradients, read again at every call.
Arrays created during the trace by code the tracer cannot see are an error (their values
would otherwise be frozen into the graph).
"""

from __future__ import annotations

import contextlib
import os
import sys
import weakref
from typing import NamedTuple

import numpy as np

from ..config import check_ir
from ..devices import is_cpu_array
from .ir import Eqn, Graph, Lit, Source, Var
from .state import STATE

__all__ = ["Tracer", "TraceError", "ValueEscape", "GraphBreak", "active", "needs_value"]


_ANY = "any"  # a leaf's .grad state that the function overwrote before reading


class TraceError(RuntimeError):
    """The function does something ``jitgrad.compile`` cannot capture."""


def _is_array(a) -> bool:
    """Host or CUDA memory (an optimizer state made by a first compiled step on CUDA tensors
    must hold the plan's values as on the CPU)."""
    if type(a) is np.ndarray:
        return True
    rt = sys.modules.get("jitgrad.cuda.runtime")
    return rt is not None and rt.is_device_array(a)


class ValueEscape(TraceError):
    """A tensor's value was needed by Python code (``if t > 0``, ``t.item()``...)."""


class GraphBreak(TraceError):
    """Python code a trace cannot capture (a hook, a side effect on outside state, a call to
    ``random``/``time``) runs inside the compiled function."""


def active():
    """The tracer of this thread, or None."""
    return STATE.tracer


def needs_value(t, what: str) -> None:
    """Python code is about to read tensor ``t``'s values (a count, an index, a check). While
    a function is traced that is a value escaping the trace -- a graph break -- unless ``t``
    is a constant the function built (its values are then the same at every call): a value
    the graph computes, or one read from outside it, would be frozen into the plan."""
    tr = STATE.tracer
    if tr is None:
        return
    v = tr.vars.get(id(t._data))
    if v is None or v.kind != "const":
        tr.escape(what)


_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_location() -> str:
    """``file:line`` of the innermost frame outside the jitgrad package."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_PKG_DIR):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


def _root(arr):
    """The array owning ``arr``'s memory (``arr`` itself when it is no view)."""
    base = getattr(arr, "base", None)
    while base is not None:
        arr, base = base, getattr(base, "base", None)
    return arr


class RngMark(NamedTuple):
    """Where a checkpointed forward began: the tracer, the default generator's state (a
    Python snapshot, usable eagerly too) and how many draws the trace had made."""

    tracer: Tracer
    state: dict
    drawn: int


class Tracer:
    """Records one call of a function into a :class:`Graph`."""

    eager_kernels = False
    """Whether ops run their eager kernels while traced (else their NumPy references:
    ``ops.eager_kernels.use_kernels``)."""

    def __init__(self, name: str = "graph", names: dict | None = None) -> None:
        self.graph = Graph(name=name)
        self.names = names or {}              # id(tensor) -> a readable name
        self.vars: dict[int, Var] = {}        # id(array) -> Var
        self.sources: dict[int, Source] = {}  # id(array) -> Source of an external
        self.keep: list = []                  # arrays kept alive: ids stay unique
        self.untraced: set[int] = set()       # arrays made during the trace outside ops
        # in-place writes so far per memory (id of the root array: ``_root``), and per
        # array the count its Var's value has seen (a view made, or a Var read, before a
        # later write into the same memory is stale)
        self.writes_to: dict[int, int] = {}
        self.view_of: dict[int, int] = {}
        self.written_arrays: dict[int, list] = {}  # id(root) -> the arrays written, in order
        self.written: dict[int, Source] = {}  # externals written in place
        self.grad_sets: dict[int, tuple] = {}
        self.grad_guards: dict[int, tuple] = {}  # id(leaf) -> (leaf, grad state, leaf_source)
        self.setting_reads: dict = {}  # read function -> the value the trace saw
        self.arg_index: dict[int, int] = {}   # id(argument tensor) -> its flat index
        self.scalar_reads: list = []  # (Source "scalar", its value when the trace read it)
        self.inner_leaves: set[int] = set()  # ids of leaves the call made whose .grad it set
        self.strided_inputs = False  # an argument neither C- nor F-contiguous
        self.detached: dict = {}  # id -> weak reference of the tensors the call's detach() made
        # id(detached) -> (weak reference to it, weak reference to the tensor it detaches)
        self.detach_origins: dict = {}
        self.backward_runs = 0
        self.calls_type = False  # user code the call ran loads ``type`` (jit/observe.py)
        # objects the call made that Python code may set attributes on without acting
        # outside the call (a custom Function's ctx): id -> the object, kept alive
        self.made_here: dict[int, object] = {}
        # each random draw so far (its array, its Var), in order; while a checkpoint's
        # recomputation runs, ``replay`` holds the draws its forward made, to be drawn again
        self.draws: list = []
        self.replay: list | None = None
        self.n = 0
        self.escape_policy = "error"
        self.escaped = None
        # what undo() needs to take the trace's effects back: externals' contents before
        # their first write, leaves' .grad before the first change, generators' states
        self.saved_arrays: dict[int, tuple] = {}
        self.saved_grads: dict[int, tuple] = {}
        self.saved_versions: dict[int, tuple] = {}  # id(vc) -> (vc, version before)
        self.saved_history: dict[int, tuple] = {}   # externals written: autograd state
        from ..random import LIVE

        self.saved_rng = [(g, g._state()) for g in list(LIVE)]

    # ---------------------------------------------------------------- variables
    def _new_var(self, arr: np.ndarray, kind: str, source=None) -> Var:
        if arr.dtype.kind == "c":  # (an argument, a module's buffer, a view of either)
            self.graph_break("a complex tensor (compiled plans are real-valued)")
        if type(arr) is not np.ndarray and not is_cpu_array(arr):
            self.graph.device = "cuda"
        v = Var(self.n, tuple(arr.shape), arr.dtype, kind, source)
        self.n += 1
        self.vars[id(arr)] = v
        self.keep.append(arr)
        if self.writes_to:  # of its memory's value as it is now
            self.view_of[id(arr)] = self.writes_to.get(id(_root(arr)), 0)
        return v

    def _stale(self, arr) -> bool:
        """Whether view ``arr``'s Var is older than a write into memory it overlaps (writes
        into disjoint parts of the same array -- gradients in views of one flat bucket --
        are not). (An array that is no view is its written Var: only writes through views
        of it could leave it behind, and those are refused unless its views are tensors of
        their own, a DistributedDataParallel bucket's, written with the bucket's values.)"""
        r = id(_root(arr))
        now, seen = self.writes_to.get(r, 0), self.view_of.get(id(arr), 0)
        if now == seen:
            return False
        for w in self.written_arrays[r][seen:now]:
            if type(w) is not np.ndarray or type(arr) is not np.ndarray or \
                    np.may_share_memory(arr, w):
                return True
        self.view_of[id(arr)] = now
        return False

    def add_input(self, t, index: int) -> Var:
        self.arg_index.setdefault(id(t), index)
        arr = t._data
        flags = getattr(arr, "flags", None)
        if flags is not None and not (flags.c_contiguous or flags.f_contiguous):
            self.strided_inputs = True
        if id(arr) in self.vars:  # the same tensor passed twice
            return self.vars[id(arr)]
        src = Source("arg", index=index)
        v = self._new_var(arr, "in", src)
        self.sources[id(arr)] = src
        self.graph.inputs.append(v)
        return v

    def alias_input(self, view, arr) -> None:
        """``view`` (a NumPy argument as the traced function sees it: ``numpy_args``) is the
        input ``arr``."""
        self.vars[id(view)] = self.vars[id(arr)]
        self.sources[id(view)] = self.sources[id(arr)]
        self.keep.append(view)

    def is_input(self, arr: np.ndarray) -> bool:
        """Whether ``arr`` is the array of one of the traced function's arguments."""
        v = self.vars.get(id(arr))
        return v is not None and v.kind == "in"

    def var(self, t) -> Var:
        """The Var of a tensor used as an op input (registering externals on first use)."""
        arr = t._data
        v = self.vars.get(id(arr))
        if v is not None:
            if self.writes_to and arr.base is not None and self._stale(arr):
                # its Var is the view of the old value: read it again from its base's
                # current one; else the rest of the call runs eagerly
                fresh = self._reread_view(t)
                if fresh is not None:
                    return fresh
                self.graph_break("a view is read after the tensor it views was written in "
                                 "place (take the view after the write to compile it)")
                return v
            return v
        if id(arr) in self.untraced:
            # a graph break: the call (already eager up to here) finishes eagerly
            self._stop(GraphBreak, (
                f"{user_location()}: a tensor of shape {list(arr.shape)} was computed by an "
                "operation jitgrad.compile cannot trace (for example NumPy code on .numpy() "
                "data, nonzero/unique or a custom Function's non-tensor code); compute it "
                "with jitgrad ops, or pass it in as an argument (a graph break: the call "
                "runs eagerly; fullgraph=True raises)"))
            return self._new_var(arr, "op")
        obj = self._origin(t, arr)
        src = Source("tensor", obj=obj, name=self.names.get(id(obj)) or
                     f"captured{len(self.graph.externals)}")
        return self._add_external(arr, src)

    def _origin(self, t, arr):
        """The tensor a plan reads ``arr`` from: ``t``, or -- ``t`` being a ``detach()`` /
        ``.data`` the call made of a tensor from outside -- that tensor (a temporary alias
        would be read at every call, and the outside tensor, its array seen as the call's
        own, would be taken for a leaf of the call: its ``.grad`` never set)."""
        refs = self.detach_origins.get(id(t))
        if refs is not None and refs[0]() is t:
            o = refs[1]()
            if o is not None and o._data is arr:
                return o
        return t

    def _add_external(self, arr: np.ndarray, src: Source) -> Var:
        """Register ``arr`` as an external value the plan reads from ``src`` at every call."""
        v = self._new_var(arr, "ext", src)
        self.sources[id(arr)] = src
        self.graph.externals.append(v)
        return v

    def scalar_input(self, mapping, key, dtype, name: str = ""):
        """A 0-d tensor holding ``mapping[key]`` that the compiled plan reads afresh at every
        call (an optimizer's learning rate: a scheduler changing it must not retrace)."""
        from ..tensor import alias

        # (a 0-d tensor -- PyTorch's way to vary an lr under compile --: its value)
        src = Source("scalar", obj=(mapping, key, np.dtype(dtype)), name=name or str(key))
        arr = src.read([])
        self._add_external(arr, src)
        self.scalar_reads.append((src, arr.copy()))
        return alias(arr)

    def operand(self, x):
        from ..tensor import Tensor

        if isinstance(x, Tensor):
            return self.var(x)
        return Lit(x)

    # --------------------------------------------------------------------- events
    def on_op(self, op, out, inputs, params, cdt=None) -> None:
        """``out = op(*inputs, **params)`` was executed."""
        ins = tuple(self.operand(x) for x in inputs)
        params = self._check_params(op, params) if params else {}
        v = self._new_var(out._data, "op")
        self.graph.eqns.append(Eqn(op, ins, v, params, cdt))

    def _check_params(self, op, params) -> dict:
        """The op's params as the graph keeps them. An array param (an index) that is the
        data of a tensor the function made from Python data (``x[jitgrad.tensor([0, 2])]``,
        a constant mask) is a constant: its value at this point is frozen into the params.
        One computed from the inputs is data-dependent: an error."""
        out = {}
        for k, val in params.items():
            if isinstance(val, np.ndarray):
                out[k] = self._constant_param(op, k, val)
            elif isinstance(val, tuple) and any(isinstance(x, np.ndarray) for x in val):
                out[k] = tuple(self._constant_param(op, k, x) if isinstance(x, np.ndarray)
                               else x for x in val)
            else:
                out[k] = val
        return out

    def _constant_param(self, op, k: str, a: np.ndarray) -> np.ndarray:
        v = self.vars.get(id(a))
        if v is None and id(a) not in self.untraced:
            return a  # made by the op's own code (not a tensor's data)
        if v is not None and v.kind == "const":
            return a.copy()  # the value now: a later in-place change must not reach it
        self._stop(ValueEscape, (
            f"{user_location()}: {op.name} depends on the values of a traced tensor "
            f"(its '{k}' comes from tensor data): data-dependent indexing cannot be "
            "compiled (a graph break: the call runs eagerly; fullgraph=True raises)"))
        return a

    def on_constant(self, t) -> None:
        """A tensor built from Python data inside the function: a constant of the graph."""
        arr = t._data
        v = self._new_var(arr, "const", arr.copy())  # copied: later in-place ops may mutate
        del v

    def on_generated(self, t, name: str, regen) -> None:
        """A tensor created by a factory: ``regen()`` makes its value again at every call
        (``fill``: deterministic; ``random``: draws from the generator, as eager would)."""
        arr = t._data
        if name == "random" and self.replay is not None:
            self._replay_draw(arr)
            return
        v = self._new_var(arr, "op")
        self.graph.eqns.append(Eqn(name, (), v, {}, None, regen))
        if name == "random":
            self.draws.append((t, v))

    # ------------------------------------------------- checkpoint recomputation's draws
    def rng_mark(self) -> RngMark:
        """The default generator's state and the draws so far, taken where a checkpoint
        starts its forward (``preserve_rng_state``): :meth:`replaying` makes its
        recomputation draw the same numbers again, as eager mode's restored state does."""
        from ..random import default_generator

        return RngMark(self, default_generator._state(), len(self.draws))

    @contextlib.contextmanager
    def replaying(self, mark: RngMark):
        """Trace a checkpoint's recomputation as eager mode runs it (the default generator
        put back to ``mark``'s state, then to the state it had), each of its random draws
        being the forward's draw in the same place (checked value for value): the plan
        draws once and both uses read that draw. ``self`` is the tracer recording the
        recomputation: ``mark``'s own (a function that calls backward itself) or the one
        tracing the derived backward (``compiler/autodiff.py``), which then reads the
        forward's draws as residuals."""
        from ..random import default_generator

        outside = default_generator._state()
        default_generator._restore(mark.state)
        prev, self.replay = self.replay, [(t, v if mark.tracer is self else None)
                                          for t, v in mark.tracer.draws[mark.drawn:]]
        try:
            yield
        finally:
            self.replay = prev
            default_generator._restore(outside)

    def _replay_draw(self, arr) -> None:
        if self.replay:
            drawn, v = self.replay.pop(0)
            d = drawn._data
            if d.shape == arr.shape and d.dtype == arr.dtype and bool((d == arr).all()):
                if v is None:  # the forward's tensor, read by this (backward) trace
                    v = self.var(drawn)
                self.vars[id(arr)] = v
                self.keep.append(arr)
                if self.writes_to:
                    self.view_of[id(arr)] = self.writes_to.get(id(_root(arr)), 0)
                return
        self.graph_break("a checkpointed function's recomputation draws random numbers its "
                         "forward did not (a generator other than the default one)")

    def on_effect(self, name: str, out, inputs, impl, what: str, places=None) -> None:
        """``out = impl(*inputs' arrays)`` ran and acted on the outside world (a collective):
        an effect equation (``ir.is_effect``) that the plan runs again, in this place, at
        every call. ``what`` describes it (kept in its params: ``effect``); ``places``:
        where the plan should compute its inputs (``run_effect``), kept as ``places``."""
        ins = tuple(self.var(x) for x in inputs)
        v = self._new_var(out._data, "op")
        params = {"effect": what}
        if places is not None:
            params["places"] = tuple(places)
        self.graph.eqns.append(Eqn(name, ins, v, params, None, impl))

    def on_read_setting(self, read, value) -> None:
        """A process setting read by the function (``get_num_threads()``): a Python value
        the plan bakes in, so each call checks ``read() == value`` (a change retraces)."""
        self.setting_reads.setdefault(read, value)

    def on_created(self, arr) -> None:
        """An array wrapped outside any op (checked if the function later uses it)."""
        self.untraced.add(id(arr))
        self.keep.append(arr)

    def on_write(self, dst, src) -> None:
        """``dst``'s memory now holds ``src``'s value (an in-place op)."""
        if dst._base is not None and dst._data is not getattr(dst._base, "_data", None):
            self._write_into_view(dst, src)
            return
        arr = dst._data
        vc = dst._vc  # called before the write bumps it (and rebases dst's history)
        self.saved_versions.setdefault(id(vc), (vc, vc[0]))
        old = self.vars.get(id(arr))
        if old is None:
            old = self.var(dst)
        if id(arr) in self.sources and id(dst) not in self.saved_history:
            self.saved_history[id(dst)] = (dst, dst._grad_fn, dst._requires_grad,
                                           dst._output_nr)
        if id(arr) in self.sources and id(arr) not in self.saved_arrays:
            self.saved_arrays[id(arr)] = (arr, arr.copy())  # called before the write
        new = self.var(src)
        r = id(_root(arr))  # (counted per memory: an argument may view a larger array)
        self.written_arrays.setdefault(r, []).append(arr)
        self.writes_to[r] = self.view_of[id(arr)] = len(self.written_arrays[r])
        if new.shape != old.shape or np.dtype(new.dtype) != np.dtype(old.dtype):
            new = self._cast_broadcast(new, old)
        self.vars[id(arr)] = new
        src_desc = self.sources.get(id(arr))
        if src_desc is not None:
            self.written[id(arr)] = src_desc

    def _write_into_view(self, view, src) -> None:
        """An in-place op on a view (``h[:, :2].mul_(3)``, ``y[:, -1].zero_()``): the base's
        new value is its old one with ``src`` (cast and broadcast as the write does) put at
        the view's elements -- their flat positions in the base, read from the memory
        layout as eager autograd's ``CopySlices`` reads them -- recorded as ops (a constant
        index, ``index_put``), then written into the base; the view reads ``src``."""
        from ..autograd import grad_mode
        from ..autograd.view_history import _layout, flat_positions
        from ..creation import tensor
        from ..ops.index_updates import index_put

        base = view._base
        barr, varr = base._data, view._data
        pos = flat_positions(_layout(barr), _layout(varr), varr.dtype.itemsize).reshape(-1)
        with grad_mode.no_grad():
            value = src if src.dtype is view.dtype else src.to(view.dtype)
            if tuple(value.shape) != tuple(varr.shape):
                value = value.expand(varr.shape)
            new_base = index_put(base.reshape(-1), (tensor(pos, device=base.device),),
                                 value.reshape(-1)).reshape(barr.shape)
        self.on_write(base, new_base)
        # the view's own Var: the value written (read after the write, it is not stale)
        self.vars[id(varr)] = self.var(value)
        self.keep.append(varr)
        self.view_of[id(varr)] = self.writes_to.get(id(_root(varr)), 0)

    def _reread_view(self, view) -> Var | None:
        """The Var of ``view`` read again after its base was written in place (``v =
        b[:, :2]; b.mul_(2); v * 3``): the base's current value at the view's elements --
        their flat positions in the base, from the memory layout, as
        :meth:`_write_into_view` finds them -- gathered by recorded ops (a constant index).
        None where that does not apply (no base tensor over the same memory, a view of
        another dtype): the caller breaks the graph."""
        from ..autograd import grad_mode
        from ..autograd.view_history import _layout, flat_positions
        from ..creation import tensor

        base = getattr(view, "_base", None)
        varr = view._data
        if base is None or base._data.dtype != varr.dtype or _root(base._data) is not _root(
                varr) or type(varr) is not np.ndarray:
            return None
        barr = base._data
        pos = flat_positions(_layout(barr), _layout(varr), varr.dtype.itemsize)
        active = STATE.tracer
        STATE.tracer = self  # (read at the end too, for an output: the ops are recorded)
        try:
            with grad_mode.no_grad():
                value = base.reshape(-1)[tensor(pos.reshape(-1))].reshape(varr.shape)
        finally:
            STATE.tracer = active
        v = self.var(value)
        self.vars[id(varr)] = v
        self.view_of[id(varr)] = self.writes_to.get(id(_root(varr)), 0)
        return v

    def _cast_broadcast(self, v: Var, like: Var) -> Var:
        from ..ops.registry import REGISTRY

        if np.dtype(v.dtype) != np.dtype(like.dtype):
            out = Var(self.n, v.shape, like.dtype)
            self.n += 1
            self.graph.eqns.append(Eqn(REGISTRY["to_dtype"], (v,), out,
                                       {"dtype": np.dtype(like.dtype), "in_dtype": v.dtype}))
            v = out
        if v.shape != like.shape:
            out = Var(self.n, like.shape, like.dtype)
            self.n += 1
            self.graph.eqns.append(Eqn(REGISTRY["expand"], (v,), out,
                                       {"shape": like.shape, "in_shape": v.shape}))
            v = out
        return v

    def leaf_source(self, leaf) -> Source:
        """Where a plan finds ``leaf`` at run time: the call's argument (each call passes its
        own tensor, whose ``.grad`` the plan reads and sets) or the captured tensor."""
        k = self.arg_index.get(id(leaf))
        if k is not None:
            return Source("arg", index=k)
        return Source("tensor", obj=leaf, name=self.names.get(id(leaf)) or "leaf")

    def note_leaf_grad(self, leaf, read: bool = True) -> None:
        """Guard a leaf's ``.grad`` state as the function first saw it — unless the function
        overwrote it before reading it (then the incoming state does not matter)."""
        k = id(leaf)
        if k in self.inner_leaves or (k not in self.grad_guards and self.made_in_call(leaf)):
            # a leaf of the call's own (``x.detach().requires_grad_()``): its .grad starts
            # unset at every call, and only the call's values reach it -- nothing to guard,
            # read from outside or set by the plan
            self.inner_leaves.add(k)
            self.keep.append(leaf)
            return
        if k not in self.saved_grads:  # called before the trace changes leaf._grad
            self.saved_grads[k] = (leaf, leaf._grad)
        if k not in self.grad_guards:
            if read:
                g = leaf._grad
                state = None if g is None else (g._data.shape, g._data.dtype)
            else:
                state = _ANY
            self.grad_guards[k] = (leaf, state, self.leaf_source(leaf))
            self.keep.append(leaf)

    def reads_strides(self, what: str) -> None:
        """User code reads strides: fixed by the key (shapes and layouts: C, F, other)
        unless an argument is laid out some other way -- its strides, and its views', are
        then the traced call's (a graph break)."""
        if self.strided_inputs:
            self.graph_break(f"{what} with a non-contiguous argument")

    def argument_state(self, t, what: str) -> None:
        """User code reads an argument's autograd state (``.grad_fn``, ``.is_leaf``,
        ``._version``, ``storage_offset()``): a graph break -- a plan would keep the traced
        call's, not the next call's argument's (the key holds shapes, dtypes,
        requires_grad)."""
        src = self.sources.get(id(t._data))
        if src is not None and src.kind == "arg":
            self.graph_break(f"{what} of an argument")

    def on_requires_grad(self, t) -> None:
        """User code flips ``requires_grad`` of ``t``: a graph break for a tensor that existed
        before the call (an argument, a captured tensor), whose flag a plan would not set
        again at later calls; a tensor the call made is a leaf of its own (see
        ``jit/autograd_state.py``)."""
        if not self.made_in_call(t):
            self.graph_break("requires_grad of a tensor that exists outside the call changes")

    def on_detach(self, t, of=None) -> None:
        """``t`` is a ``detach()`` (or ``.data``) made by the call over the array of tensor
        ``of``. Held by weak references: a strong one would count as an outside holder of its
        array (``escaped_values``)."""
        self.detached[id(t)] = weakref.ref(t)
        if of is not None:
            self.detach_origins[id(t)] = (weakref.ref(t), weakref.ref(of))

    def made_in_call(self, t) -> bool:
        """Whether tensor ``t`` was made by the traced call (by an op, a factory, a
        ``detach()``), not passed in or captured."""
        ref = self.detached.get(id(t))
        if ref is not None and ref() is t:
            return True
        k = id(t._data)
        if k not in self.vars:  # a tensor no op has read yet: made outside, or untraced
            return k in self.untraced
        # (``x.detach()`` shares x's array: a tensor of the call's own)
        src = self.sources.get(k)
        return not (id(t) in self.arg_index or (
            src is not None and src.kind == "tensor" and src.obj is t))

    def on_read_grad(self, leaf, g) -> None:
        self.note_leaf_grad(leaf)
        if id(leaf) in self.inner_leaves:
            return
        if g is not None and id(g._data) not in self.vars:
            ref = self.grad_guards[id(leaf)][2]
            if ref.kind == "arg":
                src = Source("grad", index=ref.index)
            else:
                src = Source("grad", obj=leaf, name=self.names.get(id(leaf)) or
                             f"captured{len(self.graph.externals)}")
            self._add_external(g._data, src)

    def on_set_grad(self, leaf, g) -> None:
        self.note_leaf_grad(leaf, read=False)
        if id(leaf) in self.inner_leaves:
            return
        if g is not None and g._requires_grad:
            # (a plan sets values, without autograd history)
            self.graph_break("a .grad that carries autograd history (backward(create_graph="
                             "True), or assigning a tensor that requires grad) is set")
            return
        # the tensor is kept: in-place ops on the new .grad later in the call (a second
        # backward accumulating, gradient clipping) change its value; finish() reads it
        self.grad_sets[id(leaf)] = (leaf, None if g is None else self.var(g), g)

    def on_backward(self) -> None:
        self.backward_runs += 1

    def made(self, obj) -> None:
        """``obj`` was made by the traced call (a custom Function's ctx): attributes user
        code sets on it are the call's own state, not a side effect on outside objects."""
        self.made_here[id(obj)] = obj

    def on_custom_function(self, cls) -> None:
        """A custom ``autograd.Function`` recorded its node on outputs (its forward's ops were
        traced; its backward runs when the engine reaches it)."""

    def escape(self, what: str):
        """Python code needs a tensor's value: a graph break. An error under
        ``compile(fullgraph=True)``; otherwise tracing stops and the call finishes eagerly."""
        self._stop(ValueEscape, (
            f"{user_location()}: {what} needs the value of a tensor while jitgrad.compile is "
            "tracing; data-dependent Python control flow cannot be compiled (use "
            "jitgrad.where, or move this code out of the compiled function, or compile "
            "without fullgraph=True to run such calls eagerly)"))

    def graph_break(self, what: str, where: str | None = None) -> None:
        """Python code the trace cannot capture faithfully is about to run (a hook, a side
        effect on outside state, a call to ``random``/``time``): an error under
        ``fullgraph=True``; otherwise tracing stops here and the call finishes eagerly, so
        the code runs with the real values, once, as in eager mode."""
        self._stop(GraphBreak, (
            f"{where or user_location()}: {what}; jitgrad.compile runs the function eagerly "
            "where such code runs at every call (a graph break; fullgraph=True raises)"))

    def _stop(self, error: type, msg: str) -> None:
        if self.escape_policy != "eager":
            raise error(msg)
        self.escaped = msg
        STATE.tracer = None

    # ---------------------------------------------------------------------- undo
    def undo(self) -> None:
        """Take the traced call's effects on existing state back: arrays written in place
        get their old contents, leaves their old ``.grad``, generators their old state (the
        compiled plan then runs the call: it computes the values every later call gets),
        written tensors their old version (the plan bumps them: ``Graph.bumps``) and history."""
        for arr, old in self.saved_arrays.values():
            np.copyto(arr, old)
        for leaf, g in self.saved_grads.values():
            leaf._grad = g
        for gen, state in self.saved_rng:
            gen._restore(state)
        for vc, version in self.saved_versions.values():
            vc[0] = version
        for t, fn, req, nr in self.saved_history.values():
            t._grad_fn, t._requires_grad = fn, req
            if nr != t._output_nr:
                t._output_nr = nr
        self.saved_arrays.clear()
        self.saved_grads.clear()
        self.saved_versions.clear()
        self.saved_history.clear()

    def release(self) -> None:
        """Drop the trace's references to the arrays it saw (after the graph is compiled:
        the first run of its plan then peaks at the plan's memory, not the plan's plus the
        trace's)."""
        self.keep.clear()
        self.vars.clear()
        self.sources.clear()
        self.saved_arrays.clear()
        self.saved_grads.clear()
        self.grad_sets.clear()
        self.grad_guards.clear()

    def escaped_values(self) -> list:
        """``(array, Var)`` of the arrays the traced call created that something outside the
        trace still holds (a tensor the function stored: optimizer state made by a first
        step, a list it appended to...): the plan computes them on its first run too, so they
        hold the compiled values. Found by reference counts: the trace's own references (its
        ``keep`` list and views' bases) are known; any other means an outside holder."""
        import sys
        from collections import Counter

        own = Counter(id(a) for a in self.keep)
        for a in self.keep:
            base = getattr(a, "base", None)
            if base is not None:
                own[id(base)] += 1
        # tensors in the graph's own params (max pooling's argmax positions, which its VJP
        # reads) hold their array once; a tensor someone else holds as well still counts
        in_params = Counter()
        for e in self.graph.eqns:
            for t in e.params.values():
                if hasattr(t, "_data") and _is_array(t._data):
                    in_params[id(t)] += 1
        for e in self.graph.eqns:
            for t in e.params.values():
                if in_params.get(id(t)) and sys.getrefcount(t) <= in_params[id(t)] + 2:
                    own[id(t._data)] += 1
                    in_params[id(t)] = 0  # counted once
        out, seen = [], set()
        for a in self.keep:
            # (an argument or captured array written in place existed before the call: its
            # Var is the written value, but the array is not one the call created)
            if not _is_array(a) or id(a) in seen or id(a) in self.sources:
                continue
            seen.add(id(a))
            v = self.vars.get(id(a))
            # getrefcount's argument and this loop's name are the two references added here;
            # a read-only array is a view (a broadcast): its base, if kept, is found itself
            # (CuPy arrays have no writeable flag)
            if (v is not None and v.kind == "op" and getattr(a.flags, "writeable", True)
                    and sys.getrefcount(a) > own[id(a)] + 2):
                out.append((a, v))
        return out

    # --------------------------------------------------------------------- result
    def finish(self, outputs) -> Graph:
        for src, value in self.scalar_reads:
            if not np.array_equal(src.read([]), value):
                # the plan reads it once, at its start: an LR scheduler stepped after the
                # optimizer step it feeds, in the same call, would reach that step
                self.graph_break(f"{src.describe()} is read and later changed within the call "
                                 "(a learning-rate scheduler stepped inside the function)",
                                 where="jitgrad.compile")
                break
        g = self.graph
        g.names = self.names
        g.outputs = [self.var(t) for t in outputs]
        for k, src in self.written.items():
            g.writes.append((src, self.vars[k]))
        own = {id(v.source): v for v in list(g.inputs) + list(g.externals)}
        for leaf, v, t in self.grad_sets.values():
            ref = self.grad_guards[id(leaf)][2]
            if t is not None:
                src = self.sources.get(id(t._data))
                # an argument or captured tensor, even written in place: that tensor (its
                # write-back comes first), as eager's ``p.grad = t``; else its current value
                v = own[id(src)] if src is not None and src.kind != "scalar" \
                    else self.vars[id(t._data)]
            g.grad_sets.append((ref, v))
        self.grad_sets.clear()  # the tensors: escaped_values() must not count them
        if check_ir() and self.escaped is None:  # (escaped: the graph is not used)
            g.check()
        return g
