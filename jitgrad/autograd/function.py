"""Custom differentiable operations: ``jitgrad.autograd.Function`` with a ``ctx``, as PyTorch.

>>> import jitgrad
>>> class Square(jitgrad.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x
...     @staticmethod
...     def backward(ctx, g):
...         (x,) = ctx.saved_tensors
...         return 2 * x * g
>>> x = jitgrad.tensor(3.0, requires_grad=True)
>>> y = Square.apply(x)
>>> y.backward(); x.grad
tensor(6.)
"""

from __future__ import annotations

import functools
import warnings

from ..shapes import fmt_shape, sum_axes_to
from ..tensor import Tensor, alias, mark_view
from ..trace.state import STATE as _TRACE
from . import grad_mode
from .node import (
    FREED_MESSAGE,
    Node,
    edge,
    init_node,
    make_node,
    node_class,
    save_input,
    save_output,
)

__all__ = ["Function", "FunctionCtx", "once_differentiable", "BackwardCFunction"]


class FunctionCtx:
    """Methods available on ``ctx`` (the backward node of a custom Function)."""

    def save_for_backward(self, *tensors) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    "save_for_backward can only save variables, but argument "
                    f"{tensors.index(t)} is of type {type(t).__name__}"
                )
        self._to_save = tensors

    def save_for_forward(self, *tensors) -> None:
        self._saved_for_forward = tensors

    def mark_dirty(self, *tensors) -> None:
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_diff = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self._materialize = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The graph node of a custom Function application; it is also the ``ctx``."""

    __slots__ = ()
    _user_code = True
    _to_save = None
    _dirty = ()
    _non_diff = ()
    _materialize = True
    needs_input_grad: tuple = ()

    @property
    def saved_tensors(self) -> tuple:
        saved = self.saved
        if saved is None:
            if self._freed:
                raise RuntimeError(FREED_MESSAGE)
            to_save = self._to_save
            return tuple(to_save) if to_save is not None else ()
        return self.unpack_saved()

    @property
    def saved_variables(self) -> tuple:
        return self.saved_tensors

    def apply(self, grads: list) -> tuple:
        fn_cls = self._fn_cls
        if self._materialize:
            metas = self._out_meta
            from ..creation import zeros
            from ..dtypes import from_numpy_dtype

            grads = [zeros(m[0], dtype=from_numpy_dtype(m[1])) if g is None and m is not None
                     else g for g, m in zip(grads, metas)]  # (a non-tensor output: None)
        result = fn_cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_in = len(self.in_meta)
        name = type(self).__name__
        if len(result) != n_in:
            if len(result) > n_in and all(r is None for r in result[n_in:]):
                result = result[:n_in]
            else:
                raise RuntimeError(
                    f"function {name} returned an incorrect number of gradients (expected "
                    f"{n_in}, got {len(result)})"
                )
        out = []
        for i, (g, meta) in enumerate(zip(result, self.in_meta)):
            if meta is None:  # non-tensor input
                if g is not None:
                    raise RuntimeError(
                        f"function {name} returned a gradient different than None at position "
                        f"{i + 1}, but the corresponding forward input was not a Variable"
                    )
                out.append(None)
                continue
            if g is None:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                raise TypeError(
                    f"function {name} returned a {type(g).__name__} as gradient {i}; expected a "
                    "Tensor or None"
                )
            shape, dtype = meta
            if g._data.shape != shape:
                if not _expandable(shape, g._data.shape):
                    raise RuntimeError(
                        f"Function {name} returned an invalid gradient at index {i} - got "
                        f"{fmt_shape(g._data.shape)} but expected shape compatible with "
                        f"{fmt_shape(shape)}"
                    )
                g = _sum_to(g, shape)
            if g._data.dtype != dtype:
                g = g.to(dtype)
            out.append(g)
        return tuple(out)


def _expandable(shape, target) -> bool:
    if len(shape) > len(target):
        return False
    for s, t in zip(reversed(shape), reversed(target)):
        if s != t and s != 1:
            return False
    return True


def _sum_to(g: Tensor, shape) -> Tensor:
    axes, reshape = sum_axes_to(g._data.shape, shape)
    r = g.sum(dim=axes, keepdim=True) if axes else g
    return r.reshape(shape) if reshape else r


class _FunctionMeta(type):
    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)
        cls._backward_cls = node_class(f"{name}Backward", BackwardCFunction)


class Function(metaclass=_FunctionMeta):
    """Base class of custom autograd operations; subclass and define static ``forward``
    (``forward(ctx, *args)``, or ``forward(*args)`` plus ``setup_context(ctx, inputs,
    output)``) and ``backward(ctx, *grad_outputs)``, then call ``apply``."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not overridden")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    vjp = backward

    def __init__(self, *args, **kwargs) -> None:
        warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd "
                      f"functions are all static, so you should invoke them on the class "
                      f"itself. Instantiating an autograd function will raise an error in a "
                      f"future version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please "
            "use new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = make_node(cls._backward_cls, (), None, None)  # edges set once it records
        ctx._fn_cls = cls
        tracer = _TRACE.tracer
        if tracer is not None:  # ctx.scale = s in forward: the call's own object
            tracer.made(ctx)
        needs = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        ctx.needs_input_grad = needs
        record = grad_mode.STATE.enabled and any(needs)
        uses_setup = cls.setup_context is not Function.setup_context
        prev = grad_mode.STATE.enabled
        grad_mode.STATE.enabled = False
        # forward AD: the forward's ops run unrecorded, but a recorded call's node carries
        # the tangents (jitgrad derives them from the Function's backward), so they lose none
        level = grad_mode.DUAL_LEVEL[0]
        lost = level.grad_was_off if level is not None else False
        try:
            if uses_setup:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        finally:
            grad_mode.STATE.enabled = prev
            if record and level is not None:
                level.grad_was_off = lost
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        outputs = _wrap_outputs(ctx, args, outputs, record)
        if record and _TRACE.tracer is not None:
            _TRACE.tracer.on_custom_function(cls)
        return outputs[0] if single else outputs

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("forward-mode AD is not supported by jitgrad")


