"""Memory shared between a compiled call's arguments, outputs and captured tensors, and the
version counters that make it visible to autograd -- as eager mode has it.

* :func:`arg_aliasing`: which arguments share memory, part of an entry's key. ``f(x, x)``
  traces the two arguments as one value (one buffer: a write through one is read through the
  other); an entry traced for distinct arguments never serves such a call, nor the reverse.
  Arguments that overlap without being one array (views of one base) trace as distinct
  values, which is exact as long as the function writes into none of them; when it does
  (:func:`cannot_compile`), that signature runs eagerly.
* :func:`output_aliases`: how each output of the traced call relates to the tensors the
  caller sees. Eager mode returns the argument itself for ``lambda x: x``, a view sharing
  ``x``'s version counter and ``_base`` for ``x.view(-1)`` or ``x.t()``, the leaf's
  ``.grad`` object for ``return p.grad``; the entry's call path (``call_path.entry_run``)
  reproduces each relation, so an in-place write to one tensor is seen by autograd through
  the others.
* :func:`version_bumps`: the tensors whose version counters the traced call raised (its
  in-place writes into arguments, captured tensors, parameters in ``opt.step()``, leaves'
  ``.grad``), applied by the plan with its writes (``Graph.bumps``), so a backward that
  saved one of them raises eager's "modified by an inplace operation" error.
"""

from __future__ import annotations

import numpy as np

from ..autograd.node import save_input, save_output, unpack
from ..tensor import Tensor, alias, mark_view
from ..trace.ir import Source

__all__ = ["analyse", "arg_aliasing", "cannot_compile", "output_aliases", "residual_anchors",
           "guard_residuals", "version_bumps", "link_view", "alias_of", "root"]


def root(a: np.ndarray):
    """The object owning ``a``'s memory (NumPy collapses chains of views)."""
    b = a.base
    return a if b is None else b


def analyse(flat: list, out_flat: list, graph, tracer, grad_info) -> tuple[list, tuple]:
    """After a trace, before ``tracer.undo()``: set ``graph.bumps`` (:func:`version_bumps`)
    and return the outputs' relations (:func:`output_aliases`) and the residual anchors
    (:func:`residual_anchors`) of the entry."""
    graph.bumps = version_bumps(flat, graph, tracer)
    return (output_aliases(flat, out_flat, graph, tracer),
            residual_anchors(flat, out_flat, graph, grad_info))


def arg_aliasing(flat: list) -> tuple | None:
    """None when no two arguments' arrays share memory (decided by their root arrays: the
    common case costs one pass); else one entry per argument: None, ``("is", j)`` (the same
    tensor as argument ``j``), ``("same", j)`` (another tensor over the same array) or
    ``("overlap", j)`` (another array sharing memory with it), ``j`` the first such."""
    if len(flat) < 2:
        return None
    seen = set()
    for t in flat:
        d = t._data
        b = d.base
        k = id(d if b is None else b)
        if k in seen:
            return _pattern(flat)
        seen.add(k)
    return None


def _pattern(flat: list) -> tuple | None:
    out = []
    for i, t in enumerate(flat):
        d = t._data
        rel = None
        for j in range(i):
            u = flat[j]
            e = u._data
            if u is t:
                rel = ("is", j)
            elif e is d:
                rel = ("same", j)
            elif root(e) is root(d) and np.may_share_memory(e, d):
                rel = ("overlap", j)
            if rel is not None:
                break
        out.append(rel)
    return tuple(out) if any(r is not None for r in out) else None


def cannot_compile(pattern: tuple | None, tracer) -> str | None:
    """Why a traced call's effects are beyond a graph (that signature then runs eagerly), or
    None. (1) It wrote into an argument while another argument overlaps it without being
    the same array: the graph cannot re-read an argument after a write to memory it shares.
    (2) An in-place op gave an argument or captured tensor a new autograd history (``x.mul_(2)``
    on an ``x`` that requires grad): the plan's outputs cannot rebase the caller's tensor."""
    if pattern is not None and any(r is not None and r[0] == "overlap" for r in pattern) \
            and any(src.kind == "arg" for src in tracer.written.values()):
        return ("it writes in place into an argument that shares memory with another "
                "argument (overlapping views of one tensor)")
    for t, fn, _, _ in tracer.saved_history.values():
        if t._grad_fn is not fn:
            return ("an in-place op gives an argument or captured tensor a new autograd "
                    "history (it requires grad, or the value written does); clone it first "
                    "to compile this function")
    return None


