"""Attaches operators and methods to :class:`~jitgrad.tensor.Tensor`; each delegates to an op.

Imported once by ``jitgrad/__init__``; keeping this table here keeps ``tensor.py`` free of
maths and every method a one-line forward to the op that owns it.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..autograd import grad_mode
from ..tensor import Tensor, wrap
from ..trace.state import STATE as _TRACE
from . import elementwise as E
from . import linalg as L
from . import movement as M
from . import reduce as R
from .inplace import apply_inplace, check_inplace_allowed, setitem

_STATE = grad_mode.STATE
_binary = E.binary
_T = Tensor


def _reflect(fn):
    return lambda self, other: fn(other, self)


# ------------------------------------------------------------------------ operators
def _add(self, other):
    return _binary(E.ADD, self, other)


def _mul(self, other):
    return _binary(E.MUL, self, other)


def _sub(self, other):
    return _binary(E.SUB, self, other)


def _rsub(self, other):
    return _binary(E.RSUB, self, other)


def _truediv(self, other):
    return _binary(E.DIV, self, other)


def _rtruediv(self, other):
    return E.mul(E.reciprocal(self), other)


def _pow(self, exponent):
    return E.pow(self, exponent)


def _rpow(self, base):
    return E.pow(base, self)


def _no_grad_numpy(name, fn):
    """Integer-style ops with no gradient (floor division, modulo, bitwise) via NumPy."""
    def op(self, other):
        a = self._data
        b = other._data if isinstance(other, Tensor) else other
        d = dtypes.result_type(self, other).np
        with np.errstate(divide="ignore", invalid="ignore"):
            r = fn(a.astype(d, copy=False), b.astype(d, copy=False) if isinstance(b, np.ndarray)
                   else b)
        return wrap(np.asarray(r).astype(d, copy=False) if np.asarray(r).dtype != np.bool_
                    else np.asarray(r))
    op.__name__ = name
    return op


def _reflected_numpy(name, fn):
    base = _no_grad_numpy(name, fn)
    return lambda self, other: base(_lift(other, self), self)


def _lift(x, like):
    if isinstance(x, Tensor):
        return x
    from ..creation import tensor

    return tensor(x, dtype=dtypes.promote_scalar(like.dtype, x))


def _and(self, other):
    if self._data.dtype == np.bool_ and (getattr(other, "dtype", None) == dtypes.bool_ or
                                         isinstance(other, bool)):
        return E.logical_and(self, other)
    return _no_grad_numpy("__and__", np.bitwise_and)(self, other)


def _or(self, other):
    if self._data.dtype == np.bool_ and (getattr(other, "dtype", None) == dtypes.bool_ or
                                         isinstance(other, bool)):
        return E.logical_or(self, other)
    return _no_grad_numpy("__or__", np.bitwise_or)(self, other)


def _xor(self, other):
    if self._data.dtype == np.bool_ and (getattr(other, "dtype", None) == dtypes.bool_ or
                                         isinstance(other, bool)):
        return E.logical_xor(self, other)
    return _no_grad_numpy("__xor__", np.bitwise_xor)(self, other)


def _invert(self):
    if self._data.dtype == np.bool_:
        return E.logical_not(self)
    if self._data.dtype.kind == "f":
        raise TypeError("bitwise_not_cpu not implemented for 'Float'")
    return wrap(np.invert(self._data))


def _inplace(fn):
    def method(self, *args, **kwargs):
        return apply_inplace(self, fn(self, *args, **kwargs))
    method.__name__ = fn.__name__ + "_"
    return method


def _iop(fn):
    def method(self, other):
        return apply_inplace(self, fn(self, other))
    return method


# -------------------------------------------------------------------- conversions
def parse_to_args(args: tuple, kwargs: dict, what: str) -> tuple:
    """``(dtype or None, copy)`` from ``to()``'s arguments (``to(dtype)``, ``to(device)``,
    ``to(other)``, ``to(device, dtype)``, keywords); any device but the CPU is an error
    naming ``what`` ("tensors", "modules")."""
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, str) or a is None:
            device = a
        else:
            dtype = a
    if device is not None and str(device) not in ("cpu", "cpu:0"):
        raise RuntimeError(f"jitgrad {what} live on the CPU; cannot move to {device!r}")
    return dtype, copy


def _to(self, *args, **kwargs):
    """``to(dtype)``, ``to(device)``, ``to(other)``, ``to(device, dtype)``."""
    dtype, copy = parse_to_args(args, dict(kwargs), "tensors")
    if dtype is None:
        return M.clone(self) if copy else self
    return M.to_dtype(self, dtype, copy=copy)


def _conv(dt):
    def method(self, memory_format=None):
        return M.to_dtype(self, dt)
    return method


def _type(self, dtype=None):
    if dtype is None:
        return f"jitgrad.{self.dtype.tensor_type}"
    return M.to_dtype(self, dtype)


def _fill_(self, value):
    if _TRACE.tracer is not None and not isinstance(value, Tensor):
        from ..creation import full_like

        check_inplace_allowed(self, False)
        return apply_inplace(self, full_like(self, value))
    v = value.item() if isinstance(value, Tensor) else value
    if _STATE.enabled and (self._requires_grad or (isinstance(value, Tensor) and
                                                     value._requires_grad)):
        check_inplace_allowed(self, True)
        return apply_inplace(self, E.add(E.mul(self, 0.0), v))
    if not self._data.flags.writeable:
        check_inplace_allowed(self, False)
    self._data[...] = v
    self._vc[0] += 1
    return self


def _zero_(self):
    return _fill_(self, 0)


def _copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        from ..creation import tensor

        src = tensor(src)
    if _TRACE.tracer is not None or (_STATE.enabled and (self._requires_grad or
                                                          src._requires_grad)):
        res = M.expand(M.to_dtype(src, self.dtype), self._data.shape)
        return apply_inplace(self, res)
    np.copyto(self._data, np.broadcast_to(src._data, self._data.shape), casting="unsafe")
    self._vc[0] += 1
    return self


def _random_inplace(sampler):
    def method(self, *args, generator=None, **kwargs):
        from ..random import rng

        check_inplace_allowed(self, False) if _STATE.enabled else None
        if _TRACE.tracer is not None:
            from ..creation import _finish

            shape, dt = self._data.shape, self._data.dtype

            def make():
                return np.asarray(sampler(rng(generator), shape, *args, **kwargs), dtype=dt)
            return apply_inplace(self, _finish(make(), False, make, "random"))
        self._data[...] = sampler(rng(generator), self._data.shape, *args, **kwargs)
        self._vc[0] += 1
        return self
    return method


def _new_factory(fn):
    def method(self, *size, dtype=None, requires_grad=False, **kw):
        return fn(*size, dtype=self.dtype if dtype is None else dtype,
                  requires_grad=requires_grad, **kw)
    return method


def _new_tensor(self, data, dtype=None, requires_grad=False):
    from ..creation import tensor

    return tensor(data, dtype=self.dtype if dtype is None else dtype,
                  requires_grad=requires_grad)


def _new_full(self, size, fill_value, dtype=None, requires_grad=False):
    from ..creation import full

    return full(size, fill_value, dtype=self.dtype if dtype is None else dtype,
                requires_grad=requires_grad)


def _allclose(self, other, rtol=1e-5, atol=1e-8, equal_nan=False):
    return bool(np.allclose(self._data, other._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


def _equal(self, other):
    return self._data.shape == other._data.shape and bool(np.array_equal(self._data,
                                                                          other._data))


def _reduce_bool(fn):
    def method(self, dim=None, keepdim=False):
        return wrap(np.asarray(fn(self._data, axis=dim, keepdims=keepdim)))
    return method


def _elementwise_np(fn):
    def method(self):
        return wrap(fn(self._data))
    return method


def _setitem(self, index, value):
    setitem(self, index, value)


def _mT(self):
    return M.transpose(self, -2, -1)


def _numel_size(self):
    return self._data.size


def _view_as(self, other):
    return M.view(self, other._data.shape)


def _reshape_as(self, other):
    return M.reshape(self, other._data.shape)


def _softmax(self, dim, dtype=None):
    return R.softmax(self, dim, dtype)


def _log_softmax(self, dim, dtype=None):
    return R.log_softmax(self, dim, dtype)


def _nonzero(self, as_tuple=False):
    if as_tuple:
        return tuple(wrap(i.astype(np.int64)) for i in np.nonzero(self._data))
    return wrap(np.argwhere(self._data).astype(np.int64))


METHODS = {
    # operators
    "__add__": _add, "__radd__": _add, "__iadd__": _iop(_add),
    "__sub__": _sub, "__rsub__": _rsub, "__isub__": _iop(_sub),
    "__mul__": _mul, "__rmul__": _mul, "__imul__": _iop(_mul),
    "__truediv__": _truediv, "__rtruediv__": _rtruediv, "__itruediv__": _iop(_truediv),
    "__pow__": _pow, "__rpow__": _rpow, "__ipow__": _iop(_pow),
    "__matmul__": L.matmul, "__rmatmul__": _reflect(L.matmul),
    "__neg__": E.neg, "__pos__": lambda self: self, "__abs__": E.abs,
    "__eq__": E.eq, "__ne__": E.ne, "__lt__": E.lt, "__le__": E.le, "__gt__": E.gt,
    "__ge__": E.ge,
    "__and__": _and, "__rand__": _and, "__or__": _or, "__ror__": _or, "__xor__": _xor,
    "__rxor__": _xor, "__invert__": _invert,
    "__floordiv__": _no_grad_numpy("__floordiv__", np.floor_divide),
    "__rfloordiv__": _reflected_numpy("__rfloordiv__", np.floor_divide),
    "__mod__": _no_grad_numpy("__mod__", np.mod),
    "__rmod__": _reflected_numpy("__rmod__", np.mod),
    "__getitem__": M.getitem, "__setitem__": _setitem,
    # arithmetic and math
    "add": E.add, "sub": E.sub, "subtract": E.sub, "mul": E.mul, "multiply": E.mul,
    "div": E.div, "divide": E.div, "true_divide": E.div, "pow": E.pow, "neg": E.neg,
    "negative": E.neg, "abs": E.abs, "sign": E.sign, "exp": E.exp, "expm1": E.expm1,
    "log": E.log, "log1p": E.log1p, "sqrt": E.sqrt, "rsqrt": E.rsqrt,
    "reciprocal": E.reciprocal, "square": E.square, "sin": E.sin, "cos": E.cos,
    "tanh": E.tanh, "sigmoid": E.sigmoid, "relu": E.relu, "clamp": E.clamp, "clip": E.clamp,
    "maximum": E.maximum, "minimum": E.minimum, "where": lambda self, c, o: E.where(c, self, o),
    "masked_fill": E.masked_fill,
    "eq": E.eq, "ne": E.ne, "lt": E.lt, "le": E.le, "gt": E.gt, "ge": E.ge,
    "logical_and": E.logical_and, "logical_or": E.logical_or, "logical_not": E.logical_not,
    "logical_xor": E.logical_xor,
    # reductions
    "sum": R.sum, "mean": R.mean, "max": R.max, "min": R.min, "amax": R.amax, "amin": R.amin,
    "argmax": R.argmax, "argmin": R.argmin, "logsumexp": R.logsumexp, "softmax": _softmax,
    "log_softmax": _log_softmax, "var": R.var, "std": R.std, "prod": R.prod,
    "any": _reduce_bool(np.any), "all": _reduce_bool(np.all),
    # linear algebra
    "matmul": L.matmul, "mm": L.mm, "mv": L.mv, "dot": L.dot, "bmm": L.bmm, "outer": L.outer,
    # movement
    "reshape": M.reshape, "view": M.view, "view_as": _view_as, "reshape_as": _reshape_as,
    "flatten": M.flatten, "unflatten": M.unflatten, "squeeze": M.squeeze,
    "unsqueeze": M.unsqueeze, "permute": M.permute, "transpose": M.transpose,
    "swapaxes": M.transpose, "t": M.t, "movedim": M.movedim, "expand": M.expand,
    "expand_as": M.expand_as, "select": M.select, "narrow": M.narrow, "split": M.split,
    "chunk": M.chunk, "unbind": M.unbind, "clone": lambda self, memory_format=None: M.clone(
        self), "contiguous": lambda self, memory_format=None: M.contiguous(self),
    # dtype / device
    "to": _to, "float": _conv(dtypes.float32), "double": _conv(dtypes.float64),
    "half": _conv(dtypes.float16), "int": _conv(dtypes.int32), "long": _conv(dtypes.int64),
    "bool": _conv(dtypes.bool_), "type": _type, "type_as": lambda self, o: M.to_dtype(
        self, o.dtype), "cpu": lambda self: self,
    # in-place
    "add_": _inplace(E.add), "sub_": _inplace(E.sub), "mul_": _inplace(E.mul),
    "div_": _inplace(E.div), "pow_": _inplace(E.pow), "neg_": _inplace(E.neg),
    "abs_": _inplace(E.abs), "exp_": _inplace(E.exp), "log_": _inplace(E.log),
    "sqrt_": _inplace(E.sqrt), "sin_": _inplace(E.sin), "cos_": _inplace(E.cos),
    "tanh_": _inplace(E.tanh), "sigmoid_": _inplace(E.sigmoid), "relu_": _inplace(E.relu),
    "clamp_": _inplace(E.clamp), "clip_": _inplace(E.clamp),
    "masked_fill_": _inplace(E.masked_fill), "reciprocal_": _inplace(E.reciprocal),
    "square_": _inplace(E.square), "fill_": _fill_, "zero_": _zero_, "copy_": _copy_,
    "uniform_": _random_inplace(lambda r, s, a=0.0, b=1.0: r.uniform(a, b, s)),
    "normal_": _random_inplace(lambda r, s, mean=0.0, std=1.0: r.normal(mean, std, s)),
    # misc
    "allclose": _allclose, "equal": _equal, "nonzero": _nonzero,
    "isnan": _elementwise_np(np.isnan), "isinf": _elementwise_np(np.isinf),
    "isfinite": _elementwise_np(np.isfinite),
}


def _install() -> None:
    from .. import creation as C

    for name, fn in METHODS.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(M.T)
    Tensor.mT = property(_mT)
    Tensor.new_zeros = _new_factory(C.zeros)
    Tensor.new_ones = _new_factory(C.ones)
    Tensor.new_empty = _new_factory(C.empty)
    Tensor.new_tensor = _new_tensor
    Tensor.new_full = _new_full
    Tensor.__hash__ = object.__hash__  # __eq__ is element-wise; identity hashing as PyTorch


_install()
