"""Complex tensors (``complex64``, ``complex128``) in eager mode.

A complex tensor is a :class:`~jitgrad.tensor.Tensor` holding a NumPy complex array. The
dispatch paths (:mod:`jitgrad.ops.dispatch`) send an op with a complex operand here; what
the op does with it is declared once, on its :class:`~jitgrad.ops.registry.OpDef`
(``complex``):

* ``None``: the op rejects complex operands with PyTorch's error
  (``"tanh" not implemented for 'ComplexFloat'``) before it computes anything;
* ``"holomorphic"``: the forward is the op's NumPy ``ref`` (complex arithmetic as NumPy
  does it), and the gradient is its ordinary VJP rule run on the *conjugates* of the saved
  tensors and complex params -- PyTorch's convention (the conjugate Wirtinger derivative:
  for a real loss ``L`` of ``z = x + iy``, ``z.grad = dL/dx + i dL/dy``) makes the
  gradient of a holomorphic ``f`` ``g * conj(f'(z))``, which is what a rule written
  ``g * f'(z)`` gives on ``conj(z)`` (``mul``: ``g * conj(b)``; ``add``, movement ops and
  sums read no operand and pass ``g`` on);
* a callable: the op's VJP rule for complex operands (``abs``, ``angle``, ``real``,
  ``view_as_real``...), written with jitgrad ops (so ``create_graph`` works).

Where a gradient reaches a real input of an op that made a complex result (``x * 1j``,
``view_as_complex``), the input's gradient is its real part, as in PyTorch. Complex
values are computed by NumPy, never by jitgrad's generated kernels: ``jitgrad.compile``
does not trace them (a complex tensor in a traced call is a graph break: the call runs
eagerly), and CUDA tensors cannot be complex.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from .._thread_modes import GRAD_OFF, TRACING
from ..autograd import grad_mode
from ..autograd.node import edge, node_class
from ..tensor import Tensor, mark_view, wrap
from ..trace.state import STATE as _TRACE
from .registry import BOOL, FLOAT, MOVEMENT, OpDef, OpNode

__all__ = ["not_implemented", "elementwise", "call", "reduce", "attach"]

_STATE = grad_mode.STATE
_NAMES = {np.dtype(np.complex64): "ComplexFloat", np.dtype(np.complex128): "ComplexDouble"}


def not_implemented(op: OpDef, np_dtype) -> RuntimeError:
    """PyTorch's error for an op without a complex implementation."""
    name = _NAMES.get(np.dtype(np_dtype), str(np_dtype))
    return RuntimeError(f'"{op.name}" not implemented for \'{name}\'')


def _check(op: OpDef, np_dtype, tensors) -> None:
    """Raise unless ``op`` takes complex operands and every tensor is on the CPU; stop a
    trace (a graph break: the call runs eagerly)."""
    if op.complex is None:
        raise not_implemented(op, np_dtype)
    for t in tensors:
        if type(t) is Tensor and type(t._data) is not np.ndarray:
            raise RuntimeError(f"{op.name}: complex tensors are CPU-only in jitgrad (CUDA "
                               "kernels are generated for real dtypes)")
    tr = _TRACE.tracer if TRACING else None
    if tr is not None:
        tr.graph_break(f"{op.name} with complex values (compiled plans are real-valued)")


def elementwise(op: OpDef, args: tuple, params: dict | None = None) -> Tensor:
    """An element-wise op with a complex operand (tensors or Python numbers, one of them
    complex): PyTorch's promotion (a complex with a float64 is complex128), the op's
    NumPy ``ref``, and a node of the op's complex rule."""
    cd = dtypes.result_type(*args)
    if op.dtype_rule == FLOAT and cd.category < 2:
        cd = dtypes.get_default_dtype()
    cdt = cd.np
    _check(op, cdt, args)
    tensors = [x for x in args if type(x) is Tensor]
    if len(tensors) > 1:
        from ..shapes import broadcast_many

        broadcast_many([t._data.shape for t in tensors], op.name)
    keep = op.extra.get("no_promote", ())
    arrays = []
    for i, x in enumerate(args):
        a = x._data if type(x) is Tensor else np.asarray(x)
        arrays.append(a if i in keep else a.astype(cdt, copy=False))
    with np.errstate(all="ignore"):  # (only the declared params reach the reference)
        res = np.asarray(op.ref(*arrays, **{k: params[k] for k in op.params})
                         if op.params else op.ref(*arrays))
    if op.dtype_rule == BOOL:
        res = res.astype(np.bool_, copy=False)
    return _record(op, wrap(res), args, params)


