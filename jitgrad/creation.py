"""Tensor factories: ``tensor``, ``zeros``, ``arange``, ``randn``... with PyTorch's dtype rules
(Python floats -> float32, ints -> int64, bools -> bool)."""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from . import devices, dtypes
from .random import rng
from .shapes import as_shape, broadcast_sizes
from .tensor import Tensor, wrap
from .trace.numpy_args import base_array
from .trace.state import STATE as _TRACE
from .trace.tracer import needs_value

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "eye",
           "arange", "linspace", "logspace", "rand", "randn", "randint", "randperm",
           "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
           "randint_like", "scalar_tensor", "normal", "const_tensor"]


def _promote(a: np.dtype | None, b: np.dtype) -> np.dtype:
    """PyTorch's promotion of two item dtypes: the higher category (bool < integer <
    floating < complex) wins (a complex with a float64: complex128); within one, NumPy's
    (``uint8`` with ``int8`` is ``int16``)."""
    if a is None or a == b:
        return b
    ca, cb = _CATEGORY.get(a.kind, 0), _CATEGORY.get(b.kind, 0)
    if ca != cb:
        if max(ca, cb) == 3 and min(ca, cb) == 2:
            return np.promote_types(a, b)
        return a if ca > cb else b
    return np.promote_types(a, b)


_CATEGORY = {"c": 3, "f": 2, "i": 1, "u": 1}


def _infer_dtype(data) -> np.dtype:
    """PyTorch's dtype inference for nested Python sequences: the promotion of every
    item's dtype -- a tensor's, a NumPy array's or scalar's own (``[np.float64(0.1)]`` is
    float64, ``[np.int32(1)]`` int32), a Python float the default dtype, an int int64, a
    bool bool."""
    py = 0  # Python scalars seen: 1 bool, 2 int, 3 float, 4 complex
    typed = None  # promotion of the dtypes of tensors and NumPy items
    stack = [data]
    while stack:
        x = stack.pop()
        tx = type(x)
        if tx is float:
            py = max(py, 3)
        elif tx is int:
            py = max(py, 2)
        elif tx is bool:
            py = max(py, 1)
        elif tx is list or tx is tuple or tx is range:
            stack.extend(x)
        elif isinstance(x, Tensor):
            typed = _promote(typed, x._data.dtype)
        elif isinstance(x, np.ndarray):
            if x.dtype == object:
                stack.extend(x.ravel().tolist())
            else:
                typed = _promote(typed, x.dtype)
        elif isinstance(x, np.generic):
            typed = _promote(typed, x.dtype)
        elif isinstance(x, bool):
            py = max(py, 1)
        elif isinstance(x, numbers.Integral):
            py = max(py, 2)
        elif isinstance(x, numbers.Real):
            py = max(py, 3)
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, numbers.Complex):
            py = 4
        elif isinstance(x, (str, bytes)):
            raise TypeError(f"new(): invalid data type '{type(x).__name__}'")
        else:
            raise RuntimeError(f"Could not infer dtype of {type(x).__name__}")
    if py:
        default = dtypes.get_default_dtype()
        typed = _promote(typed, (None, np.dtype(np.bool_), np.dtype(np.int64), default.np,
                                 default.to_complex().np)[py])
    if typed is None:
        return dtypes.get_default_dtype().np
    dtypes.from_numpy_dtype(typed)  # raises for a dtype jitgrad does not have
    return typed


def _to_nested(data):
    if isinstance(data, Tensor):  # an item of a sequence: a number, as PyTorch reads it
        needs_value(data, "building a tensor from a tensor's values (tensor([a[0], ...]))")
        if data._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return data._data.reshape(())
    if isinstance(data, (list, tuple, range)):
        return [_to_nested(x) for x in data]
    return data


def _array_from_data(data, dtype) -> np.ndarray:
    """A fresh C-contiguous array for ``jitgrad.tensor(data, dtype=...)``."""
    if isinstance(data, Tensor):
        needs_value(data, "building a tensor from a tensor's values (tensor(t))")
        arr = data._data
        np_dt = arr.dtype if dtype is None else dtypes.to_dtype(dtype).np
        return np.array(arr, dtype=np_dt, copy=True, order="C")
    if isinstance(data, np.ndarray):
        if dtype is None:
            dtypes.from_numpy_dtype(data.dtype)  # raises for unsupported dtypes
            return np.array(data, copy=True, order="C")
        return np.array(data, dtype=dtypes.to_dtype(dtype).np, copy=True, order="C")
    if isinstance(data, np.generic):
        np_dt = data.dtype if dtype is None else dtypes.to_dtype(dtype).np
        dtypes.from_numpy_dtype(np_dt)
        return np.array(data, dtype=np_dt)
    np_dt = _infer_dtype(data) if dtype is None else dtypes.to_dtype(dtype).np
    nested = _to_nested(data)
    try:
        arr = np.array(nested, dtype=np_dt)
    except ValueError as e:
        _check_rectangular(nested)
        raise ValueError(f"could not build a tensor from the given data: {e}") from None
    if arr.dtype == object:
        _check_rectangular(nested)
        raise ValueError("expected a rectangular (non-ragged) sequence")
    return arr


