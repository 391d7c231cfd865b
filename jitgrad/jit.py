"""``jitgrad.compile``: trace a function per input signature, compile the graph, plug it into
eager autograd.

A call is keyed by its argument structure, shapes, dtypes, requires_grad mask and grad mode; an
entry also guards what the trace read from outside (captured tensors, leaves' ``.grad``
states, the identity of tensors/modules in the function's closure and globals). A miss traces
the function (running it eagerly — the first call *is* an eager call), compiles the graph into
a plan, and later calls run the plan.

If outputs require grad (and the function did not call ``.backward()`` itself), the backward
graph is traced too, by running the eager engine over the traced forward: the outputs get one
``CompiledFunctionBackward`` node that runs the compiled backward.
"""

from __future__ import annotations

import functools
import threading
import warnings

from . import call_path, config
from .autograd import grad_mode
from .autograd.node import FREED_MESSAGE, Node, node_class, save_input
from .tensor import Tensor, wrap
from .trace.pytree import flatten
from .trace.state import STATE as _TRACE
from .trace.tracer import Tracer

__all__ = ["compile", "CompiledFunction", "explain", "grad", "value_and_grad"]

MAX_RETRACES_BEFORE_WARNING = 8


def _log(topic: str, msg: str) -> None:
    if topic in config.log_topics():
        print(f"[jitgrad:{topic}] {msg}", flush=True)


class CompiledFunctionBackwardBase(Node):
    """The autograd node of a compiled call's outputs: runs the compiled backward plan."""

    __slots__ = ()

    def apply(self, grads: list) -> tuple:
        if grad_mode.STATE.enabled:
            raise RuntimeError(
                "jitgrad.compile: double backward (create_graph=True) through a compiled "
                "function is not supported; call the function uncompiled for higher-order "
                "gradients"
            )
        if self.saved is None:
            raise RuntimeError(FREED_MESSAGE)
        return self._entry.run_backward(self, grads)


CompiledFunctionBackward = node_class("CompiledFunctionBackward", CompiledFunctionBackwardBase)


class _JointOutputBase(Node):
    """Node of an output computed in a compiled function that itself ran backward()/grad():
    its graph was differentiated inside the plan; differentiating it again needs the
    uncompiled function."""

    __slots__ = ()

    def apply(self, grads: list) -> tuple:
        raise RuntimeError(
            "jitgrad.compile: this output comes from a compiled function that calls "
            "backward()/autograd.grad() itself; its graph was already differentiated inside "
            "the compiled plan (higher-order gradients through a compiled function are not "
            "supported): call the function uncompiled to differentiate its result again"
        )


_JointOutput = node_class("CompiledFunctionBackward", _JointOutputBase)


def _mark_joint_output(t: Tensor, edges: tuple) -> None:
    from .autograd.node import new_node

    t._requires_grad = True
    t._grad_fn = new_node(_JointOutput, edges, None, None)


