"""Attaches operators and methods to :class:`~jitgrad.tensor.Tensor`.

The methods of ops (``x.tanh()``, ``x + y``, ``x.add_(y)``) are declared with the functions
that run them (:mod:`jitgrad.ops.api`) and derived from the registry; this module adds the
hand-written rest: conversions, in-place writes, NumPy-only helpers.
``jitgrad.ops`` calls :func:`install` once every op module is imported; keeping the methods
here keeps ``tensor.py`` free of maths.
"""

from __future__ import annotations

import numbers
import sys

import numpy as np

from .. import devices, dtypes
from ..autograd import grad_mode
from ..memory_format import has_layout, preserve_format
from ..shapes import broadcast_sizes
from ..tensor import Tensor, wrap
from ..trace.state import STATE as _TRACE
from . import movement as M
from .api import method_table
from .complex_functions import TENSOR_METHODS as COMPLEX_METHODS
from .diagonals import fill_diagonal_
from .inplace import (
    apply_inplace,
    check_inplace_allowed,
    check_writeable,
    inplace_view,
    overlapping_operands,
    views_autograd,
)
from .numpy_names import accept_numpy_names
from .random_inplace import sampler_methods
from .spectral import TENSOR_METHODS as SPECTRAL_METHODS
from .tensor_compat import COMPAT_METHODS
from .tensor_extras import EXTRA_METHODS
from .torch_namespace import TENSOR_METHODS

_STATE = grad_mode.STATE


# ---------------------------------------------------------------------- helpers
def _lift(x, like):
    if isinstance(x, Tensor):
        return x
    from ..creation import tensor

    return tensor(x, dtype=dtypes.promote_scalar(like.dtype, x), device=like.device)


# -------------------------------------------------------------------- conversions
_TO_OVERLOADS = (
    " * (torch.device device = None, torch.dtype dtype = None, bool non_blocking = False, "
    "bool copy = False, *, torch.memory_format memory_format = None)\n"
    " * (torch.dtype dtype, bool non_blocking = False, bool copy = False, *, "
    "torch.memory_format memory_format = None)\n"
    " * (Tensor tensor, bool non_blocking = False, bool copy = False, *, "
    "torch.memory_format memory_format = None)\n")


def parse_to_args(args: tuple, kwargs: dict, what: str) -> tuple:
    """``(dtype or None, copy, device or None)`` from ``to()``'s arguments (``to(dtype)``,
    ``to(device)``, ``to(other)``, ``to(device, dtype)``, keywords; ``what`` names the
    caller in errors: "tensors", "modules")."""
    if isinstance(kwargs.get("dtype"), str):  # (a dtype's name is no dtype, in PyTorch)
        got = ", ".join(type(a).__name__ for a in args) + ", " * bool(args and kwargs) + \
            "".join(f"{k}={type(v).__name__}, " for k, v in kwargs.items())
        raise TypeError(f"to() received an invalid combination of arguments - got ({got}), but "
                        f"expected one of:\n{_TO_OVERLOADS}")
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, (str, int, devices.device)) and not isinstance(a, bool):
            device = a
        elif a is not None:
            dtype = a
    return dtype, copy, devices.parse(device)


def _to(self, *args, **kwargs):
    """``to(dtype)``, ``to(device)``, ``to(other)``, ``to(device, dtype)``; ``memory_format=``
    (``jitgrad.channels_last``...) orders the result's memory."""
    fmt = kwargs.get("memory_format")
    dtype, copy, device = parse_to_args(args, dict(kwargs), "tensors")
    t = self
    if device is not None and device != t.device:
        t, copy = M.to_device(t, device), False
    if dtype is not None:
        t, copy = M.to_dtype(t, dtype, copy=copy), False
    if fmt is not None and fmt is not preserve_format:
        if copy or not has_layout(t._data, fmt):
            return M.clone(t, memory_format=fmt)
        return t
    return M.clone(t) if copy else t


def _cuda(self, device=None, non_blocking: bool = False, memory_format=None):
    """A copy on the CUDA device (``self`` when already there)."""
    d = devices.parse("cuda" if device is None else device)
    if d.type != "cuda":
        raise RuntimeError(f"Invalid device, must be cuda device, got {device}")
    return M.to_device(self, d)


def _is_pinned(self, device=None) -> bool:
    """Whether this CPU tensor is in page-locked memory (``pin_memory()``)."""
    pinned = sys.modules.get("jitgrad.cuda.pinned")  # nothing was pinned before it loads
    return pinned is not None and devices.is_cpu_array(self._data) and \
        pinned.is_pinned(self._data)