def _is_sequence(x) -> bool:
    return isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.ndim > 0)


def _check_rectangular(data) -> None:
    """PyTorch's error for nested sequences that are not rectangular: the sizes are those
    of the first element at each depth, and the first sequence of another length (or a
    number where a sequence belongs) is named."""
    sizes = []
    x = data
    while _is_sequence(x):
        sizes.append(len(x))
        if not len(x):
            break
        x = x[0]

    def walk(x, dim: int) -> None:
        if dim == len(sizes):
            if _is_sequence(x):
                raise TypeError(f"'{type(x).__name__}' object cannot be interpreted as a "
                                "number: the nested sequences are not rectangular")
            return
        if not _is_sequence(x):
            raise TypeError("not a sequence")
        if len(x) != sizes[dim]:
            raise ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} "
                             f"(got {len(x)})")
        for item in x:
            walk(item, dim + 1)

    walk(data, 0)


def _filled(name: str, shape: tuple, d, dev, *value):
    """``np.<name>(shape, *value, d)`` (``zeros``, ``ones``, ``empty``, ``full``) in ``dev``'s
    memory. CUDA memory is filled on the device, with the value NumPy's ``full`` stores: no
    host array made and copied over (host work at every call -- ``backward()``'s seed is
    ``ones_like`` of the loss -- and a PCIe transfer of the whole tensor)."""
    xp = devices.array_module(dev)
    if xp is np:
        return getattr(np, name)(shape, *value, d)
    if np.dtype(d).kind == "c":  # (to_device's error: complex tensors are CPU-only)
        return devices.to_device(np.empty(0, d), dev)
    if value:
        value = (np.full((), value[0], d)[()],)
    return getattr(xp, name)(shape, *value, d)


def _fill_factory(name: str, shape: tuple, d, dev, requires_grad: bool, *value,
                  pin_memory: bool = False) -> Tensor:
    """The tensor of a fill factory (:func:`_filled`; made again at every call of a
    compiled function that makes it), in pinned memory when ``pin_memory``."""
    if pin_memory:
        def make():
            return _pinned(_filled(name, shape, d, dev, *value), dev)
    else:
        def make():
            return _filled(name, shape, d, dev, *value)
    return _finish(make(), requires_grad, make, device=dev)


def _pinned(arr: np.ndarray, dev) -> np.ndarray:
    """Host array ``arr`` copied to pinned memory (``pin_memory=True`` of a factory)."""
    if dev is not None and dev.type != "cpu":
        raise RuntimeError("Only dense CPU tensors can be pinned")
    from .cuda.pinned import pinned_copy

    return pinned_copy(arr)


def _finish(arr: np.ndarray, requires_grad: bool, regen=None, kind: str = "fill",
            device=None) -> Tensor:
    """Wrap a factory's array, moved to ``device`` (a parsed device; None: the CPU). Under
    ``jitgrad.compile`` tracing, ``regen`` (a callable making the value again) lets the graph
    recreate it each call — ``kind`` "random" draws anew from the generator, as eager would;
    without ``regen`` the value is a graph constant. Random values are drawn on the host
    and moved, so a seed gives the same numbers on every device."""
    if device is not None and device.type != "cpu":
        arr = devices.to_device(arr, device)
        if regen is not None:
            host_regen = regen

            def regen():
                return devices.to_device(host_regen(), device)
    t = wrap(arr)
    tr = _TRACE.tracer
    if tr is not None:
        if regen is not None:
            tr.on_generated(t, kind, regen)
        else:
            tr.on_constant(t)
    if requires_grad:
        if arr.dtype.kind not in "fc":
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients"
            )
        t._requires_grad = True
    return t


