"""One specialised eager dispatch function per element-wise operator (``x * y``, ``x + 1``).

:func:`binary_operator` builds, once per op, the function that ``Tensor.__mul__`` (and the
other arithmetic operators) *is*. It handles the common case inline and hands everything
else to the general path (:func:`jitgrad.ops.dispatch.binary`):

* the case: a CPU tensor of float32 or float64, one dimension, C-contiguous and aligned
  (an array owning its memory -- ``base`` None: NumPy allocates those contiguous and
  aligned -- or one whose flags say ``carray``), fewer than ``HOT_MIN_SIZE`` elements,
  with a tensor of the same shape and dtype (the same checks) or a Python ``float``/``int``;
  no tracer on this thread (:data:`jitgrad._thread_modes.TRACING` empty, or else the
  thread-local read); grad mode read the same way (``GRAD_OFF``);
* the op's own flat kernel, called through its compiled entry point
  (:func:`jitgrad.ops.eager_kernels.flat_entry`): the same machine code as the general
  path, without the Numba dispatcher's per-call type resolution -- so the same bits;
* the output tensor and its node built inline, with exactly what ``dispatch._finish``
  builds: the same node class, edges, saved entries (with their versions; through
  ``save_input`` while a ``saved_tensors_hooks`` context is open), ``in_meta`` None (same
  shapes and dtypes), the op and no params, the next sequence number.

Anything else (another dtype or layout, broadcasting, CUDA memory, a tracer, NumPy numbers,
bools) takes the general path, which gives the same result. ``tests/ops/test_eager_fast.py``
checks that both paths build the same tensors and graphs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._thread_modes import GRAD_OFF, TRACING
from ..autograd import grad_mode
from ..autograd.anomaly import MODE as _ANOMALY
from ..autograd.anomaly import forward_stack
from ..autograd.node import _HOOKS_OPEN, next_seq, save_input
from ..tensor import Tensor
from ..trace.state import STATE as _TRACE
from . import eager_kernels
from .dispatch import binary
from .native import fastops, native_ops_loaded
from .registry import OpDef

__all__ = ["binary_operator", "takes_fast_path", "native_ops_loaded"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_STATE = grad_mode.STATE
_ndarray = np.ndarray
_empty = np.empty
_new = object.__new__
_PAR_MIN = eager_kernels.HOT_MIN_SIZE  # from here the pool may run the kernel
_SHIFT = eager_kernels.CHUNK_SHIFT
_PART = (1 << _SHIFT) - 1


def takes_fast_path(a, b) -> bool:
    """Whether ``a (op) b`` is computed inline by an operator of :func:`binary_operator`
    (the conditions its function checks, in one place for tests and docs)."""
    if type(a) is not Tensor or _TRACE.tracer is not None:
        return False
    ad = a._data
    if type(ad) is not _ndarray or ad.ndim != 1 or not _flat(ad) or ad.size >= _PAR_MIN or \
            not (ad.dtype is _F32 or ad.dtype is _F64):
        return False
    if type(b) is Tensor:
        bd = b._data
        return type(bd) is _ndarray and bd.dtype is ad.dtype and bd.shape == ad.shape and \
            _flat(bd)
    return type(b) is float or type(b) is int


def _flat(x: np.ndarray) -> bool:
    """Whether a 1-D array may go to a kernel entry of C-contiguous aligned arrays."""
    return x.base is None or x.flags.carray


def binary_operator(op: OpDef, name: str, doc: str) -> Callable[[Tensor, object], Tensor]:
    """The function ``name`` computing ``op(self, other)``: the common case inline (see the
    module doc), anything else through :func:`~jitgrad.ops.dispatch.binary`."""
    if op.save_out or op.vjp is None or op.dtype_rule == "bool" or op.params:
        raise ValueError(f"{op.name}: binary_operator handles differentiable ops without "
                         "params, saved outputs or bool results")
    cls = op.node_class_for(None)
    # 1: saved; 2: saved when the other operand requires grad (``op.save_for``)
    save_a = (2 if (0, 1) in op.save_for else 1) if 0 in op.save else 0
    save_b = (2 if (1, 0) in op.save_for else 1) if 1 in op.save else 0
    # the kernel entry points, loaded on first use: [float32, float64] x [tensor, number]
    entries = [None, None, None, None]

    def load(i: int):
        e = entries[i] = eager_kernels.flat_entry(op, _F32 if i < 2 else _F64,
                                                  "arg" if i & 1 else "full")
        return e

    def operator(self, other):
        ad = self._data
        dt = ad.dtype
        if dt is _F32:
            i = 0
        elif dt is _F64:
            i = 2
        else:
            return binary(op, self, other)
        s = ad.shape
        if type(ad) is not _ndarray or len(s) != 1 or s[0] >= _PAR_MIN or not (
                ad.base is None or ad.flags.carray):
            return binary(op, self, other)
        to = type(other)
        if to is Tensor:
            bd = other._data
            if not (bd.dtype is dt and type(bd) is _ndarray and bd.shape == s and (
                    bd.base is None or bd.flags.carray)):
                return binary(op, self, other)
            rb = other._requires_grad
        elif to is float or to is int:
            bd = other if to is float else dt.type(other)
            rb = False
            i += 1
        else:
            return binary(op, self, other)
        if TRACING and _TRACE.tracer is not None:  # (TRACING empty: no thread traces)
            return binary(op, self, other)
        n = s[0]
        res = _empty(s, dt)
        (entries[i] or load(i))(0, (n + _PART) >> _SHIFT, n, ad, bd, res)
        out = _new(Tensor)
        out._data = res
        out._grad = None
        out._vc = [0]
        ra = self._requires_grad
        if TRACING and not _STATE.enabled and grad_mode.DUAL_LEVEL[0] is not None:
            grad_mode.note_untracked((self, other))  # (forward AD: a tangent it would lose)
        if (ra or rb) and (not GRAD_OFF or _STATE.enabled):
            node = _new(cls)
            if ra:
                f = self._grad_fn
                ea = self if f is None else (f, self._output_nr)
            else:
                ea = None
            if rb:
                f = other._grad_fn
                node.next_edges = (ea, other if f is None else (f, other._output_nr))
            else:
                node.next_edges = (ea, None)
            sa = save_a == 1 or (save_a and rb)
            sb = save_b == 1 or (save_b and ra)
            if not (sa or sb):
                node.saved = None
            elif _HOOKS_OPEN[0]:
                node.saved = (save_input(self) if sa else None,
                              (save_input(other) if to is Tensor else other) if sb
                              else None)
            else:
                node.saved = ((self, self._vc[0]) if sa else None,
                              ((other, other._vc[0]) if to is Tensor else other) if sb
                              else None)
            node.in_meta = None
            node.seq = next_seq()
            if _ANOMALY[0]:
                node._forward_stack = forward_stack()
            node.op = op
            node.params = None
            out._requires_grad = True
            out._grad_fn = node
        else:
            out._requires_grad = False
            out._grad_fn = None
        return out

    operator.__name__ = operator.__qualname__ = name
    operator.__doc__ = doc
    native = _native_operator(op, cls, save_a, save_b, operator)
    return operator if native is None else native


def _native_operator(op: OpDef, cls: type, save_a: bool, save_b: bool, operator: Callable):
    """The C form of ``operator`` (``jitgrad._fastops``: the same case in C, everything else
    handed to ``operator``), or None where the extension is not built, the op has no C loop,
    or ``JITGRAD_NATIVE_OPS=0``."""
    mod = fastops()
    if mod is None or op.name not in NATIVE_KINDS:
        return None
    fast = mod.operator(op.name, op, cls, save_a, save_b, operator)
    fast.__name__ = operator.__name__
    fast.__qualname__ = operator.__qualname__
    fast.__doc__ = operator.__doc__
    fast.__module__ = operator.__module__
    fast.__wrapped__ = operator  # inspect.signature / help() follow it
    return fast


#: the ops jitgrad._fastops has loops for: one correctly rounded IEEE operation per element
NATIVE_KINDS = ("add", "sub", "rsub", "mul", "div")
