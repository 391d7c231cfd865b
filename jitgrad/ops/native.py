"""``jitgrad._fastops``, the optional C extension of eager mode's hottest calls, set up once.

Two things run in C where it is built (``setup.py``; a C compiler at install time): the
arithmetic operators' common case (:func:`jitgrad.ops.eager_fast.binary_operator` returns
their C form) and :func:`jitgrad.ops.dispatch.unary`'s (:func:`unary_function`). Each C
function handles exactly a case its Python function computes inline -- the same objects,
the same bits -- and hands every other call to the Python function. ``JITGRAD_NATIVE_OPS=0``
(read at import) keeps everything in Python.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["fastops", "native_ops_loaded", "unary_function", "register_unary"]

_loaded: list = []


def fastops():
    """The set-up ``jitgrad._fastops`` module, or None (not built, or disabled)."""
    if not _loaded:
        mod = None
        if os.environ.get("JITGRAD_NATIVE_OPS", "1") != "0":
            try:
                from .. import _fastops as mod
            except ImportError:
                mod = None
        if mod is not None:
            from .._thread_modes import GRAD_OFF, TRACING
            from ..autograd import grad_mode
            from ..autograd.node import _HOOKS_OPEN, next_seq
            from ..kernels.parallel import HOT_MIN_SIZE
            from ..tensor import Tensor
            from .registry import OpNode

            mod.setup(Tensor, OpNode, GRAD_OFF, TRACING, _HOOKS_OPEN, grad_mode.STATE, next_seq,
                      HOT_MIN_SIZE)
        _loaded.append(mod)
    return _loaded[0]


def native_ops_loaded() -> bool:
    """Whether eager mode's hottest calls run their common case in C."""
    return fastops() is not None


def unary_function(python_unary: Callable) -> Callable:
    """``unary(op, a, params=None)``: the C form of ``python_unary`` (its fast case for ops
    registered by :func:`register_unary`, everything else handed to it), or
    ``python_unary`` itself without the extension."""
    mod = fastops()
    if mod is None:
        return python_unary
    mod.setup_unary({}, python_unary)
    return mod.unary


def register_unary(op) -> None:
    """Let the C ``unary`` compute ``op`` (called by the Python path on an op's first call):
    its node class, what its node saves, the names of the params its kernel takes (numbers,
    in order). An op whose node class depends on its params, or that saves something else,
    stays in Python."""
    mod = fastops()
    if mod is None or op.expr is None or op.nin != 1 or any(i != 0 for i in op.save):
        return
    if op.params:
        cls = op.node_cls  # (with params: only a node class that does not depend on them)
        if cls is None:
            return
    else:
        try:
            cls = op.node_cls or op.node_class_for(None)
        except Exception:  # noqa: BLE001 - a node name that needs params: the Python path
            return
    mod.register_unary(op, cls, 0 in op.save, bool(op.save_out), op.vjp is not None,
                       tuple(op.params))