def tensor(data, dtype=None, device=None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (numbers, nested sequences, arrays).

    >>> import jitgrad
    >>> jitgrad.tensor([[1, 2], [3, 4.5]])
    tensor([[1.0000, 2.0000],
            [3.0000, 4.5000]])
    """
    if isinstance(data, Tensor):
        warnings.warn(
            "To copy construct from a tensor, it is recommended to use sourceTensor.clone()."
            "detach() or sourceTensor.clone().detach().requires_grad_(True), rather than "
            "jitgrad.tensor(sourceTensor).", UserWarning, stacklevel=2)
    dev = _device(device)
    tr = _TRACE.tracer
    if tr is not None and isinstance(data, np.ndarray) and tr.is_input(data):
        # a NumPy argument of a compiled function: a copy of that input, not a constant
        data = base_array(data)
        t = wrap(data).clone() if dtype is None else wrap(data).to(dtypes.to_dtype(dtype),
                                                                    copy=True)
        return t.requires_grad_() if requires_grad else t
    arr = _array_from_data(data, dtype)
    return _finish(_pinned(arr, dev) if pin_memory else arr, requires_grad, device=dev)


def scalar_tensor(s, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A 0-dim tensor (float32 unless ``dtype``)."""
    dev = _device(device)
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    return _finish(np.array(s, dtype=d.np), requires_grad, device=dev)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor, sharing memory with tensors/arrays when no conversion is needed."""
    dev = _device(device)
    if isinstance(data, Tensor):
        t = data if dtype is None else data.to(dtype)
    elif isinstance(data, np.ndarray) and (dtype is None or
                                           dtypes.to_dtype(dtype).np == data.dtype):
        dtypes.from_numpy_dtype(data.dtype)
        t = wrap(base_array(data))
    else:
        t = wrap(_array_from_data(data, dtype))
    return t if dev is None else t.to(dev)


def from_dlpack(ext) -> Tensor:
    """A tensor sharing memory with ``ext``: any object exporting DLPack (a NumPy array, a
    PyTorch tensor, a CuPy array...) or, on a GPU, ``__cuda_array_interface__`` (CUDA
    memory stays on the device, host memory on the host; no copy)."""
    if isinstance(ext, Tensor):
        return ext
    if hasattr(ext, "__dlpack_device__"):
        kind = int(ext.__dlpack_device__()[0])
        if kind == 1:  # kDLCPU
            arr = np.from_dlpack(ext)
            dtypes.from_numpy_dtype(arr.dtype)
            return wrap(arr)
        if kind != 2:  # kDLCUDA
            raise RuntimeError(f"from_dlpack: unsupported DLPack device type {kind}: jitgrad "
                               "takes CPU and CUDA memory")
    elif not hasattr(ext, "__cuda_array_interface__"):
        raise TypeError(f"from_dlpack: expected an object exporting __dlpack__ or "
                        f"__cuda_array_interface__, got {type(ext).__name__}")
    from .cuda import runtime

    if runtime.require() != "gpu":
        raise RuntimeError("from_dlpack: CUDA memory needs a GPU (the simulator has none)")
    import cupy

    arr = cupy.from_dlpack(ext) if hasattr(ext, "__dlpack__") else cupy.asarray(ext)
    dtypes.from_numpy_dtype(arr.dtype)
    return wrap(arr)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``ndarray``."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    dtypes.from_numpy_dtype(ndarray.dtype)
    if any(st < 0 for st in ndarray.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with "
            "negative strides are not currently supported. (You can probably work around "
            "this by making a copy of your array  with array.copy().) ")
    return wrap(base_array(ndarray))


def _device(device, like: Tensor | None = None):
    """``device=``'s argument parsed; when None, ``like``'s device, or without ``like`` the
    default device (``jitgrad.set_default_device``; None for the CPU)."""
    if device is None and like is not None:
        return like.device
    return devices.factory_device(device)


def _size(sizes: tuple, size, name: str) -> tuple:
    """The shape of a factory call: positional sizes, or the ``size=`` keyword (not both),
    checked non-negative (:func:`check_sizes`)."""
    if size is None:
        return check_sizes(as_shape(sizes), name)
    if sizes:
        raise TypeError(f"{name}() got multiple values for argument 'size'")
    return check_sizes(as_shape((size,)), name)


def check_sizes(shape: tuple, name: str = "") -> tuple:
    """``shape``, after PyTorch's check that a new tensor's sizes are non-negative (with its
    messages: ``jitgrad.zeros`` has its own), where NumPy's ``ValueError`` would leak."""
    for n in shape:
        if n < 0:
            if name == "zeros":
                raise RuntimeError("zeros: Dimension size must be non-negative.")
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: "
                               f"{list(shape)}")
    return shape


def _out(t: Tensor, out, name: str) -> Tensor:
    """A factory's ``out=``: ``t`` written into ``out`` (see ``ops.inplace.write_out``)."""
    if out is None:
        return t
    from .ops.inplace import write_out

    return write_out(out, t, name)


def _dt(dtype, default=None) -> np.dtype:
    if dtype is None:
        return (default or dtypes.get_default_dtype()).np
    return dtypes.to_dtype(dtype).np