class _Entry:
    """One traced signature: forward (and backward) graphs and their plans."""

    def __init__(self, fn_name, graph, out_tree, guards, grad_info, closure_ids, cache_dir):
        from .compiler import build_plan

        self.graph = graph
        self.graph_text = str(graph)    # as traced (the plan optimises the graph in place)
        self.out_tree = out_tree
        self.guards = guards            # externals / grad states to re-check each call
        self.closure_ids = closure_ids
        self.grad_info = grad_info      # None, or the backward description
        self.backward_text = str(grad_info.graph) if grad_info is not None else None
        self.plan = build_plan(graph, grad_info.residuals if grad_info else (), cache_dir)
        self.bplan = build_plan(grad_info.graph, (), cache_dir) if grad_info else None
        self.fn_name = fn_name

    def guards_hold(self) -> str | None:
        """None when every guard holds, else the first failing guard, in words."""
        for check in self.guards:
            why = check()
            if why:
                return why
        return None

    joint = False
    joint_outputs: list = []
    fast = None  # the generated cache-hit path (call_path.py), made at the first hit

    def finish(self, grad_enabled: bool) -> None:
        """Make ``run(flat)`` (the plan, output tensors, autograd glue, output structure:
        ``call_path.entry_run``) once the entry is complete (``joint`` is known)."""
        self.run = call_path.entry_run(self, grad_enabled)

    # --------------------------------------------------------------- autograd glue
    def _attach_backward(self, flat, tensors, residual_arrays):
        gi = self.grad_info
        diff = [flat[i] if kind == "arg" else obj for kind, i, obj in gi.diff_inputs]
        if not any(t._requires_grad for t in diff):
            return
        node = object.__new__(CompiledFunctionBackward)
        node.next_edges = tuple(
            (t if t._grad_fn is None else (t._grad_fn, t._output_nr)) if t._requires_grad
            else None for t in diff)
        node.in_meta = tuple((t._data.shape, t._data.dtype) for t in diff)
        from .autograd.node import _seq

        node.seq = next(_seq)
        # residuals: arrays computed by this call, plus inputs/captured tensors the backward
        # reads (saved with their version, so in-place changes before backward are caught)
        node.saved = tuple(residual_arrays) + tuple(
            save_input(flat[i] if kind == "arg" else obj) for kind, i, obj in gi.ext_residuals)
        node._entry = self
        node.n_outputs = len(tensors)
        node._out_meta = tuple((t._data.shape, t._data.dtype) for t in tensors)
        for i, t in enumerate(tensors):
            if i in gi.diff_outputs:
                t._requires_grad = True
                t._grad_fn = node
                if i:
                    t._output_nr = i

    def run_backward(self, node, grads) -> tuple:
        from .autograd.node import unpack
        from .creation import zeros

        gi = self.grad_info
        n_res = len(gi.residuals)
        saved = node.saved
        residual_arrays = list(saved[:n_res])
        ext = [unpack(e, node)._data for e in saved[n_res:]]
        cots = []
        for i in gi.diff_outputs:
            g = grads[i]
            if g is None:
                shape, dtype = node._out_meta[i]
                from .dtypes import from_numpy_dtype

                g = zeros(shape, dtype=from_numpy_dtype(dtype))
            cots.append(g._data)
        arrays = self.bplan.run_arrays(cots + residual_arrays + ext)
        return tuple(None if a is None else wrap(a) for a in arrays)


class _GradInfo:
    """How a forward entry's backward is wired: which outputs/inputs are differentiable and
    which forward values the backward graph reads."""

    def __init__(self):
        self.graph = None
        self.diff_outputs: list[int] = []
        self.diff_inputs: list = []      # ("arg", i, None) | ("ext", -1, tensor)
        self.residuals: list = []        # forward Vars the backward reads
        self.ext_residuals: list = []    # inputs/captured tensors the backward reads