# ------------------------------------------------------------------------------ outputs
def _anchors(flat: list, graph, tracer) -> dict:
    """id(tensor) -> (anchor, tensor) for the tensors the caller sees: ``("arg", k)``,
    ``("tensor", obj)`` (a captured tensor), ``("grad", leaf_source)`` (a leaf's ``.grad``
    as the traced call left it: an argument's or a captured leaf's)."""
    known: dict = {}
    for k, t in enumerate(flat):
        known.setdefault(id(t), (("arg", k), t))
    for v in graph.externals:
        if v.source.kind == "tensor":
            obj = v.source.obj
            known.setdefault(id(obj), (("tensor", obj), obj))
    for leaf, _, ref in tracer.grad_guards.values():
        g = leaf._grad
        if g is not None:
            known.setdefault(id(g), (("grad", ref), g))
    return known


def output_aliases(flat: list, out_flat: list, graph, tracer) -> list:
    """One relation per output of the traced call (None for a tensor of its own):

    * ``("is", anchor, changed)``: the output *is* that tensor (an argument, a captured
      tensor, a leaf's ``.grad``, ``("out", j)`` an earlier output); ``changed``: the
      call wrote into it, so it takes the call's autograd history as eager rebases it;
    * ``("alias", anchor, with_base)``: another tensor over the anchor's very array sharing
      its version counter (``detach()``), and its ``_base`` when ``with_base``;
    * ``("data", anchor)``: another tensor over the anchor's very array with a version
      counter of its own (``.data``);
    * ``("view", anchor)``: a view (shares the version counter and ``_base``) of an anchor,
      of another output, or of ``("base", n, version)``: an intermediate no output is;
    * ``("version", n)``: a tensor of its own that in-place ops left at version ``n``.

    Must run before ``tracer.undo()`` (it reads the state the traced call left)."""
    known = _anchors(flat, graph, tracer)
    first_out: dict = {}
    for i, o in enumerate(out_flat):
        first_out.setdefault(id(o), i)
    arg_vars = {v.source.index: v for v in graph.inputs}
    ext_vars = {id(v.source.obj): v for v in graph.externals if v.source.kind == "tensor"}
    bases: dict = {}
    rels: list = []
    for i, o in enumerate(out_flat):
        hit = known.get(id(o))
        if hit is not None:
            a = hit[0]
            var = None
            if a[0] == "arg":  # an argument the trace merged with an earlier one: its Var
                var = arg_vars.get(next(j for j, t in enumerate(flat)
                                        if t._data is o._data))
            elif a[0] == "tensor":
                var = ext_vars.get(id(a[1]))
            rels.append(("is", a, var is not None and graph.outputs[i] is not var))
        elif first_out[id(o)] != i:
            rels.append(("is", ("out", first_out[id(o)]), False))
        else:
            rels.append(_relation(o, known, first_out, bases, i))
    return rels


def _relation(o: Tensor, known: dict, first_out: dict, bases: dict, i: int):
    b = o._base
    for a, t in known.values():  # another tensor over an anchor's array: detach(), .data
        if t._data is o._data:
            return ("alias", a, b is not None) if t._vc is o._vc else ("data", a)
    if b is not None:
        hit = known.get(id(b))
        a = hit[0] if hit is not None else None
        if a is None and first_out.get(id(b), i) != i:
            a = ("out", first_out[id(b)])
        if a is None:
            a = bases.setdefault(id(b), ("base", len(bases), b._vc[0]))
        return ("view", a)
    return ("version", o._vc[0]) if o._vc[0] else None