def zeros(*sizes, size=None, dtype=None, device=None, requires_grad: bool = False,
          out=None, pin_memory: bool = False, layout=None) -> Tensor:
    """A tensor of zeros (``zeros(2, 3)``, ``zeros((2, 3))`` or ``zeros(size=(2, 3))``)."""
    _check_layout(layout)
    dev = _device(device)
    shape, d = _size(sizes, size, "zeros"), _dt(dtype)
    return _out(_fill_factory("zeros", shape, d, dev, requires_grad, pin_memory=pin_memory),
                out, "zeros")


def ones(*sizes, size=None, dtype=None, device=None, requires_grad: bool = False,
         out=None, pin_memory: bool = False, layout=None) -> Tensor:
    """A tensor of ones (sizes as :func:`zeros`)."""
    _check_layout(layout)
    dev = _device(device)
    shape, d = _size(sizes, size, "ones"), _dt(dtype)
    return _out(_fill_factory("ones", shape, d, dev, requires_grad, pin_memory=pin_memory),
                out, "ones")


def empty(*sizes, size=None, dtype=None, device=None, requires_grad: bool = False,
          pin_memory: bool = False, layout=None, memory_format=None) -> Tensor:
    """An uninitialised tensor (sizes as :func:`zeros`; ``pin_memory``: in pinned host
    memory, see ``Tensor.pin_memory``)."""
    _check_layout(layout)
    dev = _device(device)
    shape, d = _size(sizes, size, "empty"), _dt(dtype)
    out = _fill_factory("empty", shape, d, dev, False, pin_memory=pin_memory)
    if memory_format is not None:
        from .memory_format import preserve_format

        if memory_format is preserve_format:
            raise RuntimeError("unsupported memory format Preserve")
        out = _like_format(out, out, memory_format)
    return out.requires_grad_() if requires_grad else out


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False,
         pin_memory: bool = False, layout=None) -> Tensor:
    """A tensor filled with ``fill_value`` (dtype inferred from it, as PyTorch)."""
    _check_layout(layout)
    dev = _device(device)
    if not isinstance(fill_value, (numbers.Number, Tensor)):
        raise TypeError(f"full(): argument 'fill_value' (position 2) must be Number, not "
                        f"{type(fill_value).__name__}")
    if dtype is None:
        dtype = dtypes.scalar_dtype(fill_value)
    shape, d = _size((), size, "full"), _dt(dtype)
    return _fill_factory("full", shape, d, dev, requires_grad, fill_value,
                         pin_memory=pin_memory)


def eye(n: int, m: int | None = None, *, dtype=None, device=None,
        requires_grad: bool = False) -> Tensor:
    """The identity matrix (``n x m``)."""
    dev = _device(device)
    d = _dt(dtype)
    for name, k in (("n", n), ("m", m)):
        if k is not None and k < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {k}")
    return _finish(np.eye(n, m, dtype=d), requires_grad, lambda: np.eye(n, m, dtype=d),
                   device=dev)


def range_bounds(start, end, step) -> tuple:
    """``(start, end, step)`` of ``arange`` / ``range`` as numbers (0-d tensors count as the
    numbers they hold, an int64 one as an int, as PyTorch's; one bound given: ``0, end``),
    checked with PyTorch's messages."""
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start:g} -> {end:g}")
    if (end - start > 0 and step < 0) or (end - start < 0 and step > 0):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    return start, end, step


def arange(start, end=None, step=1, *, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 for integer args."""
    dev = _device(device)
    start, end, step = range_bounds(start, end, step)
    if dtype is None:
        ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                   for v in (start, end, step))
        dtype = dtypes.int64 if ints else dtypes.get_default_dtype()
    d = _dt(dtype)
    n = max(int(np.ceil((end - start) / step)), 0)
    exact = d.kind in "iu" and all(isinstance(v, (int, np.integer)) for v in (start, step))

    def make():
        # integers are made where they live (position ids on CUDA: no copy from the
        # host); floats on the host, in NumPy's arithmetic
        xp = devices.array_module(dev) if exact else np
        arr = start + step * xp.arange(n, dtype=np.float64 if d.kind == "f" else np.int64)
        return arr.astype(d)
    return _finish(make(), requires_grad, make, device=dev)


def _check_steps(steps: int) -> None:
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")


def linspace(start, end, steps: int, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (complex when
    either end is complex and no ``dtype`` is given), bit for bit as PyTorch's CPU kernel
    computes them (:func:`_linspace_values`)."""
    dev = _device(device)
    _check_steps(steps)
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    if dtype is None and any(isinstance(v, complex) for v in (start, end)):
        dtype = dtypes.complex128 if dtypes.get_default_dtype() is dtypes.float64 else \
            dtypes.complex64
    return _finish(_linspace_values(start, end, int(steps), _dt(dtype)), requires_grad,
                   device=dev)


#: the C++ names PyTorch's "cannot be converted" error gives each dtype
_C_TYPE_NAMES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int",
                 "int64": "int64_t", "float16": "c10::Half", "float32": "float",
                 "float64": "double"}