class CompiledFunction:
    """A function compiled by :func:`compile` (see there)."""

    def __init__(self, fn, backend: str = "auto", fallback: str = "error", cache_dir=None):
        if backend not in ("auto", "cpu", "cuda"):
            raise ValueError(f"backend must be 'auto', 'cpu' or 'cuda', got {backend!r}")
        if backend == "cuda":
            raise NotImplementedError(
                "backend='cuda' is reserved for jitgrad's CUDA backend, which has not landed "
                "yet; use backend='cpu' (or 'auto')"
            )
        if fallback not in ("error", "eager"):
            raise ValueError(f"fallback must be 'error' or 'eager', got {fallback!r}")
        self.fn = fn
        self.backend = backend
        self.fallback = fallback
        self.cache_dir = cache_dir
        self._entries: dict = {}
        self._eager_keys: set = set()
        self.stats = {"calls": 0, "traces": 0, "retraces": 0, "cache_hits": 0}
        self.last_retrace_reason: str | None = None
        self._warned = False
        self._last_key = None
        self._fast = None  # call_path's fast path of the last entry hit
        self._lock = threading.RLock()  # one trace at a time; plans run concurrently
        self._closure = _ClosureGuard(fn)
        functools.update_wrapper(self, fn, updated=())
        if not hasattr(self, "__name__"):  # a Module-like callable
            self.__name__ = type(fn).__name__

    def __get__(self, obj, objtype=None):  # decorating methods
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    # ------------------------------------------------------------------------ calls
    def _key(self, flat, treedef) -> tuple:
        return (treedef, tuple([(t._data.shape, t._data.dtype, t._requires_grad,
                                 bool(t._hooks)) for t in flat]),
                grad_mode.STATE.enabled)

    def __call__(self, *args, **kwargs):
        fast = self._fast
        if fast is not None and not kwargs:  # the newest hit's generated path, if it fits
            out = fast(args)
            if out is not call_path.MISS:
                return out
        self.stats["calls"] += 1
        if _TRACE.tracer is not None:  # nested compiled call: inline into the outer trace
            return self.fn(*args, **kwargs)
        key = None
        tensor_args = False  # positional tensors only: the generated fast path applies
        if not kwargs:  # the common case, tensor arguments only: the key in one pass
            items = []
            for a in args:
                if type(a) is not Tensor:
                    break
                d = a._data
                items.append((d.shape, d.dtype, a._requires_grad, bool(a._hooks)))
            else:
                flat = list(args)
                treedef = _TENSOR_ARGS_TREES.get(len(args)) or _tensor_args_tree(len(args))
                key = (treedef, tuple(items), grad_mode.STATE.enabled)
                tensor_args = True
        if key is None:
            flat, treedef = flatten((args, kwargs))
            key = self._key(flat, treedef)
        if self._eager_keys and key in self._eager_keys:
            return self.fn(*args, **kwargs)
        closure_ids = self._closure.current()
        entries = self._entries.get(key)
        if entries:  # fast path: the newest entry of this key, guards holding
            entry = entries[0]
            if entry.closure_ids == closure_ids and (not entry.guards or
                                                     entry.guards_hold() is None):
                self.stats["cache_hits"] += 1
                if tensor_args:
                    self._fast = self._fast_path(entry, key)
                return entry.run(flat)
        entry, reason = self._lookup(key, closure_ids)
        if entry is None:
            with self._lock:  # one trace at a time; a thread that waited may find it done
                entry, reason = self._lookup(key, closure_ids)
                if entry is None:
                    return self._trace(args, kwargs, flat, key, closure_ids, reason)
        self.stats["cache_hits"] += 1
        return entry.run(flat)

    def _fast_path(self, entry, key):
        if entry.fast is None:
            entry.fast = call_path.entry_fast(entry, key, self._closure, self.stats)
        return entry.fast

    def _lookup(self, key, closure_ids):
        """``(entry, None)`` on a hit; ``(None, why)`` on a miss."""
        entries = self._entries.get(key)
        if not entries:
            return None, (self._why_new_key(key) if self._entries else None)
        reason = None
        for entry in entries:
            if entry.closure_ids != closure_ids:
                reason = ("what the function refers to changed (a tensor or module rebound, "
                          "a module's train/eval mode, an optimizer hyper-parameter, a number)")
                continue
            why = entry.guards_hold()
            if why is None:
                return entry, None
            reason = why
        return None, reason

    def _why_new_key(self, key) -> str:
        old = self._last_key
        if old is None:
            return "new signature"
        if old[0] != key[0]:
            return "argument structure or non-tensor arguments changed"
        if old[2] != key[2]:
            return f"grad mode changed ({old[2]} -> {key[2]})"
        for i, (a, b) in enumerate(zip(old[1], key[1])):
            if a != b:
                what = ("shape", "dtype", "requires_grad", "hooks")
                for name, x, y in zip(what, a, b):
                    if x != y:
                        return f"argument tensor {i}: {name} changed {x} -> {y}"
        return "number of tensor arguments changed"

    def _trace(self, args, kwargs, flat, key, closure_ids, reason):
        self.stats["traces"] += 1
        if reason is not None:
            self.stats["retraces"] += 1
            self.last_retrace_reason = reason
            _log("recompiles", f"{self.__name__}: retrace #{self.stats['retraces']}: {reason}")
            if self.stats["retraces"] > MAX_RETRACES_BEFORE_WARNING and not self._warned:
                self._warned = True
                warnings.warn(
                    f"jitgrad.compile: {self.__name__} was retraced "
                    f"{self.stats['retraces']} times; last guard that failed: {reason}",
                    UserWarning, stacklevel=3)
        self._last_key = key
        tracer = Tracer(name=getattr(self.fn, "__name__", "fn"), names=_closure_names(self.fn))
        tracer.escape_policy = self.fallback
        for i, t in enumerate(flat):
            tracer.add_input(t, i)
        _TRACE.tracer = tracer
        try:
            result = self.fn(*args, **kwargs)
        finally:
            _TRACE.tracer = None
        if tracer.escaped is not None:
            warnings.warn(f"jitgrad.compile: running {self.__name__} eagerly: {tracer.escaped}",
                          UserWarning, stacklevel=3)
            self._eager_keys.add(key)
            self._fast = None  # this key now runs eagerly: the generic path decides
            return result
        out_flat, out_tree = flatten(result)
        graph = tracer.finish(out_flat)
        grad_info = None
        if (grad_mode.STATE.enabled and tracer.backward_runs == 0
                and any(t._requires_grad for t in out_flat)):
            grad_info = _trace_backward(tracer, graph, flat, out_flat)
        _log("graph", f"{self.__name__}:\n{graph}")
        if grad_info is not None:
            _log("graph", f"{self.__name__} backward:\n{grad_info.graph}")
        guards = _guards(graph, tracer)
        entry = _Entry(self.__name__, graph, out_tree, guards, grad_info, closure_ids,
                       self.cache_dir)
        self._entries.setdefault(key, []).insert(0, entry)
        if tracer.backward_runs:
            # backward()/grad() ran inside: outputs of later calls carry no history (the
            # first call returns the eager results, which do)
            entry.joint = True
            entry.joint_outputs = [i for i, t in enumerate(out_flat) if t._requires_grad]
        entry.finish(key[2])
        return result

    # ------------------------------------------------------------------- debugging
    def lower(self, *args, **kwargs) -> Lowered:
        """The traced graph, backward graph, fusion groups and generated source for these
        arguments (traces them if needed)."""
        flat, treedef = flatten((args, kwargs))
        key = self._key(flat, treedef)
        if key not in self._entries:
            self(*args, **kwargs)
        entry = self._entries[key][0]
        return Lowered(entry)


