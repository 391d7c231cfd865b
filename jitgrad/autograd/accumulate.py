"""Accumulation into a leaf's ``.grad`` (PyTorch's AccumulateGrad), eagerly and while
``jitgrad.compile`` traces.

The read-modify-write of ``.grad`` is atomic: backward passes running on several threads
into one shared leaf (Hogwild-style training) lose no update. Each leaf gets its own lock
(made at its first accumulation, kept in the instance dict), held only around the
read-modify-write, as PyTorch's AccumulateGrad holds a mutex per leaf: about 0.15 us per
accumulation, and threads accumulating into different leaves never wait for each other.
Post-accumulate hooks run after the lock is released.
"""

from __future__ import annotations

import threading

import numpy as np

from ..devices import is_writeable
from ..tensor import Tensor, wrap
from ..trace.state import STATE as _TRACE
from . import grad_mode

__all__ = ["accumulate_into_leaf", "leaf_lock"]


def leaf_lock(t: Tensor) -> threading.Lock:
    """The lock guarding ``t.grad``'s read-modify-write (made once: ``setdefault`` on the
    instance dict is atomic, so two threads racing to make it get the same lock)."""
    lock = t._acc_lock
    if lock is None:
        lock = t.__dict__.setdefault("_acc_lock", threading.Lock())
    return lock


def accumulate_into_leaf(t: Tensor, g: Tensor, shared: bool) -> None:
    """AccumulateGrad: add ``g`` into ``t.grad`` (in place unless building a graph).

    A new ``.grad`` never aliases memory someone else holds: a gradient that is shared (the
    caller's, a hook's result, routed to two inputs), a view, read-only or itself
    differentiable is copied first, as PyTorch does."""
    create = grad_mode.STATE.enabled
    if g._data.dtype != t._data.dtype:
        g = g.to(t.dtype)
        shared = False
    tr = _TRACE.tracer
    if tr is not None:
        _accumulate_traced(t, g, create, shared, tr)
        return
    lock = t._acc_lock
    if lock is None:
        lock = leaf_lock(t)
    lock.acquire()  # (cheaper than a with statement on this path)
    try:
        old = t._grad
        if old is None:
            if create:
                t._grad = g
            else:
                gd = g._data
                flags = gd.flags  # _must_copy, inlined: this is every backward's path
                # (CuPy arrays have no writeable flag: device memory is never read-only)
                if (shared or gd.base is not None or not getattr(flags, "writeable", True)
                        or g._requires_grad):
                    gd = gd.copy()
                elif not flags.c_contiguous:
                    gd = np.ascontiguousarray(gd)
                t._grad = wrap(gd)
        elif create or old._requires_grad:
            t._grad = old + g
        else:
            od = old._data
            np.add(od, g._data, out=od)
            old._vc[0] += 1
    finally:
        lock.release()
    hooks = t._post_acc_hooks
    if hooks:
        for fn in list(hooks.values()):
            fn(t)


def _must_copy(g: Tensor, shared: bool) -> bool:
    """Whether a gradient becoming a new ``.grad`` is copied (as PyTorch does): it may be
    read elsewhere (``shared``, a view, read-only, part of a graph)."""
    gd = g._data
    return shared or gd.base is not None or not is_writeable(gd) or g._requires_grad


def _accumulate_traced(t: Tensor, g: Tensor, create: bool, shared: bool, tr) -> None:
    """accumulate_into_leaf while jitgrad.compile traces: the same semantics through ops, so
    the graph records the new ``.grad`` (a grad set) or the in-place sum (a write-back).

    A new ``.grad`` is a copy exactly when eager mode copies (above): then the trace records
    the copy (``clone``), so the leaf's gradient is a value of its own, never a view of (or
    the same array as) another value of the graph -- a later accumulation in the same call
    (a second ``backward()``: micro-batches) writes into it in place, as eager does."""
    tr.note_leaf_grad(t)
    old = t._grad
    if old is None:
        if create:
            t._grad = g
        else:
            if _must_copy(g, shared) or not g._data.flags.c_contiguous:
                from ..ops.copies import clone

                with grad_mode.no_grad():
                    g = clone(g.detach())
            elif g._grad_fn is not None:
                g = g.detach()
            t._grad = g
        tr.on_set_grad(t, t._grad)
    elif create or old._requires_grad:
        t._grad = old + g
        tr.on_set_grad(t, t._grad)
    else:
        tr.on_read_grad(t, old)  # the plan reads (and writes) the leaf's .grad at each call
        new = old + g
        tr.on_write(old, new)
        np.copyto(old._data, new._data)
        old._vc[0] += 1
    hooks = t._post_acc_hooks
    if hooks:
        for fn in list(hooks.values()):
            fn(t)