def _check_fits(v, d: np.dtype) -> None:
    """PyTorch's check of a number converted to the dtype ``d`` (``c10::checked_convert``):
    an integer dtype takes the numbers in its range (an unsigned one also the negative
    integers down to ``-max``, wrapped), a floating one any number but a finite one beyond
    its largest value."""
    if d.kind in "iu":
        info = np.iinfo(d)
        if isinstance(v, (bool, int, np.integer)):
            bad = (v > info.max or -v > info.max) if d.kind == "u" and v < 0 else \
                not info.min <= v <= info.max
        else:
            bad = not info.min <= v <= info.max  # (NaN too)
    elif d.kind == "f":
        bad = math.isfinite(v) and abs(v) > float(np.finfo(d).max)
    else:
        return
    if bad:
        raise RuntimeError(f"value cannot be converted to type {_C_TYPE_NAMES[d.name]} "
                           "without overflow")


def _linspace_values(start, end, steps: int, d: np.dtype) -> np.ndarray:
    """PyTorch's ``linspace_kernel``: ``start + step * i`` over the first half, ``end -
    step * (steps - i - 1)`` over the rest, in the dtype ``d`` (``kernels/ranges.py``: one
    FMA each for float32 / float64; each operation rounded for float16, as ``c10::Half``'s
    operators do; float64 truncated for integers, whose ends are truncated first)."""
    if d.kind == "b":
        raise RuntimeError('"linspace_cpu" not implemented for \'Bool\'')
    if d.kind == "c":  # each part is a real linspace (c10::complex's operators are per part)
        part = np.dtype(np.float32 if d == np.complex64 else np.float64)
        start, end = complex(start), complex(end)
        out = np.empty(steps, dtype=d)
        out.real = _linspace_values(start.real, end.real, steps, part)
        out.imag = _linspace_values(start.imag, end.imag, steps, part)
        return out
    for v in (start, end)[:steps]:  # (one step converts the start only, none neither)
        _check_fits(v, d)
    if d.kind in "iu":  # the ends in the dtype (wrapped, as C++ converts them)
        start, end = (int(np.array(int(v)).astype(d)) for v in (start, end))
    out = np.empty(steps, dtype=np.float64 if d.kind in "iu" else d)
    if steps <= 1:
        out[:] = start
        return out.astype(d, copy=False)
    i = np.arange(steps)
    first = i < steps // 2
    back = np.where(first, i, steps - i - 1)
    if d == np.float16:
        h, f = np.float16, np.float32
        s, e = h(start), h(end)
        step = f(h(f(h(f(e) - f(s))) / f(h(steps - 1))))
        prod = (step * back.astype(h).astype(f)).astype(h).astype(f)
        return np.where(first, f(s) + prod, f(e) - prod).astype(h)
    from .kernels.ranges import linspace_fill

    ft = out.dtype.type
    s, e = ft(start), ft(end)
    linspace_fill(out, s, e, ft((ft(e) - ft(s)) / ft(steps - 1)))
    return out.astype(d, copy=False)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """``base ** linspace(start, end, steps)``."""
    dev = _device(device)
    _check_steps(steps)
    return _finish(np.logspace(start, end, steps, base=base).astype(_dt(dtype)), requires_grad,
                   device=dev)