class Lowered:
    """What :meth:`CompiledFunction.lower` returns."""

    def __init__(self, entry: _Entry) -> None:
        self.entry = entry
        self.graph = entry.graph_text
        self.backward_graph = entry.backward_text
        self.fusion_groups = entry.plan.describe_groups() + (
            entry.bplan.describe_groups() if entry.bplan else [])
        self.source = entry.plan.source() + (entry.bplan.source() if entry.bplan else "")

    def __str__(self) -> str:
        parts = ["== graph ==", self.graph]
        if self.backward_graph:
            parts += ["== backward graph ==", self.backward_graph]
        parts += ["== fusion groups =="] + self.fusion_groups
        parts += ["== generated source ==", self.source or "(no generated kernels)"]
        return "\n".join(parts)


def _trace_backward(tracer: Tracer, graph, flat, out_flat) -> _GradInfo:
    """Trace the backward of the traced forward by running the eager engine over it."""
    from .autograd.engine import grad as autograd_grad
    from .creation import ones_like

    gi = _GradInfo()
    diff_tensors = []
    for i, t in enumerate(flat):
        if t._requires_grad:
            gi.diff_inputs.append(("arg", i, None))
            diff_tensors.append(t)
    for v in graph.externals:
        src = v.source
        if src.kind == "tensor" and src.obj._requires_grad:
            gi.diff_inputs.append(("ext", -1, src.obj))
            diff_tensors.append(src.obj)
    outs = [t for t in out_flat if t._requires_grad]
    gi.diff_outputs = [i for i, t in enumerate(out_flat) if t._requires_grad]
    bt = Tracer(name=graph.name + "_backward")
    cots = [ones_like(t) for t in outs]
    for i, c in enumerate(cots):
        bt.add_input(c, i)
    _TRACE.tracer = bt
    try:
        grads = autograd_grad(outs, diff_tensors, grad_outputs=cots, retain_graph=True,
                              allow_unused=True, _raw_inputs=True)
    finally:
        _TRACE.tracer = None
    from .creation import zeros_like

    # unused inputs get zero gradients (a constant of the backward graph)
    _TRACE.tracer = bt
    try:
        grads = [g if g is not None else zeros_like(t) for g, t in zip(grads, diff_tensors)]
    finally:
        _TRACE.tracer = None
    bgraph = bt.finish(grads)
    # backward externals: forward values (residuals) or inputs / captured tensors
    fwd_vars = tracer.vars
    arg_pos = {id(t._data): i for i, t in enumerate(flat)}
    res_inputs, ext_inputs = [], []
    for v in bgraph.externals:
        arr = v.source.obj._data if v.source.kind == "tensor" else None
        fv = fwd_vars.get(id(arr)) if arr is not None else None
        if fv is not None and fv.kind in ("op", "const"):
            gi.residuals.append(fv)
            res_inputs.append(v)
        elif arr is not None and id(arr) in arg_pos:
            gi.ext_residuals.append(("arg", arg_pos[id(arr)], None))
            ext_inputs.append(v)
        else:
            gi.ext_residuals.append(("ext", -1, v.source.obj))
            ext_inputs.append(v)
    # the backward graph's inputs: cotangents, residual arrays, input/captured arrays
    bgraph.inputs = list(bgraph.inputs) + res_inputs + ext_inputs
    bgraph.externals = []
    for k, v in enumerate(bgraph.inputs):
        v.kind = "in"
        v.source = None
        v.n_in = k
    gi.graph = bgraph
    return gi