def _cpu(self, memory_format=None):
    """A copy in host memory (``self`` when already there)."""
    return M.to_device(self, devices.CPU)


def _conv(dt):
    def method(self, memory_format=None):
        return M.to_dtype(self, dt)
    return method


def _type(self, dtype=None, non_blocking: bool = False):
    """The type's name (``"jitgrad.cuda.FloatTensor"``), or a conversion: to a dtype, or to
    a legacy type's dtype and device (``jitgrad.cuda.FloatTensor``, ``"torch.LongTensor"``)."""
    if dtype is None:
        return f"jitgrad.{'cuda.' if self.is_cuda else ''}{self.dtype.tensor_type}"
    from ..tensor_types import legacy_type

    legacy = legacy_type(dtype) if isinstance(dtype, str) else dtype
    if isinstance(legacy, type) and hasattr(legacy, "is_cuda"):
        moved = M.to_device(self, legacy.device)
        return M.to_dtype(moved, legacy.dtype)
    return M.to_dtype(self, dtype)


def _fill_(self, value):
    if isinstance(value, Tensor) and value._data.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value._data.ndim} dimensions.")
    if _TRACE.tracer is not None and not isinstance(value, Tensor):
        from ..creation import full_like

        check_inplace_allowed(self, False)
        return apply_inplace(self, full_like(self, value))
    v = value.item() if isinstance(value, Tensor) else value
    if _STATE.enabled and (self._requires_grad or views_autograd(self) or (
            isinstance(value, Tensor) and value._requires_grad)):
        from ..creation import tensor
        from .selection import where

        check_inplace_allowed(self, True)
        # the value everywhere, still in self's graph (gradient zero; NaN-safe, unlike
        # self * 0 + v) and in value's (gradient: the sum)
        never = tensor(False, device=self.device)
        return apply_inplace(self, where(never, self, value if isinstance(value, Tensor)
                                         else v))
    check_writeable(self)
    self._data[...] = v
    self._vc[0] += 1
    return self


def _zero_(self):
    return _fill_(self, 0)


def _copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        from ..creation import tensor

        src = tensor(src)
    _check_copy_shapes(self._data.shape, src._data.shape)
    if not (type(src._data) is np.ndarray and type(self._data) is np.ndarray) and \
            src.device != self.device:  # across devices: moved first (differentiable)
        src = M.to_device(src, self.device)
    overlapping_operands(self, (src,))  # (PyTorch's error for a partial overlap)
    if _TRACE.tracer is not None or (_STATE.enabled and (
            self._requires_grad or src._requires_grad or views_autograd(self))):
        res = M.expand(M.to_dtype(src, self.dtype), self._data.shape)
        return apply_inplace(self, res)
    check_writeable(self)
    xp = devices.array_namespace(self._data)
    xp.copyto(self._data, xp.broadcast_to(src._data, self._data.shape), casting="unsafe")
    self._vc[0] += 1
    return self


def _check_copy_shapes(dst: tuple, src: tuple) -> None:
    """PyTorch's errors for a ``copy_`` source that does not broadcast to the destination."""
    if dst == src:
        return
    full = broadcast_sizes(dst, src)
    if full != dst:
        raise RuntimeError(f"output with shape {list(dst)} doesn't match the broadcast shape "
                           f"{list(full)}")


def _parts(sampler):
    """A complex tensor's sampler: its real and imaginary parts drawn by ``sampler`` (as
    PyTorch's ``uniform_`` / ``normal_`` do; ``normal_``'s parts have ``std / sqrt(2)``)."""
    def draw(r, shape, *args, **kwargs):
        pairs = np.asarray(sampler(r, (*shape, 2), *args, **kwargs))
        return pairs[..., 0] + 1j * pairs[..., 1]
    return draw