def rand(*sizes, size=None, generator=None, dtype=None, device=None,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples in ``[0, 1)`` (sizes as :func:`zeros`)."""
    dev = _device(device)
    d = _dt(dtype)
    shape = _size(sizes, size, "rand")

    def make():
        if d.kind == "c":  # uniform real and imaginary parts, as PyTorch's
            return _complex_draws(rng(generator).random, shape, d, 1.0)
        arr = rng(generator).random(shape, dtype=d if d.kind == "f" and d.itemsize >= 4
                                    else np.float64)
        return arr.astype(d, copy=False)
    return _finish(make(), requires_grad, make, "random", device=dev)


def randn(*sizes, size=None, generator=None, dtype=None, device=None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples (sizes as :func:`zeros`)."""
    dev = _device(device)
    d = _dt(dtype)
    shape = _size(sizes, size, "randn")

    def make():
        if d.kind == "c":  # parts of variance 1/2: E|z|^2 = 1, as PyTorch's
            return _complex_draws(rng(generator).standard_normal, shape, d, np.sqrt(0.5))
        arr = rng(generator).standard_normal(shape, dtype=d if d.kind == "f" and
                                             d.itemsize >= 4 else np.float64)
        return arr.astype(d, copy=False)
    return _finish(make(), requires_grad, make, "random", device=dev)


def _complex_draws(draw, shape: tuple, d: np.dtype, scale: float) -> np.ndarray:
    """A complex array of dtype ``d`` whose real and imaginary parts are ``scale`` times
    ``draw``'s samples of the parts' float dtype (drawn interleaved: real, imaginary)."""
    part = np.dtype(d.type(0).real.dtype)
    pairs = draw((*shape, 2), dtype=part)
    if scale != 1.0:
        pairs *= part.type(scale)
    return np.ascontiguousarray(pairs).view(d).reshape(shape)


_NORMAL_OVERLOADS = (
    " * (Tensor mean, Tensor std, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (Tensor mean, float std = 1, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (float mean, Tensor std, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (float mean, float std, tuple of ints size, *, torch.Generator generator = None, "
    "Tensor out = None, torch.dtype dtype = None, torch.layout layout = None, torch.device "
    "device = None, bool pin_memory = False, bool requires_grad = False)\n")


def _normal_overload_error(args: tuple, kwargs: dict) -> TypeError:
    """PyTorch's message for arguments that match none of ``normal``'s overloads."""
    got = ", ".join([type(a).__name__ if not isinstance(a, Tensor) else "Tensor" for a in args]
                    + [f"{k}={type(v).__name__}" for k, v in kwargs.items()])
    return TypeError(f"normal() received an invalid combination of arguments - got ({got}), "
                     f"but expected one of:\n{_NORMAL_OVERLOADS}")


def _not_floating(d: dtypes.DType) -> NotImplementedError:
    return NotImplementedError(f'"normal_kernel_cpu" not implemented for '
                               f"'{d.tensor_type[:-len('Tensor')]}'")


def _check_std(std: float) -> None:
    if not std >= 0.0:  # NaN too
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


def normal(mean=None, std=None, size=None, *, generator=None, out=None, dtype=None,
           layout=None, device=None, pin_memory: bool = False,
           requires_grad: bool = False) -> Tensor:
    """Normal samples, PyTorch's four overloads:

    * ``normal(mean: Tensor, std: float = 1.0)``, ``normal(mean: float, std: Tensor)`` and
      ``normal(mean: Tensor, std: Tensor)``: one sample per element of the broadcast of
      ``mean`` and ``std`` (``std * N(0, 1) + mean``), in the dtype of ``mean`` (of ``std``
      when ``mean`` is a number), on its device. As PyTorch's ``NormalBackward1/2/3``, the
      result has a gradient path to ``mean`` / ``std`` that gives zeros.
    * ``normal(mean: float, std: float, size)``: a new tensor of ``size`` (``dtype``,
      ``device`` -- not the default device when None, as PyTorch -- and ``requires_grad``
      only here).

    ``std`` must be >= 0 (a tensor's every element: checked at every call of a compiled
    function too). ``generator``: the generator to draw from (the default one when None);
    ``out``: the tensor to write to. Under ``jitgrad.compile`` the samples are drawn anew at
    every call, as in eager mode.

    >>> import jitgrad
    >>> jitgrad.normal(jitgrad.zeros(2, 3), 0.0)
    tensor([[0., 0., 0.],
            [0., 0., 0.]])
    >>> jitgrad.normal(jitgrad.ones(3), jitgrad.zeros(2, 1)).shape
    jitgrad.Size([2, 3])
    """
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        extra = {k: v for k, v in (("dtype", dtype), ("layout", layout), ("device", device))
                 if v is not None}
        extra.update({k: v for k, v in (("pin_memory", pin_memory),
                                         ("requires_grad", requires_grad)) if v})
        if size is not None or extra or mean is None or not isinstance(
                mean, Tensor | numbers.Real) or not isinstance(std, Tensor | numbers.Real | None):
            args = (mean, std) + (() if size is None else (size,))
            raise _normal_overload_error(args, extra)
        result = _normal_tensors(mean, 1.0 if std is None else std, generator)
        if out is not None:
            if not out.is_floating_point():
                raise _not_floating(out.dtype)
            from .ops.inplace import write_out

            return write_out(out, result, "normal")
        return result
    if mean is None or std is None or size is None:
        args = tuple(a for a in (mean, std, size) if a is not None)
        raise _normal_overload_error(args, {})
    if isinstance(size, numbers.Integral):
        raise _normal_overload_error((mean, std, size), {})
    _check_layout(layout)
    shape, d = _size((), size, "normal"), _dt(dtype)
    if d.kind != "f":
        raise _not_floating(dtypes.from_numpy_dtype(d))
    _check_std(float(std))
    dev = None if device is None else devices.parse(device)

    def make():
        return rng(generator).normal(mean, std, shape).astype(d)
    return _out(_finish(make(), requires_grad, make, "random", device=dev), out, "normal")


def _normal_tensors(mean, std, generator) -> Tensor:
    """``normal`` with a tensor ``mean`` and / or ``std``: ``std * randn + mean`` over their
    broadcast shape (the draw is ``randn``'s, so a compiled function draws anew per call)."""
    from .autograd.grad_mode import is_grad_enabled
    from .trace.effects import run_check

    m_t = mean if isinstance(mean, Tensor) else None
    s_t = std if isinstance(std, Tensor) else None
    like = m_t if m_t is not None else s_t
    if s_t is None:
        _check_std(float(std))
    if m_t is not None and s_t is not None:
        shape = broadcast_sizes(tuple(m_t.shape), tuple(s_t.shape))
    else:
        shape = tuple(like.shape)
    for t in (m_t, s_t):
        if t is not None and not t.is_floating_point():
            raise _not_floating(t.dtype)
    if s_t is not None:
        def negative(a) -> bool:
            xp = devices.array_namespace(a)
            return bool(xp.any(~(a >= 0)))
        run_check(s_t, negative, lambda: RuntimeError("normal expects all elements of std >= "
                                                      "0.0"), "normal's std check")
    d = like.dtype
    eps = randn(*shape, generator=generator, dtype=d, device=like.device)
    sample = eps * (std if s_t is None else s_t.detach()) + (
        mean if m_t is None else m_t.detach())
    if sample.dtype != d:
        sample = sample.to(d)
    graph = [t for t in (m_t, s_t) if t is not None and t.requires_grad]
    if graph and is_grad_enabled():
        # PyTorch's NormalBackward1/2/3 give mean and std zero gradients: the sample kept in
        # their graphs through a never-true where (NaN-safe, unlike `mean * 0 + sample`)
        from .ops.selection import where

        never = tensor(False, device=like.device)
        for t in graph:
            sample = where(never, t, sample)
        if sample.dtype != d:
            sample = sample.to(d)
    return sample


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """Integers uniform in ``[low, high)`` (``randint(high, size)`` also works)."""
    dev = _device(device)
    if size is None:
        if high is None:
            raise TypeError("randint() missing required argument 'size'")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    shape, d = _size((), size, "randint"), _dt(dtype, dtypes.int64)
    if not low < high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                           f"from={low} >= to={high}")

    def make():
        return rng(generator).integers(low, high, size=shape).astype(d)
    return _finish(make(), requires_grad, make, "random", device=dev)


