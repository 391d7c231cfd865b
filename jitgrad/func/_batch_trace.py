"""``vmap`` by tracing: the function runs once, on the first batch element, under the tracer
``jitgrad.compile`` uses; the recorded equations then run once on the whole batch, each
through its batching rule (:mod:`jitgrad.func._batch_rules`).

This is how ``torch.vmap`` behaves -- the function's Python code runs once, its tensor ops
run batched -- reached without a batched tensor type: tracing turns everything the function
does, ``grad``/``vjp`` of it included (the engine's VJP rules run as recorded ops), into a
straight-line program over registered ops, and each op has one batching rule.

:func:`batched_call` returns :data:`NOT_BATCHED` (and leaves no trace of having tried: the
trace's effects are undone) when the call cannot be replayed: data-dependent Python control
flow or ``.item()`` (a value escapes the trace), random draws (``randomness`` is the loop's
business), in-place writes to inputs or captured tensors, ``.grad`` changes, collectives,
outputs that are not tensors. ``vmap`` then runs its loop.

Autograd through the replay matches the loop's: each op is replayed with the inputs that
carried gradient when it was traced (a ``detach()``ed or ``no_grad`` input stays cut off),
so ``vmap``'s outputs have the history eager per-element calls would have given them.
"""

from __future__ import annotations

import os

import numpy as np

from ..autograd import grad_mode
from ..config import check_ir
from ..devices import as_array
from ..tensor import Tensor, alias, wrap
from ..trace.ir import Lit, Var, is_effect
from ..trace.state import STATE
from ..trace.tracer import TraceError, Tracer
from ._batch_rules import Batched, NoRule, loop_rule, move_batch_to_front, rule_for, run_op
from ._pytree import tree_flatten

__all__ = ["batched_call", "NOT_BATCHED", "enabled"]

NOT_BATCHED = object()


def enabled() -> bool:
    """Whether ``vmap`` batches by tracing (``JITGRAD_VMAP=loop`` turns it off: every call
    then runs the per-element loop)."""
    return os.environ.get("JITGRAD_VMAP", "").lower() != "loop"


class _CannotBatch(Exception):
    """The traced call cannot be replayed on the batch."""


_CUT, _CARRY, _LEAF = 0, 1, 2  # how an op's input met autograd when traced: no gradient;
# a gradient the replay's value carries on; a leaf made inside the function (the gradient
# stops there, but the op's result requires grad)


def _resumed(outer):
    """The tracer to restore after the inner trace: the outer one, unless a graph break
    stopped it meanwhile (its call then finishes eagerly)."""
    return outer if outer is not None and outer.escaped is None else None


class _BatchTracer(Tracer):
    """The compile tracer, also noting per equation which inputs carried gradient and which
    params are traced tensors (max's indices: a value of the graph, batched like one).
    Element-wise ops run their eager kernels: the batched replay runs the same ones."""

    eager_kernels = True

    def __init__(self, name: str, outer=None) -> None:
        super().__init__(name=name)
        self.outer = outer  # the trace this one runs inside, or None
        self.info: dict = {}  # id(Eqn) -> (grad mask, {param name: Var})
        self.inputs: set = set()  # ids of the element's argument tensors
        self.custom_nodes = False  # a custom Function recorded a node

    def add_input(self, t, index: int):
        self.inputs.add(id(t))
        return super().add_input(t, index)

    def on_custom_function(self, cls) -> None:
        self.custom_nodes = True  # (its node is not an equation: the replay cannot rebuild it)

    def _carries(self, t) -> bool:
        """Whether ``t``'s gradient reaches a value the replay connects: an argument, a
        captured tensor, or a result of ops (not a leaf made inside the function, such as
        ``a.detach().requires_grad_()``, where eager's gradient stops)."""
        if t._grad_fn is not None or id(t) in self.inputs:
            return True
        src = self.sources.get(id(t._data))
        return src is not None and src.obj is t

    def on_op(self, op, out, inputs, params, cdt=None) -> None:
        tensor_params = {}
        if params:
            for k, val in params.items():
                if isinstance(val, Tensor):
                    tensor_params[k] = self.vars.get(id(val._data))
        super().on_op(op, out, inputs, params, cdt)
        records = grad_mode.STATE.enabled and op.vjp is not None
        mask = tuple((_CARRY if self._carries(x) else _LEAF)
                     if records and type(x) is Tensor and x._requires_grad else _CUT
                     for x in inputs)
        self.info[id(self.graph.eqns[-1])] = (mask, tensor_params)