def call(op: OpDef, inputs: tuple, params: dict | None, view_of: Tensor | None = None
         ) -> Tensor:
    """:func:`jitgrad.ops.dispatch.call` for an op with a complex tensor input (or a
    complex-valued op of :mod:`jitgrad.ops.complex_functions`): a movement op's forward
    (it only moves values), or the op's NumPy ``ref``."""
    arrays = [t._data for t in inputs]
    _check(op, next((a.dtype for a in arrays if a.dtype.kind == "c"), np.complex64), inputs)
    if len(inputs) > 1:
        from .dispatch import _same_device

        _same_device(inputs)
    fwd = (op.fwd or op.ref) if op.kind == MOVEMENT else op.ref
    with np.errstate(all="ignore"):
        res = np.asarray(fwd(*arrays, **params) if params else fwd(*arrays))
    out = wrap(res)
    if view_of is not None and res.base is not None:
        mark_view(out, view_of)
    return _record(op, out, inputs, params)


def reduce(op: OpDef, a: Tensor, p: dict) -> Tensor:
    """:func:`jitgrad.ops.reduce_base.call_reduce` on a complex tensor (the op's ``ref``)."""
    _check(op, a._data.dtype, (a,))
    res = np.asarray(op.ref(a._data, p["dims"], p["keepdim"], p["shape"]))
    return _record(op, wrap(res), (a,), p)


def _record(op: OpDef, out: Tensor, inputs: tuple, params) -> Tensor:
    """Record the node of ``op`` for ``out`` where grad mode and the inputs ask for one."""
    if GRAD_OFF and not _STATE.enabled:
        return out
    for t in inputs:
        if type(t) is Tensor and t._requires_grad:
            break
    else:
        return out
    return attach(op, out, inputs, params)



def attach(op: OpDef, out: Tensor, inputs: tuple, params) -> Tensor:
    """Make ``out``'s node: a :class:`ComplexOpNode` running ``op``'s complex rule (the
    caller checked grad mode and that an input requires grad). Raises for an op that
    rejects complex operands (a result of a path that computed it without asking)."""
    if op.complex is None:
        raise not_implemented(op, out._data.dtype)
    if op.vjp is None and not callable(op.complex):
        return out
    if out._data.dtype.kind not in "fc":
        return out
    from .dispatch import _attach, _saved

    name = op.node if isinstance(op.node, str) else op.node(params)
    _attach(op, params, out, tuple(edge(t) if type(t) is Tensor else None for t in inputs),
            tuple((t._data.shape, t._data.dtype) if type(t) is Tensor else None
                  for t in inputs), _saved(op, inputs, out), node_class(name, ComplexOpNode))
    return out


class ComplexOpNode(OpNode):
    """Backward node of a registered op that had a complex operand: runs the op's complex
    rule (:func:`complex_rule`) instead of its real one."""

    __slots__ = ()
    complex_rule = True


def complex_rule(op: OpDef, params, in_meta, needs: tuple, ins: tuple, out, grads) -> tuple:
    """``op``'s gradients for operands one of which is complex (see the module doc): one
    per input, summed to the input's shape, real where the input is real, in its dtype."""
    g = grads[0] if op.n_outputs == 1 else grads
    rule = op.complex
    if rule == "holomorphic":
        res = op.vjp(g, tuple(_conj(x) for x in ins), _conj(out),
                     {k: _conj(v) for k, v in params.items()} if params else params, needs)
    else:
        res = rule(g, ins, out, params, needs)
    fixed = []
    for gi, m, need in zip(res, in_meta, needs):
        if gi is None or not need or m is None:
            fixed.append(None if not need else gi)
            continue
        shape, dt = m
        if gi._data.dtype.kind == "c" and dt.kind != "c":
            gi = real(gi)
        if gi._data.shape != shape:
            from .sums import sum_to

            gi = sum_to(gi, shape)
        if gi._data.dtype != dt:
            gi = gi.to(dtypes.from_numpy_dtype(dt))
        fixed.append(gi)
    return tuple(fixed)


def _conj(x):
    if type(x) is Tensor:
        return conj(x) if x._data.dtype.kind == "c" else x
    if type(x) is complex or isinstance(x, np.complexfloating):
        return x.conjugate()
    return x


def conj(x: Tensor) -> Tensor:
    """The complex conjugate (a new tensor; a real tensor is returned as it is)."""
    from .complex_functions import conj as _c

    return _c(x)


def real(x: Tensor) -> Tensor:
    """The real part of a complex tensor (a view)."""
    from .complex_functions import real as _r

    return _r(x)


ComplexOpNode.rule_runner = staticmethod(complex_rule)