def randperm(n: int, *, generator=None, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0..n-1``."""
    dev = _device(device)
    d = _dt(dtype, dtypes.int64)
    check_sizes((n,))

    def make():
        return rng(generator).permutation(n).astype(d)
    return _finish(make(), requires_grad, make, "random", device=dev)


def _like(t: Tensor, dtype):
    return t._data.shape, (t._data.dtype if dtype is None else dtypes.to_dtype(dtype).np)


def _like_format(out: Tensor, input: Tensor, memory_format) -> Tensor:
    """``out`` with its memory in ``memory_format``'s order; ``preserve_format`` (the
    default): ``input``'s, where it is dense channels-last, else row-major (PyTorch keeps
    any dense input's strides, a transposed matrix's too: a known difference)."""
    from .memory_format import channels_last, channels_last_3d, has_layout, preserve_format

    fmt = memory_format
    if fmt is preserve_format:
        fmt = next((f for f in (channels_last, channels_last_3d) if input._data.ndim ==
                    (4 if f is channels_last else 5) and not input._data.flags.c_contiguous
                    and has_layout(input._data, f)), None)
        if fmt is None:
            return out
    return out.contiguous(memory_format=fmt)


def _check_layout(layout) -> None:
    from .ops.torch_namespace import strided

    if layout is not None and layout is not strided:
        raise RuntimeError(f"jitgrad tensors have the strided layout only, got {layout}")


def _like_factory(kind: str, input: Tensor, dtype, device, requires_grad: bool, layout,
                  memory_format, fill=None) -> Tensor:
    from .memory_format import preserve_format

    _check_layout(layout)
    shape, d = _like(input, dtype)
    dev = _device(device, input)
    out = _fill_factory(kind, shape, d, dev, False, *(() if fill is None else (fill,)))
    out = _like_format(out, input, memory_format or preserve_format)
    return out.requires_grad_() if requires_grad else out


def zeros_like(input: Tensor, *, dtype=None, layout=None, device=None,
               requires_grad: bool = False, pin_memory: bool = False,
               memory_format=None) -> Tensor:
    """Zeros with ``input``'s shape and dtype (``memory_format``: the memory order,
    ``input``'s by default)."""
    return _like_factory("zeros", input, dtype, device, requires_grad, layout, memory_format)