def batched_call(func, flat_args: list, flat_in_dims: list, spec, kwargs: dict, size: int,
                 chunk_size: int | None):
    """``func`` mapped over ``size`` elements by one trace and one batched replay: the
    flattened outputs as :class:`Batched` values and their tree spec, or
    :data:`NOT_BATCHED`.

    Inside another trace (``jitgrad.compile``'s, an outer ``vmap``'s) the element's trace
    runs on a tracer of its own, nested in that one (``outer``: compile's observer of
    Python state still sees the function's code, and a graph break there ends both), and
    the replay runs under the outer tracer, which records the batched ops -- a compiled
    ``vmap`` is one batched graph, not one copy of the function per element."""
    from ._pytree import tree_unflatten

    outer = STATE.tracer
    tracer = _BatchTracer(getattr(func, "__name__", "vmapped"), outer)
    STATE.tracer = None  # (the element's slices are the inner trace's inputs only)
    sample = []
    try:
        for i, (a, d) in enumerate(zip(flat_args, flat_in_dims)):
            if isinstance(a, Tensor):
                s = a.select(d, 0) if d is not None else a
                tracer.add_input(s, i)
                sample.append(s)
            else:
                sample.append(a)
    finally:
        STATE.tracer = outer
    STATE.tracer = tracer
    try:
        out = func(*tree_unflatten(sample, spec), **kwargs)
    except Exception:  # noqa: BLE001 - the loop runs it again (and raises a real error)
        STATE.tracer = _resumed(outer)
        tracer.undo()
        return NOT_BATCHED
    broke = STATE.tracer is not tracer  # the outer trace stopped (a graph break)
    STATE.tracer = _resumed(outer)
    if broke:
        tracer.undo()
        return NOT_BATCHED
    try:
        flat_out, out_spec = tree_flatten(out)
        if not all(isinstance(t, Tensor) for t in flat_out):
            raise _CannotBatch
        if tracer.custom_nodes and any(t._requires_grad for t in flat_out):
            raise _CannotBatch  # (a custom Function's node on the outputs' history)
        graph = tracer.finish(flat_out)
    except (TraceError, _CannotBatch):
        tracer.undo()
        return NOT_BATCHED
    tracer.undo()
    # outputs without history when traced: the replay records none either (no_grad)
    with_grad = any(t._requires_grad for t in flat_out)
    del out, flat_out, sample
    if graph.writes or graph.grad_sets or graph.bumps or any(
            isinstance(e.op, str) and (e.op != "fill" or is_effect(e)) for e in graph.eqns):
        return NOT_BATCHED
    if outer is not None and any(v.source.kind != "tensor" for v in graph.externals):
        return NOT_BATCHED  # (a .grad or a number read: the outer trace must see the read)
    info = tracer.info
    tracer.release()
    inputs = {}
    by_index = {v.source.index: v for v in graph.inputs}
    for i, (a, d) in enumerate(zip(flat_args, flat_in_dims)):
        v = by_index.get(i)
        if v is not None:
            inputs[id(v)] = Batched(move_batch_to_front(a, d), True, v.shape) if d is not None \
                else Batched(a, False, v.shape)
    try:
        with grad_mode.set_grad_enabled(with_grad and grad_mode.STATE.enabled):
            if chunk_size is None or chunk_size >= size:
                values = _replay(graph, info, inputs, size)
            else:
                values = _replay_chunks(graph, info, inputs, size, chunk_size)
    except _CannotBatch:
        return NOT_BATCHED
    return values, out_spec