def _guards(graph, tracer) -> list:
    """Checks (returning a reason string on failure) for state read from outside the args."""
    checks = []
    for v in graph.externals:
        src = v.source
        if src.kind == "tensor":
            t = src.obj
            shape, dtype, req, name = v.shape, v.dtype, t._requires_grad, src.describe()

            def chk(t=t, shape=shape, dtype=dtype, req=req, name=name):
                if t._data.shape != shape or t._data.dtype != dtype:
                    return (f"captured tensor {name} changed shape/dtype "
                            f"{shape} -> {t._data.shape}")
                if t._requires_grad != req:
                    return f"captured tensor {name}: requires_grad changed"
                return None
            checks.append(chk)
    for leaf, state in tracer.grad_guards.values():
        if state == "any":
            continue

        def chk(leaf=leaf, state=state):
            g = leaf._grad
            now = None if g is None else (g._data.shape, g._data.dtype)
            if now != state:
                return f".grad of a leaf went from {state} to {now}"
            return None
        checks.append(chk)
    return checks


_TENSOR_ARGS_TREES: dict = {}


def _tensor_args_tree(n: int) -> tuple:
    """The treedef flatten() gives ``(args, {})`` for ``n`` tensor arguments."""
    tree = flatten((tuple(Tensor.__new__(Tensor) for _ in range(n)), {}))[1]
    _TENSOR_ARGS_TREES[n] = tree
    return tree