def ones_like(input: Tensor, *, dtype=None, layout=None, device=None,
              requires_grad: bool = False, pin_memory: bool = False,
              memory_format=None) -> Tensor:
    """Ones with ``input``'s shape and dtype."""
    return _like_factory("ones", input, dtype, device, requires_grad, layout, memory_format)


def empty_like(input: Tensor, *, dtype=None, layout=None, device=None,
               requires_grad: bool = False, pin_memory: bool = False,
               memory_format=None) -> Tensor:
    """Uninitialised, with ``input``'s shape and dtype."""
    return _like_factory("empty", input, dtype, device, requires_grad, layout, memory_format)


def full_like(input: Tensor, fill_value, *, dtype=None, layout=None, device=None,
              requires_grad: bool = False, pin_memory: bool = False,
              memory_format=None) -> Tensor:
    """``fill_value`` with ``input``'s shape and dtype."""
    return _like_factory("full", input, dtype, device, requires_grad, layout, memory_format,
                         fill_value)


def rand_like(input: Tensor, *, dtype=None, layout=None, device=None, generator=None,
              requires_grad: bool = False, memory_format=None) -> Tensor:
    """Uniform samples with ``input``'s shape, dtype and device."""
    _check_layout(layout)
    shape, d = _like(input, dtype)
    out = rand(shape, dtype=dtypes.from_numpy_dtype(d), device=_device(device, input),
               generator=generator)
    out = _like_format(out, input, memory_format or _preserve())
    return out.requires_grad_() if requires_grad else out


def randn_like(input: Tensor, *, dtype=None, layout=None, device=None, generator=None,
               requires_grad: bool = False, memory_format=None) -> Tensor:
    """Normal samples with ``input``'s shape, dtype and device."""
    _check_layout(layout)
    shape, d = _like(input, dtype)
    out = randn(shape, dtype=dtypes.from_numpy_dtype(d), device=_device(device, input),
                generator=generator)
    out = _like_format(out, input, memory_format or _preserve())
    return out.requires_grad_() if requires_grad else out


def randint_like(input: Tensor, low, high=None, *, dtype=None, layout=None, device=None,
                 generator=None, memory_format=None) -> Tensor:
    """Random integers with ``input``'s shape and device."""
    _check_layout(layout)
    shape, d = _like(input, dtype)
    out = randint(low, high, shape, dtype=dtypes.from_numpy_dtype(d),
                  device=_device(device, input), generator=generator)
    return _like_format(out, input, memory_format or _preserve())


def _preserve():
    from .memory_format import preserve_format

    return preserve_format


def const_tensor(arr: np.ndarray) -> Tensor:
    """Wrap an array computed from static information only (shapes, indices given as Python
    data): a constant of the graph when ``jitgrad.compile`` is tracing."""
    return _finish(arr, False)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator=None, out=None) -> Tensor:
    """``num_samples`` category indices (int64) drawn from each row of ``input`` (1-D or 2-D
    non-negative weights, not necessarily normalised), as ``torch.multinomial``: with
    ``replacement`` independently, else without repeats (the exponential-race sampling
    PyTorch uses on the CPU; a row with fewer positive weights than ``num_samples`` does
    not raise: it ends with its zero-weight categories, here in index order, where PyTorch
    orders them as its ``topk`` breaks ties). The draws come from ``generator`` (the
    default generator when None). The values decide the draw, so a compiled function stops
    tracing here (a graph break: ``fullgraph=True`` raises).

    >>> import jitgrad
    >>> jitgrad.multinomial(jitgrad.tensor([0.0, 1.0, 0.0]), 2, replacement=True)
    tensor([1, 1])
    """
    a = input._data
    if a.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if a.dtype.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{input.dtype.tensor_type[:-len('Tensor')]}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n_cat = a.shape[-1]
    if not replacement and num_samples > n_cat:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    p = np.atleast_2d(a).astype(np.float64)
    if not np.isfinite(p).all() or (p < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    total = p.sum(axis=1, keepdims=True)
    if (total <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    tr = _TRACE.tracer
    if tr is not None:
        tr.graph_break("multinomial() draws from the values of a tensor")
    r = rng(generator)
    if replacement:
        cdf = np.cumsum(p / total, axis=1)
        u = r.random((p.shape[0], num_samples))
        idx = np.stack([np.minimum(np.searchsorted(c, x, side="right"), n_cat - 1)
                        for c, x in zip(cdf, u)])
    else:
        with np.errstate(divide="ignore"):
            keys = p / r.exponential(size=p.shape)
        idx = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    res = wrap(np.ascontiguousarray(idx.reshape(a.shape[:-1] + (num_samples,)),
                                    dtype=np.int64))
    return _out(res, out, "multinomial")