def _replay_chunks(graph, info, inputs: dict, size: int, chunk: int) -> list:
    """The replay over batch slices of ``chunk`` elements (``vmap``'s ``chunk_size``),
    each output's slices concatenated."""
    from ..ops.concat import cat

    parts = []
    for start in range(0, size, chunk):
        n = min(chunk, size - start)
        sub = {k: Batched(v.t.narrow(0, start, n), True, v.shape) if v.batched else v
               for k, v in inputs.items()}
        parts.append(_replay(graph, info, sub, n))
    return [Batched(cat([p[k].t for p in parts], 0), True, v.shape) if v.batched else v
            for k, v in enumerate(parts[0])]


def _replay(graph, info: dict, inputs: dict, size: int) -> list:
    """Run ``graph``'s equations on the batch; the outputs as :class:`Batched` values."""
    env = dict(inputs)
    for v in graph.externals:
        env[id(v)] = Batched(_external(v), False, v.shape)

    def value(x):
        if isinstance(x, Lit):
            return x.value
        if not isinstance(x, Var):
            return x
        got = env.get(id(x))
        if got is None:
            if x.kind != "const":
                raise _CannotBatch
            got = env[id(x)] = Batched(_constant(x.source.copy()), False,
                                       x.shape)
        return got

    for e in graph.eqns:
        if isinstance(e.op, str):  # a factory's fill: the same for every element
            env[id(e.out)] = Batched(_filled(e), False, e.out.shape)
            continue
        mask, tensor_params = info.get(id(e), (None, {}))
        ins = [value(x) for x in e.ins]
        if mask is not None:
            ins = [_as_traced(v, how) for v, how in zip(ins, mask)]
        params = dict(e.params)
        for k, var in tensor_params.items():
            if var is not None:
                params[k] = value(var)
        batched = any(isinstance(v, Batched) and v.batched
                      for v in (*ins, *params.values()))
        if not batched:
            operands = [v.t if isinstance(v, Batched) else v for v in ins]
            ps = {k: v.t if isinstance(v, Batched) else v for k, v in params.items()}
            env[id(e.out)] = Batched(run_op(e.op, operands, ps, e.cdt, e.out.dtype), False,
                                     e.out.shape)
            continue
        rule = rule_for(e.op)
        try:
            if rule is None:
                raise NoRule
            res = rule(e.op, ins, params, e, size)
        except NoRule:
            res = loop_rule(e.op, ins, params, e, size)
        want = (size,) + tuple(e.out.shape)
        if tuple(res.shape) != want or res._data.dtype != np.dtype(e.out.dtype):
            if check_ir():
                raise AssertionError(f"vmap: the batching rule of {e.op.name} gave "
                                     f"{res._data.dtype}{list(res.shape)}, expected "
                                     f"{np.dtype(e.out.dtype)}{list(want)}")
            raise _CannotBatch
        env[id(e.out)] = Batched(res, True, e.out.shape)
    return [value(v) for v in graph.outputs]


def _as_traced(v, how: int):
    """A replay operand meeting autograd as the traced call's did (:data:`_CUT`...)."""
    if not isinstance(v, Batched) or how == _CARRY:
        return v
    if how == _LEAF:
        return Batched(v.t.detach().requires_grad_(), v.batched, v.shape)
    return Batched(v.t.detach(), v.batched, v.shape) if v.t.requires_grad else v


def _constant(arr) -> Tensor:
    """A constant of the traced graph as a tensor (a constant of the outer trace, if any)."""
    t = alias(arr)
    if STATE.tracer is not None:
        STATE.tracer.on_constant(t)
    return t


def _filled(e) -> Tensor:
    """A factory's value, made again (a fill the outer trace, if any, records as one)."""
    t = alias(as_array(e.impl()))
    if STATE.tracer is not None:
        STATE.tracer.on_generated(t, e.op, e.impl)
    return t


def _external(v: Var) -> Tensor:
    """A captured value's tensor (a module parameter, a closure's tensor, a leaf's .grad,
    an optimizer's number)."""
    src = v.source
    if src.kind == "tensor":
        return src.obj
    if src.kind == "grad":
        if src.obj is None or src.obj._grad is None:  # (an argument's .grad: the loop)
            raise _CannotBatch
        return src.obj._grad
    if src.kind == "scalar":
        return wrap(np.asarray(src.read([])))
    raise _CannotBatch
