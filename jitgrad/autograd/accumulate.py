"""Accumulation into a leaf's ``.grad`` (PyTorch's AccumulateGrad), eagerly and while
``jitgrad.compile`` traces."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor, wrap
from ..trace.state import STATE as _TRACE
from . import grad_mode

__all__ = ["accumulate_into_leaf"]


def accumulate_into_leaf(t: Tensor, g: Tensor, shared: bool) -> None:
    """AccumulateGrad: add ``g`` into ``t.grad`` (in place unless building a graph)."""
    create = grad_mode.STATE.enabled
    if g._data.dtype != t._data.dtype:
        g = g.to(t.dtype)
        shared = False
    tr = _TRACE.tracer
    if tr is not None:
        _accumulate_traced(t, g, create, tr)
        return
    old = t._grad
    if old is None:
        if create:
            t._grad = g
        else:
            gd = g._data
            if shared or gd.base is not None or not gd.flags.writeable or g._requires_grad:
                gd = gd.copy()
            elif not gd.flags.c_contiguous:
                gd = np.ascontiguousarray(gd)
            t._grad = wrap(gd)
    elif create or old._requires_grad:
        t._grad = old + g
    else:
        od = old._data
        np.add(od, g._data, out=od)
        old._vc[0] += 1
    hooks = t._post_acc_hooks
    if hooks:
        for fn in list(hooks.values()):
            fn(t)


def _accumulate_traced(t: Tensor, g: Tensor, create: bool, tr) -> None:
    """accumulate_into_leaf while jitgrad.compile traces: the same semantics through ops, so
    the graph records the new ``.grad`` (a grad set) or the in-place sum (a write-back)."""
    tr.note_leaf_grad(t)
    old = t._grad
    if old is None:
        t._grad = g if create else (g if g._grad_fn is None else g.detach())
        tr.on_set_grad(t, t._grad)
    elif create or old._requires_grad:
        t._grad = old + g
        tr.on_set_grad(t, t._grad)
    else:
        new = old + g
        tr.on_write(old, new)
        np.copyto(old._data, new._data)
        old._vc[0] += 1
    hooks = t._post_acc_hooks
    if hooks:
        for fn in list(hooks.values()):
            fn(t)