class _ClosureGuard:
    """Reads, at every call, the state of what the function refers to that a trace bakes in:
    identities of tensors, of modules' parameters (and their ``training`` flag), of
    optimizers' parameters and their scalar hyper-parameters (``lr``...), and plain numbers
    in the closure and referenced globals. The slots to read are found once."""

    def __init__(self, fn) -> None:
        self.module = fn if _is_module(fn) else None
        target = getattr(type(fn), "forward", fn) if self.module is not None else fn
        code = getattr(target, "__code__", None)
        self.slots: list = []
        if code is None:
            return
        for cell in getattr(target, "__closure__", None) or ():
            if _cell_ok(cell) and _relevant(cell.cell_contents):
                self.slots.append((cell, None))
        g = getattr(target, "__globals__", {})
        for n in code.co_names:
            if n in g and _relevant(g[n]):
                self.slots.append((g, n))

    def current(self) -> tuple:
        out = []
        if self.module is not None:
            out.append(_state_of(self.module))
        for holder, name in self.slots:
            if name is None:
                obj = holder.cell_contents if _cell_ok(holder) else None
            else:
                obj = holder.get(name)
            out.append(_state_of(obj))
        return tuple(out)

    def fast_checks(self, expected: tuple, ns: dict) -> list:
        """Source lines that ``return MISS`` unless ``current() == expected`` (an entry's
        call path, ``call_path.py``): tensors and plain numbers are compared inline, other
        objects through ``_state_of``. Reading an emptied cell raises ValueError."""
        ns["STATE_OF"] = _state_of
        lines = []
        reads = []
        if self.module is not None:
            ns["CMOD"] = self.module
            reads.append("CMOD")
        for j, (holder, name) in enumerate(self.slots):
            ns[f"CH{j}"] = holder
            reads.append(f"CH{j}.cell_contents" if name is None else f"CH{j}.get({name!r})")
        for j, (read, exp) in enumerate(zip(reads, expected)):
            ns[f"CE{j}"] = exp
            lines.append(f"o = {read}")
            if type(exp) is int:  # a tensor, by identity
                lines.append(f"if id(o) != CE{j} or not isinstance(o, Tensor):")
            elif (type(exp) is tuple and exp[0] == "n" and type(exp[1]) in (int, float, bool)
                  and exp[1] == exp[1]):
                ns[f"CT{j}"], ns[f"CV{j}"] = type(exp[1]), exp[1]
                lines.append(f"if type(o) is not CT{j} or o != CV{j}:")
            else:
                lines.append(f"if STATE_OF(o) != CE{j}:")
            lines.append("    return MISS")
        return lines


def _is_module(o) -> bool:
    return hasattr(o, "parameters") and callable(getattr(o, "parameters", None)) and \
        not isinstance(o, type) and not isinstance(o, Tensor)


def _relevant(o) -> bool:
    return (isinstance(o, (Tensor, int, float, bool)) or _is_module(o)
            or hasattr(o, "param_groups"))


def _state_of(o):
    if isinstance(o, Tensor):
        return id(o)
    if isinstance(o, (int, float, bool)) or o is None:
        return ("n", o)
    if isinstance(getattr(o, "_modules", None), dict) and \
            isinstance(getattr(o, "_parameters", None), dict):
        return ("m", _module_state(o))
    if _is_module(o):
        try:
            return ("m", tuple(id(p) for p in o.parameters()),
                    tuple(getattr(m, "training", None) for m in _modules(o)))
        except TypeError:
            return ("m", id(o))
    if hasattr(o, "param_groups"):
        dynamic = ("params", *getattr(o, "traced_hyperparameters", ()))  # read at every call
        state = getattr(o, "state", {})
        return ("o", tuple(
            (id(grp),  # traced hyper-parameters are read from this very dict at every call
             tuple(id(p) for p in grp["params"]),
             tuple((k, v) for k, v in grp.items()
                   if k not in dynamic and isinstance(v, (int, float, bool, tuple, type(None)))),
             # per-parameter state (momentum buffers, Adam moments) is created by the first
             # step: a trace made before it exists must not serve calls after
             tuple(tuple((k, id(v)) for k, v in state[p].items()) if p in state else ()
                   for p in grp["params"]))
            for grp in o.param_groups))
    return ("x", id(o))


_NUMBERS = (int, float, bool, tuple, type(None))