def link_view(t: Tensor, o: np.ndarray, of: Tensor) -> None:
    """Make ``t`` (over the plan's output array ``o``) a view of ``of`` -- if ``o`` does
    share ``of``'s memory in this call (a reshape of another layout may copy)."""
    if root(o) is root(of._data):
        mark_view(t, of)


def alias_of(of: Tensor, with_base: bool) -> Tensor:
    """A new tensor over ``of``'s array sharing its version counter (``detach()``)."""
    t = alias(of._data)
    t._vc = of._vc
    if with_base:
        t._base = of._base if of._base is not None else of
    return t


def residual_anchors(flat: list, out_flat: list, graph, grad_info) -> tuple:
    """The outputs whose memory the compiled backward reads (a returned ``exp(x)``, which
    its backward reuses; a view of one): ``("out", j)``, found by version counter (a view
    shares its base's). Eager autograd saved those tensors with their version; so does the
    call path (:func:`guard_residuals`). Views of arguments and captured tensors are saved
    by the backward itself (``compiler/autodiff.py``). Must run before ``tracer.undo()``."""
    if grad_info is None or not grad_info.residual_vcs:
        return ()
    inputs = {id(t._vc) for t in flat}
    inputs |= {id(v.source.obj._vc) for v in graph.externals if v.source.kind == "tensor"}
    owners: dict = {}
    for j, t in enumerate(out_flat):
        owners.setdefault(id(t._vc), j)
    out: list = []
    for vc in grad_info.residual_vcs:
        j = owners.get(id(vc))
        if j is not None and id(vc) not in inputs and ("out", j) not in out:
            out.append(("out", j))
    return tuple(out)


def guard_residuals(node, tensors: tuple) -> None:
    """Make ``node`` (a call's ``CompiledFunctionBackward``) raise eager's "modified by an
    inplace operation" error if one of ``tensors`` (see :func:`residual_anchors`) is written
    in place before the backward runs: a pre-hook checks their versions."""
    if node is None or node.saved is None:
        return
    # an output of the node is saved as one (array + counter: no output -> node -> output
    # cycle), an argument or captured tensor as an input
    check = _ResidualCheck()
    check.entries = tuple(save_output(t) if t._grad_fn is node else save_input(t)
                          for t in tensors)
    hooks = node._pre_hooks
    if hooks is None:
        node._pre_hooks = {0: check}  # a fresh node: no handle will remove it
    else:
        node.register_prehook(check)


class _ResidualCheck:
    """The pre-hook of :func:`guard_residuals` (a slotted object: cheaper than a closure)."""

    __slots__ = ("entries",)

    def __call__(self, grads) -> None:
        for e in self.entries:
            if e[0] is None:
                if e[2][0] != e[3]:
                    unpack(e, _COMPILED)  # raises eager's error
            elif e[0]._vc[0] != e[1]:
                unpack(e, _COMPILED)


class _CompiledOwner:
    """Names the owner of a saved output in the error message."""

    @staticmethod
    def name() -> str:
        return "CompiledFunctionBackward"


_COMPILED = _CompiledOwner()


# ----------------------------------------------------------------------------- versions
def version_bumps(flat: list, graph, tracer) -> list:
    """``(Source, n)``: the tensors the caller sees whose version counters the traced call
    raised, and by how much (eager's count). A write through a tensor of the call's own (a
    ``.data`` alias) bumps nothing outside, as in eager mode. Must run before undo."""
    owners: list = [(t._vc, Source("arg", index=k)) for k, t in enumerate(flat)]
    for v in graph.externals:
        src = v.source
        if src.kind == "tensor":
            owners.append((src.obj._vc, src))
        elif src.kind == "grad":
            leaf = src.leaf(flat)
            saved = tracer.saved_grads.get(id(leaf))
            g = saved[1] if saved is not None else leaf._grad
            if g is not None:
                owners.append((g._vc, src))
    out = []
    for vc, before in tracer.saved_versions.values():
        n = vc[0] - before
        if n <= 0:
            continue
        for owner_vc, src in owners:
            if owner_vc is vc:
                out.append((src, n))
                break
    return out