def _random_inplace(sampler, check=None, complex_sampler=None):
    """An in-place sampler method: ``self`` filled with ``sampler(rng, shape, *args)``
    (``complex_sampler``'s for a complex tensor); ``check(self, *args, **kwargs)`` raises
    PyTorch's errors for bad arguments first."""
    def method(self, *args, generator=None, **kwargs):
        from ..random import rng

        if check is not None:
            check(self, *args, **kwargs)
        if complex_sampler is not None and self._data.dtype.kind == "c":
            sampler_ = complex_sampler
        else:
            sampler_ = sampler
        check_inplace_allowed(self, False) if _STATE.enabled else None
        if _TRACE.tracer is not None:
            from ..creation import _finish

            shape, dt = self._data.shape, self._data.dtype

            def make():
                return np.asarray(sampler_(rng(generator), shape, *args, **kwargs), dtype=dt)
            return apply_inplace(self, _finish(make(), False, make, "random",
                                               device=self.device))
        check_writeable(self)
        values = sampler_(rng(generator), self._data.shape, *args, **kwargs)
        values = devices.to_device(np.asarray(values, self._data.dtype), self.device)
        if _STATE.enabled and (self._requires_grad or views_autograd(self)):
            # new values that depend on nothing: the tensor's (and its base's) history says so
            return apply_inplace(self, wrap(values))
        self._data[...] = values
        self._vc[0] += 1
        return self
    return method


def _floating_only(self, kernel: str) -> None:
    if self._data.dtype.kind not in "fc":  # (complex: both parts drawn, :func:`_parts`)
        name = self.dtype.tensor_type[:-len("Tensor")]
        raise NotImplementedError(f'"{kernel}" not implemented for \'{name}\'')


def _check_normal(self, mean=0.0, std=1.0) -> None:
    _floating_only(self, "normal_kernel_cpu")
    if not std >= 0.0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


def _check_uniform(self, a=0.0, b=1.0) -> None:
    _floating_only(self, "check_uniform_bounds")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={a:g} > to={b:g}")


def _check_bernoulli(self, p=0.5) -> None:
    if isinstance(p, numbers.Real) and not 0.0 <= p <= 1.0:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")
    if isinstance(p, Tensor):  # (checked at every call of a compiled function too)
        from ..trace.effects import run_check
        from .sampling_and_sets import _bernoulli_error, _outside_unit

        run_check(p, _outside_unit, _bernoulli_error, "bernoulli_'s probability check")


def _new_factory(fn):
    def method(self, *size, dtype=None, device=None, requires_grad=False, **kw):
        from ..creation import check_sizes
        from ..shapes import as_shape

        if size:  # (checked here for PyTorch's message: zeros's own is not new_zeros's)
            check_sizes(as_shape(size))
        return fn(*size, dtype=self.dtype if dtype is None else dtype,
                  device=self.device if device is None else device,
                  requires_grad=requires_grad, **kw)
    return method


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    from ..creation import tensor

    return tensor(data, dtype=self.dtype if dtype is None else dtype,
                  device=self.device if device is None else device,
                  requires_grad=requires_grad)


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    from ..creation import full

    return full(size, fill_value, dtype=self.dtype if dtype is None else dtype,
                device=self.device if device is None else device, requires_grad=requires_grad)


def _allclose(self, other, rtol=1e-5, atol=1e-8, equal_nan=False):
    _values_read(self, other, "allclose")
    return bool(np.allclose(self._data, other._data, rtol=rtol, atol=atol, equal_nan=equal_nan))


def _equal(self, other):
    _values_read(self, other, "equal")
    return self._data.shape == other._data.shape and bool(np.array_equal(self._data,
                                                                          other._data))


def _values_read(a, b, name: str) -> None:
    """A Python bool of two tensors' values: under a trace, a value escaping it."""
    from ..trace.tracer import needs_value

    for t in (a, b):
        needs_value(t, f"{name}() (a Python bool of the values)")


def _elementwise_np(fn):
    def method(self):
        return wrap(fn(self._data))
    return method


def _mT(self):
    if self._data.ndim < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self._data.ndim}-D tensor.")
    return M.transpose(self, -2, -1)


def _numel_size(self):
    return self._data.size


def _nonzero(self, as_tuple=False):
    from ..trace.tracer import needs_value

    needs_value(self, "nonzero (its output's size depends on the values)")
    if as_tuple:  # (a 0-d tensor counts as 1-d, as PyTorch's)
        a = self._data if self._data.ndim else self._data.reshape(1)
        return tuple(wrap(i.astype(np.int64)) for i in np.nonzero(a))
    return wrap(np.argwhere(self._data).astype(np.int64))


# methods and operators that are not ops, or not only ops (the op methods are declared with
# their functions: see jitgrad.ops.api)
def _view_inplace(name: str, view: str):
    """The in-place form ``name`` of view method ``view`` (``t_`` of ``t``...)."""
    def method(self, *args, **kwargs):
        return inplace_view(self, getattr(self, view)(*args, **kwargs), name)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``{view}`` in place: this tensor becomes its view."
    return method