def _module_state(root) -> tuple:
    """Identity, ``training`` flag and plain-number attributes of every submodule, identities
    of their parameters and buffers: one walk over jitgrad's ``Module`` dicts (this runs at
    every call)."""
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
        # plain numbers a forward reads (Dropout.p, LayerNorm.eps...) are baked into a trace
        out.extend(v for v in mod.__dict__.items() if type(v[1]) in _NUMBERS)
        out.extend(id(p) for p in mod._parameters.values())
        out.extend(id(b) for b in getattr(mod, "_buffers", {}).values())
        stack.extend(c for c in reversed(mod._modules.values()) if c is not None)
    return tuple(out)


def _modules(m):
    mods = getattr(m, "modules", None)
    return list(mods()) if callable(mods) else [m]


def _closure_names(fn) -> dict:
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


def compile(fn=None, *, backend: str = "auto", fallback: str = "error",  # noqa: A001
            cache_dir=None):
    """Compile ``fn`` (a function or a Module-like callable): traced per input signature,
    differentiated, fused into generated Numba kernels.

    >>> import jitgrad
    >>> @jitgrad.compile
    ... def f(x):
    ...     return (x.tanh() * x).sum()
    >>> x = jitgrad.ones(3, requires_grad=True)
    >>> f(x).backward(); x.grad.shape
    jitgrad.Size([3])
    """
    if fn is None:
        return lambda f: CompiledFunction(f, backend, fallback, cache_dir)
    return CompiledFunction(fn, backend, fallback, cache_dir)


def explain(f: CompiledFunction, *args, **kwargs) -> str:
    """How ``f`` compiles for these arguments: graphs, kernels, and the last retrace reason."""
    if not isinstance(f, CompiledFunction):
        raise TypeError("explain() expects a function returned by jitgrad.compile")
    low = f.lower(*args, **kwargs)
    e = low.entry
    n_graphs = 1 + (1 if e.grad_info else 0)
    n_kernels = e.plan.n_kernels + (e.bplan.n_kernels if e.bplan else 0)
    lines = [
        f"{f.__name__}: {n_graphs} graph(s) ({'forward + backward' if e.grad_info else 'one'}), "
        f"{len(e.graph.eqns)} forward op(s), {n_kernels} generated kernel(s)",
        f"traces: {f.stats['traces']}, retraces: {f.stats['retraces']}, cache hits: "
        f"{f.stats['cache_hits']}",
        f"last retrace reason: {f.last_retrace_reason or 'none'}",
    ]
    return "\n".join(lines)


def grad(fn, argnums=0):
    """The gradient function of scalar-valued ``fn`` w.r.t. argument(s) ``argnums``.

    >>> import jitgrad
    >>> df = jitgrad.grad(lambda x: (x ** 3).sum())
    >>> df(jitgrad.tensor([2.0]))
    tensor([12.])
    """
    vg = value_and_grad(fn, argnums)

    @functools.wraps(fn)
    def g(*args, **kwargs):
        return vg(*args, **kwargs)[1]
    return g


def value_and_grad(fn, argnums=0):
    """``(fn(*args), gradient)`` of scalar-valued ``fn`` w.r.t. argument(s) ``argnums``."""
    from .autograd.engine import grad as autograd_grad

    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    @functools.wraps(fn)
    def vg(*args, **kwargs):
        args = list(args)
        for i in nums:
            a = args[i]
            if not isinstance(a, Tensor):
                raise TypeError(f"grad: argument {i} must be a Tensor, got {type(a).__name__}")
            args[i] = a.detach().requires_grad_(True)
        with grad_mode.enable_grad():
            out = fn(*args, **kwargs)
            if not isinstance(out, Tensor) or out._data.size != 1:
                raise RuntimeError("grad: the function must return a one-element tensor")
            gs = autograd_grad(out, [args[i] for i in nums], allow_unused=True,
                               materialize_grads=True)
        g = gs[0] if isinstance(argnums, int) else tuple(gs)
        return out.detach(), g
    return vg