def _wrap_outputs(ctx, args, outputs, record):
    tensor_inputs = {id(a): a for a in args if isinstance(a, Tensor)}
    dirty = {id(t) for t in ctx._dirty}
    non_diff = {id(t) for t in ctx._non_diff}
    for t in ctx._dirty:
        if id(t) not in tensor_inputs:
            raise RuntimeError("mark_dirty only accepts input tensors, but argument is not one")
        t._vc[0] += 1
    result = []
    if record:
        for t in ctx._dirty:
            if t._requires_grad and t._grad_fn is None:
                raise RuntimeError(
                    "a leaf Variable that requires grad has been used in an in-place operation."
                )
        tensors = [isinstance(a, Tensor) for a in args]
        init_node(ctx, tuple(edge(a) if t else None for a, t in zip(args, tensors)),
                  ctx.saved,
                  tuple((a._data.shape, a._data.dtype) if t else None
                        for a, t in zip(args, tensors)))
    out_meta = []
    for i, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            result.append(o)
            out_meta.append(None)
            continue
        if id(o) in tensor_inputs and id(o) not in dirty:
            o = _alias(o)  # returning an input unchanged: give a new tensor object
        out_meta.append((o._data.shape, o._data.dtype))
        if record:
            if id(o) in non_diff or o._data.dtype.kind not in "fc":
                o._requires_grad = False
            else:
                o._requires_grad = True
                o._grad_fn = ctx
                if i:
                    o._output_nr = i
        result.append(o)
    ctx._out_meta = tuple(out_meta)
    ctx.n_outputs = len(outputs)
    if record:
        to_save = ctx._to_save
        if to_save is not None:
            out_ids = {id(o) for o in result if isinstance(o, Tensor)}
            ctx.saved = tuple(
                None if t is None else (save_output(t) if id(t) in out_ids else save_input(t))
                for t in to_save
            )
            ctx._to_save = None
    return tuple(result)


def _alias(t: Tensor) -> Tensor:
    a = mark_view(alias(t._data), t)
    a._requires_grad = t._requires_grad
    return a


def once_differentiable(fn):
    """Decorate a Function's ``backward`` that is not itself differentiable: it runs without
    recording, and a second-order backward through it raises a clear error."""

    @functools.wraps(fn)
    def wrapper(ctx, *grads):
        prev = grad_mode.STATE.enabled
        grad_mode.STATE.enabled = False
        try:
            out = fn(ctx, *grads)
        finally:
            grad_mode.STATE.enabled = prev
        if not prev or not any(isinstance(g, Tensor) and g._requires_grad for g in grads):
            return out
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        edges = tuple(edge(g) for g in grads if isinstance(g, Tensor))
        node = make_node(_DelayedError, edges, None, None)
        wrapped = []
        for o in outs:
            if isinstance(o, Tensor) and o._data.dtype.kind in "fc":
                o = _alias(o)
                o._requires_grad = True
                o._grad_fn = node
            wrapped.append(o)
        return wrapped[0] if single else tuple(wrapped)

    return wrapper


class _DelayedErrorBase(Node):
    __slots__ = ()

    def apply(self, grads):
        raise RuntimeError(
            "trying to differentiate twice a function that was marked with @once_differentiable"
        )


_DelayedError = node_class("DelayedError", _DelayedErrorBase)