METHODS = {
    # the in-place view ops: the tensor takes its view's shape and strides
    "fill_diagonal_": fill_diagonal_,
    **{f"{v}_": _view_inplace(f"{v}_", v) for v in ("t", "transpose", "swapdims", "swapaxes",
                                                   "squeeze", "unsqueeze")},
    "__pos__": lambda self: self,
    # dtype / device
    "to": _to, "float": _conv(dtypes.float32), "double": _conv(dtypes.float64),
    "half": _conv(dtypes.float16), "bfloat16": _conv(dtypes.bfloat16),
    "int": _conv(dtypes.int32), "long": _conv(dtypes.int64),
    "bool": _conv(dtypes.bool_), "type": _type,
    "type_as": lambda self, other: _type(self, other.type()),
    "cpu": _cpu, "cuda": _cuda, "is_pinned": _is_pinned,
    # in-place writes
    "fill_": _fill_, "zero_": _zero_, "copy_": _copy_,
    "uniform_": _random_inplace(lambda r, s, a=0.0, b=1.0: r.uniform(a, b, s), _check_uniform,
                                _parts(lambda r, s, a=0.0, b=1.0: r.uniform(a, b, s))),
    "normal_": _random_inplace(lambda r, s, mean=0.0, std=1.0: r.normal(mean, std, s),
                               _check_normal, _parts(lambda r, s, mean=0.0, std=1.0: r.normal(
                                   mean, std * 0.7071067811865476, s))),
    "bernoulli_": _random_inplace(lambda r, s, p=0.5: r.random(s) < p, _check_bernoulli),
    # misc
    "allclose": _allclose, "equal": _equal, "nonzero": _nonzero,
    "isnan": _elementwise_np(np.isnan), "isinf": _elementwise_np(np.isinf),
    "isfinite": _elementwise_np(np.isfinite),
}


METHODS.update(EXTRA_METHODS)  # sizes, conversions, new, apply_/map_, H/mH... (no ops)
METHODS.update(TENSOR_METHODS)  # mode, dsplit, sum_to_size, layout... (no ops)
METHODS.update(COMPLEX_METHODS)  # real, imag, conj, angle, is_complex...
METHODS.update(SPECTRAL_METHODS)  # stft, istft
METHODS.update(COMPAT_METHODS)  # untyped_storage, resize, as_subclass, dim_order... (no ops)
METHODS.update(sampler_methods(_random_inplace))  # random_, exponential_, cauchy_...


def all_methods() -> dict:
    """Every ``Tensor`` method and operator this module installs: the ones declared with the
    ops (:func:`jitgrad.ops.api.method_table`) and the hand-written :data:`METHODS`."""
    table = method_table()
    both = sorted(set(table) & set(METHODS))
    if both:
        raise ValueError(f"Tensor methods declared with an op and by hand: {both}")
    return {**table, **METHODS}


def install() -> None:
    """Attach every method to ``Tensor``; run once, after every op module is imported (the
    op methods come from the registry)."""
    from .. import creation as C

    methods = all_methods()
    accept_numpy_names(methods)  # x.sum(axis=1, keepdims=True), as PyTorch's parser
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(M.T)
    Tensor.mT = property(_mT)
    Tensor.new_zeros = _new_factory(C.zeros)
    Tensor.new_ones = _new_factory(C.ones)
    Tensor.new_empty = _new_factory(C.empty)
    Tensor.new_tensor = _new_tensor
    Tensor.new_full = _new_full
    Tensor.multinomial = C.multinomial
    Tensor.__hash__ = object.__hash__  # __eq__ is element-wise; identity hashing as PyTorch
    Tensor.__eq__ = _comparison_operator(Tensor.eq, "__eq__")
    Tensor.__ne__ = _comparison_operator(Tensor.ne, "__ne__")


def _comparison_operator(method, name: str):
    """``==`` / ``!=`` as PyTorch's: element-wise against a tensor, a number or an array;
    anything else (None, a string, a list) is not compared (``NotImplemented``: Python then
    gives ``t == None`` False and ``t != None`` True, as for ``torch.Tensor``)."""
    def operator(self, other):
        if isinstance(other, (Tensor, numbers.Number, np.ndarray, np.generic)):
            return method(self, other)
        return NotImplemented

    operator.__name__ = operator.__qualname__ = name
    operator.__doc__ = method.__doc__
    return operator

