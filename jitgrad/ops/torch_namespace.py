"""PyTorch's top-level functions and ``Tensor`` members that are no op of their own, written
with the ones jitgrad has: the top-level in-place forms (``torch.exp_(x)`` is
``x.exp_()``), ``asarray``, ``fill``, the splits (``split_with_sizes``, ``dsplit``,
``unsafe_split``...), ``narrow_copy``, ``mode``, ``histogram``, ``gradient`` (numerical
differentiation), the samplers ``poisson`` / ``binomial``, ``empty_strided``, the type and
mode queries (``typename``, ``is_anomaly_enabled``, ``set_warn_always``...; the complex
ones are in :mod:`jitgrad.ops.complex_functions`), the ``strided`` layout, and the
``Tensor`` members of these (:data:`TENSOR_METHODS`, installed by :mod:`jitgrad.ops.methods`).

Each has PyTorch's signature and errors and computes with existing ops, so gradients flow
through them (``mode``'s values are a ``gather``, ``gradient`` is slices and arithmetic).
The functions that read values on the host (``mode``'s indices, ``histogram``, the
samplers) break a compiled function's graph there, as every such read does.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import numpy as np

from .. import devices, dtypes
from .._named import Named
from ..tensor import Tensor, wrap

__all__ = [
    # in-place forms (generated below) come first in the module's namespace
    "layout", "strided", "asarray", "fill", "is_neg", "resolve_neg",
    "get_device", "typename", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
    "set_anomaly_enabled", "set_warn_always", "is_warn_always_enabled", "split_with_sizes",
    "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk", "dsplit", "narrow_copy",
    "nonzero_static", "mode", "histogram", "histogramdd", "gradient", "poisson", "binomial",
    "empty_strided",
    "resize_as_",
]


# ------------------------------------------------------------------------------ layout
class layout(Named):  # noqa: N801 - PyTorch's name
    """A memory layout (``torch.layout``); jitgrad has one, :data:`strided` (dense
    tensors with strides), the ``layout`` of every tensor."""

    __slots__ = ()


#: dense tensors with strides: the layout of every jitgrad tensor
strided = layout("strided")


def _check_layout(value) -> None:
    if value is not None and value is not strided:
        raise RuntimeError(f"jitgrad has only the strided layout, got {value!r}")


# -------------------------------------------------------------------- in-place forms
#: ``torch.X_(input, ...)`` for the ``Tensor`` in-place methods ``X_`` PyTorch also has as
#: functions: each is ``input.X_(...)``
INPLACE_FORMS = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
    "arctan_", "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_",
    "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "detach_", "erf_",
    "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "i0_",
    "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_",
    "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_", "round_",
    "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_",
    "trunc_", "xlogy_", "zero_",
)


def _inplace_form(name: str):
    def fn(input: Tensor, *args, **kwargs) -> Tensor:
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    fn.__doc__ = (f"``input.{name}(...)``: :func:`{name[:-1]}` written into ``input``, "
                  f"which is returned.")
    return fn


globals().update({n: _inplace_form(n) for n in INPLACE_FORMS})
__all__ += INPLACE_FORMS


# -------------------------------------------------------------------------- creation
def _dtype_name(d) -> str:
    return d.tensor_type.replace("Tensor", "")


def _alias_checks(t: Tensor, dtype, device) -> tuple[bool, bool]:
    """Whether ``t`` has another dtype / device than the ones asked for (None: any)."""
    wrong_dtype = dtype is not None and dtypes.to_dtype(dtype) is not t.dtype
    wrong_device = device is not None and devices.parse(device) != t.device
    return wrong_dtype, wrong_device


def _asarray_tensor(t: Tensor, dtype, device, copy) -> Tensor:
    wrong_dtype, wrong_device = _alias_checks(t, dtype, device)
    if copy is False:
        if wrong_device:
            raise ValueError(f"can't alias tensor from device '{t.device}' to "
                             f"'{devices.parse(device)}'.")
        if wrong_dtype:
            raise ValueError(f"can't alias tensor with dtype '{_dtype_name(t.dtype)}' into "
                             f"dtype '{_dtype_name(dtypes.to_dtype(dtype))}'.")
    if wrong_dtype or wrong_device:
        return t.to(device=devices.parse(device) if wrong_device else None,
                    dtype=dtypes.to_dtype(dtype) if wrong_dtype else None, copy=bool(copy))
    return t.clone() if copy else t


def asarray(obj, *, dtype=None, device=None, copy: bool | None = None,
            requires_grad: bool | None = None) -> Tensor:
    """``obj`` as a tensor, sharing memory when it can (``torch.asarray``).

    A tensor is returned itself (an object exporting DLPack, a NumPy array: a tensor over
    its memory) unless ``dtype`` or ``device`` differ or ``copy=True``; with ``copy=False``
    a needed conversion raises ``ValueError``. Numbers and sequences are copied (``copy=
    False`` raises). ``requires_grad`` None keeps the result's; True makes a leaf require
    grad (the tensor given, when it is returned itself); False detaches a result with
    history, or turns a leaf's off."""
    from .. import creation

    if isinstance(obj, Tensor):
        t = _asarray_tensor(obj, dtype, device, copy)
    elif isinstance(obj, np.ndarray) or (hasattr(obj, "__dlpack__")
                                         and not isinstance(obj, np.generic)):
        t = _asarray_tensor(creation.from_dlpack(obj) if not isinstance(obj, np.ndarray)
                            else creation.from_numpy(obj), dtype, device, copy)
    else:
        if copy is False:
            raise ValueError("can't alias arbitrary sequence into a tensor.")
        t = creation.tensor(obj, dtype=dtype, device=device)
    if requires_grad is None:
        return t
    if requires_grad and not t.dtype.is_floating_point:
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    if requires_grad:
        if t.grad_fn is None:
            t.requires_grad_(True)
        return t
    if t.grad_fn is not None:
        return t.detach()
    return t.requires_grad_(False)


def empty_strided(size: Sequence[int], stride: Sequence[int], *, dtype=None, layout=None,
                  device=None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor of shape ``size`` whose elements are ``stride`` elements
    apart along each dim (a NumPy view of a buffer just large enough; overlapping strides
    share elements). On a CUDA device the tensor is contiguous."""
    from .. import creation

    _check_layout(layout)
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality "
                           f"of strides ({len(stride)})")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(size)}: {size}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={size} and "
                           f"strides={stride}")
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    n = 0 if 0 in size else 1 + builtins.sum((a - 1) * s for a, s in zip(size, stride))
    buf = creation.empty(n, dtype=d, device=device)
    arr = np.lib.stride_tricks.as_strided(buf._data, shape=tuple(size),
                                          strides=tuple(s * d.itemsize for s in stride))
    t = wrap(arr) if devices.is_cpu_array(buf._data) else buf.new_empty(size)
    return t.requires_grad_() if requires_grad else t


def _new_empty_strided(self, size: Sequence[int], stride: Sequence[int], *, dtype=None,
                       layout=None, device=None, requires_grad: bool = False,
                       pin_memory: bool = False) -> Tensor:
    """:func:`empty_strided` with this tensor's dtype and device by default."""
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         layout=layout, device=self.device if device is None else device,
                         requires_grad=requires_grad)


def fill(input: Tensor, value) -> Tensor:
    """A new tensor of ``input``'s shape and dtype holding ``value`` (a number or a 0-dim
    tensor, whose gradient is the sum of the result's; ``input``'s is zero)."""
    from .copies import clone

    return clone(input).fill_(value)


# ------------------------------------------------------------------------ type queries
def is_neg(input: Tensor) -> bool:
    """Whether ``input``'s negative bit is set: never (jitgrad computes negations)."""
    return False


def resolve_neg(input: Tensor) -> Tensor:
    """``input`` with its negative bit resolved: itself (jitgrad's tensors have none)."""
    return input


def get_device(input: Tensor) -> int:
    """The CUDA device index of ``input``, or -1 on the CPU."""
    return input.get_device()


def typename(obj, /) -> str:
    """The type of ``obj`` as a qualified name: a tensor's ``type()``
    (``"jitgrad.FloatTensor"``), else ``module.qualname``."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


# ---------------------------------------------------------------------------- flags
def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on (``autograd.set_detect_anomaly``)."""
    from .. import autograd

    return autograd.anomaly_mode()[0]


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks backward results for NaN."""
    from .. import autograd

    return autograd.anomaly_mode()[1]


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off (``autograd.set_detect_anomaly``)."""
    from .. import autograd

    autograd.set_detect_anomaly(enabled, check_nan)


_WARN_ALWAYS = [False]


def set_warn_always(b: bool) -> None:
    """Set the flag PyTorch reads to repeat its warn-once warnings. jitgrad's warnings are
    Python warnings, shown as Python's filters say; the flag is kept for code that reads it
    (:func:`is_warn_always_enabled`)."""
    _WARN_ALWAYS[0] = bool(b)


def is_warn_always_enabled() -> bool:
    """The flag :func:`set_warn_always` sets (False by default)."""
    return _WARN_ALWAYS[0]


# --------------------------------------------------------------------------- splits
def _int_arg(name: str, arg: str, value, position: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be int, not "
                        f"{type(value).__name__}")
    return int(value)


def split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple:
    """``input`` cut along ``dim`` into parts of the given sizes, which must add up to its
    size there (views)."""
    from .indexing import split

    return split(input, [int(s) for s in split_sizes], dim)


def unsafe_split(input: Tensor, split_size: int, dim: int = 0) -> tuple:
    """:func:`split` into parts of ``split_size`` (an int; the last may be smaller): the same
    views (PyTorch's "unsafe" skips its in-place checks; jitgrad's are the views')."""
    from .indexing import split, unmark_multi_output

    return unmark_multi_output(split(input, _int_arg("unsafe_split", "split_size", split_size,
                                                     2), dim))


def _unsafe_split_method(self, split_size: int, dim: int = 0) -> tuple:
    """``Tensor.unsafe_split``: :func:`unsafe_split` (its argument error counts from the
    method's first argument)."""
    from .indexing import split, unmark_multi_output

    return unmark_multi_output(split(self, _int_arg("unsafe_split", "split_size", split_size,
                                                    1), dim))


def unsafe_split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple:
    """:func:`split_with_sizes` (see :func:`unsafe_split`)."""
    from .indexing import unmark_multi_output

    return unmark_multi_output(split_with_sizes(input, split_sizes, dim))


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """:func:`chunk` (see :func:`unsafe_split`)."""
    from .indexing import chunk, unmark_multi_output

    return unmark_multi_output(chunk(input, chunks, dim))


def dsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split depthwise: along dim 2 (at least 3 dims), into equal sections or at
    indices (``tensor_split(input, indices_or_sections, dim=2)``)."""
    from .arrangements import _even_split

    if input.dim() < 3:
        raise RuntimeError(f"torch.dsplit requires a tensor with at least 3 dimension, but got "
                           f"a tensor with {input.dim()} dimensions!")
    return _even_split("dsplit", input, indices_or_sections, 2)


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A contiguous copy of ``input.narrow(dim, start, length)``."""
    from .copies import clone

    return clone(input.narrow(dim, start, length))


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """:func:`nonzero` with exactly ``size`` rows: the first ``size`` indices, or all of
    them followed by rows of ``fill_value``."""
    from ..creation import full
    from .concat import cat

    found = input.nonzero()
    if found.shape[0] >= size:
        return found[:size]
    pad = full((size - found.shape[0], found.shape[1]), fill_value, dtype=found.dtype,
               device=found.device)
    return cat([found, pad], 0)


def _sum_to_size(self, *sizes, size=None) -> Tensor:
    """The sum of this tensor down to ``size``, a shape it can be expanded from (summing
    the leading dims and the dims where ``size`` is 1)."""
    from ..shapes import as_shape
    from .linalg import _reduce_to

    if size is None and not sizes:
        raise TypeError('sum_to_size() missing 1 required positional arguments: "size"')
    shape = as_shape(sizes if size is None else (size,))
    own = tuple(self.shape)
    lead = len(own) - len(shape)
    if lead < 0 or any(s != 1 and s != own[lead + i] for i, s in enumerate(shape)):
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size "
                           f"{{{list(own)}}}.")
    return _reduce_to(self, shape)


# ---------------------------------------------------------------------------- mode
def _mode_return_type():
    from .extrema import _return_type

    return _return_type("mode")


return_mode = _mode_return_type()


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> return_mode:
    """``(values, indices)``: the most frequent value of each slice along ``dim`` (the
    smallest of equally frequent ones; NaNs each count once) and the index of its last
    occurrence (PyTorch's CPU kernel gives some occurrence). The gradient of the values goes
    to that index."""
    from ..creation import tensor
    from ..shapes import wrap_dim

    d = wrap_dim(dim, builtins.max(input.dim(), 1))
    n = input.shape[d] if input.dim() else 1
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    a = np.moveaxis(np.asarray(input.detach().cpu().numpy()).reshape(input.shape or (1,)),
                    d, -1)
    rows = a.reshape(-1, n)
    order = np.argsort(rows, axis=1, kind="stable")
    s = np.take_along_axis(rows, order, 1)
    new_run = s[:, 1:] != s[:, :-1]  # NaN != NaN: each NaN its own run
    run = np.concatenate([np.zeros((len(rows), 1), np.int64), np.cumsum(new_run, 1)], 1)
    counts = np.zeros((len(rows), n), np.int64)
    np.add.at(counts, (np.arange(len(rows))[:, None], run), 1)
    ends = np.concatenate([new_run, np.ones((len(rows), 1), bool)], 1)
    per_pos = np.where(ends, np.take_along_axis(counts, run, 1), -1)
    last = np.argmax(per_pos, axis=1)  # the first (smallest) of the most frequent runs
    index = order[np.arange(len(rows)), last].reshape(a.shape[:-1] + (1,))
    index = np.moveaxis(index, -1, d) if input.dim() else index.reshape(())
    idx = tensor(index, device=input.device)
    values = input.gather(d, idx) if input.dim() else input.clone()
    if not keepdim and input.dim():
        values, idx = values.squeeze(d), idx.squeeze(d)
    return return_mode(values, idx)


# ------------------------------------------------------------------------- histogram
def _histogram_return_type():
    from .decompositions import _return_type

    return _return_type("histogram", ("hist", "bin_edges"))


return_histogram = _histogram_return_type()



def _bin_edges(column: Tensor, bins, range_d, d: int) -> Tensor:
    """Dimension ``d``'s bin edges: ``bins`` itself (a 1-D tensor of increasing edges) or
    ``bins`` equal bins over ``range_d`` (``(min, max)``; None: the data's), PyTorch's
    checks and messages."""
    from ..creation import linspace

    if isinstance(bins, Tensor):
        if bins.dtype is not column.dtype:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have "
                               f"the same dtype, but got input with dtype "
                               f"{column.dtype.cpp_name} and bins for dimension {d} with "
                               f"dtype {bins.dtype.cpp_name}")
        if bins.dim() != 1:
            raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, but "
                               f"got {bins.dim()} dimensions in the bins tensor for dimension "
                               f"{d}")
        if bins.numel() == 0:
            raise RuntimeError(f"torch.histogramdd: bins tensor should have at least 1 element, "
                               f"but got 0 elements in the bins tensor for dimension {d}")
        return bins.detach().clone()
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for "
                           f"dimension {d}")
    if range_d is not None:
        lo, hi = float(range_d[0]), float(range_d[1])
    elif column.numel():
        a = column.detach().cpu().numpy()
        lo, hi = float(a.min()), float(a.max())
    else:
        lo, hi = 0.0, 1.0
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histogramdd: dimension {d}'s range [{lo:g}, {hi:g}] is "
                           f"not finite")
    if lo > hi:
        raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                           f"{lo:g} max {hi:g} for dimension {d}")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return linspace(lo, hi, int(bins) + 1, dtype=column.dtype, device=column.device)


def _histogram_nd(points: Tensor, edges: list, weight: Tensor | None, density: bool
                  ) -> Tensor:
    """Counts (or ``weight`` sums) of the rows of ``points`` (N x D) in the cells the
    per-dimension ``edges`` make: ``[left, right)``, each dimension's last bin also holding
    its right edge; rows outside any range left out."""
    from .counting import bincount, searchsorted

    nbins = [e.numel() - 1 for e in edges]
    inside = None
    for d, e in enumerate(edges):
        col = points[:, d]
        ok = (col >= e[0]) & (col <= e[-1])
        inside = ok if inside is None else inside & ok
    cell = None
    for d, e in enumerate(edges):
        col = points[:, d][inside]
        # the bin of x: the last edge <= x; the right edge itself goes to the last bin
        k = (searchsorted(e, col, right=True) - 1).clamp(0, max(nbins[d] - 1, 0))
        cell = k if cell is None else cell * nbins[d] + k
    ws = None if weight is None else weight.detach().reshape(-1)[inside].to(dtypes.float64)
    total = math.prod(nbins)
    hist = bincount(cell, ws, minlength=total)[:total].to(points.dtype).reshape(nbins)
    if density:
        hist = hist / hist.sum()
        for d, e in enumerate(edges):
            shape = [1] * len(edges)
            shape[d] = -1
            hist = hist / e.diff().reshape(shape)
    return hist


def _check_float_input(input: Tensor) -> None:
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for "
                                  f"'{_dtype_name(input.dtype)}'")


def histogram(input: Tensor, bins=100, *, range: Sequence[float] | None = None,  # noqa: A002
              weight: Tensor | None = None, density: bool = False) -> return_histogram:
    """``(hist, bin_edges)``: the count (or ``weight`` sum) of ``input``'s elements in each
    bin, where ``bins`` is a number of equal bins over ``range`` (the data's min to max by
    default) or the increasing edges themselves; each bin holds ``[left, right)``, the last
    also its right edge; values outside are left out. ``density`` divides by the total and
    the bin widths. Float inputs, not differentiable."""
    _check_float_input(input)
    if range is not None and len(range) != 2:
        raise RuntimeError(f"torch.histogramdd: for a 1-dimensional histogram range should "
                           f"have 2 elements, but got {len(range)}")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should have "
                           f"the same shape as the input tensor excluding its innermost "
                           f"dimension, but got input with shape {list(input.shape) + [1]} "
                           f"and weight with shape {list(weight.shape)}")
    flat = input.detach().reshape(-1, 1)
    edges = _bin_edges(flat[:, 0], bins, range, 0)
    return return_histogram(_histogram_nd(flat, [edges], weight, density), edges)


def _histogramdd_return_type():
    from .decompositions import _return_type

    return _return_type("histogramdd", ("hist", "bin_edges"))


return_histogramdd = _histogramdd_return_type()


def histogramdd(input: Tensor, bins=10, *, range: Sequence[float] | None = None,  # noqa: A002
                weight: Tensor | None = None, density: bool = False) -> return_histogramdd:
    """``(hist, bin_edges)`` of the points in ``input``'s rows (its last dimension is the
    coordinates, D of them): ``bins`` is a number of bins for every dimension, a list of
    D numbers, or a list of D 1-D tensors of edges; ``range`` is ``[min0, max0, min1,
    max1, ...]`` (the data's by default); ``weight`` has ``input``'s shape without its last
    dimension; ``density`` divides by the total and the cell volumes. ``hist`` has one
    dimension per coordinate; ``bin_edges`` is a tuple of D tensors. Not differentiable."""
    _check_float_input(input)
    if input.dim() < 2:
        raise RuntimeError(f"torch.histogramdd: input tensor should have at least 2 "
                           f"dimensions, but got {input.dim()}")
    dims = input.shape[-1]
    points = input.detach().reshape(-1, dims)
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * dims
    if len(per_dim) != dims:
        raise RuntimeError(f"torch.histogramdd: expected {dims} sequences of bin edges for "
                           f"each of the {dims} dimensions of the input, but got "
                           f"{len(per_dim)} bin sequences")
    if range is not None and len(range) != 2 * dims:
        raise RuntimeError(f"torch.histogramdd: for a {dims}-dimensional histogram range "
                           f"should have {2 * dims} elements, but got {len(range)}")
    if weight is not None and tuple(weight.shape) != tuple(input.shape[:-1]):
        raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should have "
                           f"the same shape as the input tensor excluding its innermost "
                           f"dimension, but got input with shape {list(input.shape)} and "
                           f"weight with shape {list(weight.shape)}")
    edges = [_bin_edges(points[:, d], b, None if range is None else range[2 * d:2 * d + 2], d)
             for d, b in enumerate(per_dim)]
    return return_histogramdd(_histogram_nd(points, edges, weight, density), tuple(edges))


# -------------------------------------------------------------------------- gradient
def _slice(t: Tensor, d: int, start: int, stop: int | None = None) -> Tensor:
    """``t[..., start:stop]`` along dim ``d`` (negative bounds from the end)."""
    n = t.shape[d]
    lo = start + n if start < 0 else start
    hi = n if stop is None else (stop + n if stop < 0 else stop)
    lo, hi = builtins.min(builtins.max(lo, 0), n), builtins.min(builtins.max(hi, 0), n)
    return t.narrow(d, lo, builtins.max(hi - lo, 0))


def _gradient_along(input: Tensor, d: int, h, edge_order: int) -> Tensor:
    """ATen's ``gradient_helper_float`` (``h`` a number) or ``gradient_helper`` (``h`` the
    coordinates, a 1-D tensor) along dim ``d``."""
    from .concat import cat

    s = _slice
    if not isinstance(h, Tensor):
        center = (s(input, d, 2) - s(input, d, 0, -2)) / h
        if edge_order == 1:
            pre = (s(input, d, 1, 2) - s(input, d, 0, 1)) / h
            app = (s(input, d, -1) - s(input, d, -2, -1)) / h
        else:
            pre = (-1.5 * s(input, d, 0, 1) + 2 * s(input, d, 1, 2)
                   - 0.5 * s(input, d, 2, 3)) / h
            app = (0.5 * s(input, d, -3, -2) - 2 * s(input, d, -2, -1)
                   + 1.5 * s(input, d, -1)) / h
        return cat([pre, center / 2, app], d)
    shape = [1] * input.dim()
    shape[d] = -1
    dx = h.diff(1, 0)
    dx1, dx2 = s(dx, 0, 0, -1), s(dx, 0, 1)
    a = (-dx2 / (dx1 * (dx1 + dx2))).reshape(shape)
    b = ((dx2 - dx1) / (dx1 * dx2)).reshape(shape)
    c = (dx1 / (dx2 * (dx1 + dx2))).reshape(shape)
    center = a * s(input, d, 0, -2) + b * s(input, d, 1, -1) + c * s(input, d, 2)
    if edge_order == 1:
        pre = (s(input, d, 1, 2) - s(input, d, 0, 1)) / dx[0]
        app = (s(input, d, -1) - s(input, d, -2, -1)) / dx[-1]
    else:
        a = -(2.0 * dx[0] + dx[1]) / (dx[0] * (dx[0] + dx[1]))
        b = (dx[0] + dx[1]) / (dx[0] * dx[1])
        c = (-dx[0]) / (dx[1] * (dx[0] + dx[1]))
        pre = a * s(input, d, 0, 1) + b * s(input, d, 1, 2) + c * s(input, d, 2, 3)
        a = dx[-1] / (dx[-2] * (dx[-1] + dx[-2]))
        b = -(dx[-1] + dx[-2]) / (dx[-1] * dx[-2])
        c = (2 * dx[-1] + dx[-2]) / (dx[-1] * (dx[-1] + dx[-2]))
        app = a * s(input, d, -3, -2) + b * s(input, d, -2, -1) + c * s(input, d, -1)
    return cat([pre, center, app], d)


def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """The numerical derivative of ``input`` along each of ``dim`` (every dim by default),
    one tensor each: central differences inside, one-sided ones of order ``edge_order`` (1
    or 2) at the ends. ``spacing`` is the step (a number, or one per dim) or the
    coordinates of the samples (one 1-D tensor per dim), as ``torch.gradient``."""
    from ..shapes import wrap_dim

    if input.dtype is dtypes.uint8:
        raise RuntimeError("torch.gradient does not support uint8 input.")
    one_dim = dim is None or isinstance(dim, (int, np.integer))
    dims = list(builtins.range(input.dim())) if dim is None else (
        [int(dim)] if one_dim else [int(x) for x in dim])
    if isinstance(spacing, Tensor):
        raise TypeError("gradient(): argument 'spacing' must be a number or a tuple of numbers "
                        "or of tensors, not Tensor")
    listed = isinstance(spacing, (list, tuple))
    steps = list(spacing) if listed else [spacing] * len(dims)
    if listed and dim is None and len(steps) != input.dim():
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a "
                           f"list of length equal to 'self.dim() = {input.dim()}', since dim "
                           f"argument was not given, but got a list of length {len(steps)}")
    if dim is not None and len(steps) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or "
                           f"it's spacing and dim arguments to have the same length, but got a "
                           f"spacing argument of length {len(steps)} and a dim argument of "
                           f"length {len(dims)}.")
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    wrapped = [wrap_dim(x, input.dim()) for x in dims]
    if dim is not None:
        seen = set()
        for x in wrapped:
            if x in seen:
                raise RuntimeError(f"dim {x} appears multiple times in the list of dims")
            seen.add(x)
    for x in wrapped:
        if input.shape[x] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
    out = []
    for x, h in zip(wrapped, steps):
        if isinstance(h, Tensor):
            if h.device != input.device:
                raise RuntimeError(f"torch.gradient expected each tensor to be on the same "
                                   f"device, but got devices {input.device} and {h.device}!")
            if h.dim() != 1:
                raise RuntimeError(f"torch.gradient expected each element of spacing to have "
                                   f"one dimension, but got an element with {h.dim()} "
                                   f"dimensions!")
        out.append(_gradient_along(input, x, h, edge_order))
    return tuple(out)


# -------------------------------------------------------------------------- sampling
def poisson(input: Tensor, generator=None) -> Tensor:
    """A Poisson draw with each element of ``input`` as its rate (from ``generator``, the
    default one when None); ``input``'s dtype, no gradient."""
    from ..creation import tensor
    from ..random import rng

    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for "
                                  f"'{_dtype_name(input.dtype)}'")
    rate = np.asarray(input.detach().cpu().numpy(), dtype=np.float64)
    if not (rate >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return tensor(rng(generator).poisson(rate), dtype=input.dtype, device=input.device)


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """A binomial draw of ``count`` trials with success probability ``prob`` per element
    (broadcast; from ``generator``, the default one when None); ``count``'s dtype, no
    gradient."""
    from ..creation import tensor
    from ..random import rng

    if not count.dtype.is_floating_point:
        raise ValueError(f"binomial only supports floating-point dtypes for count, got: "
                         f"{_dtype_name(count.dtype)}")
    if prob.dtype is not count.dtype:
        raise RuntimeError(f"Found dtype {_dtype_name(prob.dtype)} but expected "
                           f"{_dtype_name(count.dtype)}")
    n = np.asarray(count.detach().cpu().numpy(), dtype=np.float64)
    p = np.asarray(prob.detach().cpu().numpy(), dtype=np.float64)
    n, p = np.broadcast_arrays(n, p)
    draws = rng(generator).binomial(n.astype(np.int64), np.clip(p, 0.0, 1.0))
    return tensor(draws, dtype=count.dtype, device=count.device)


# ---------------------------------------------------------------------- Tensor members
def _storage(a) -> tuple | None:
    """``(flat buffer, offset)``: the C-contiguous NumPy array ``a`` lies in (the root of
    its views: PyTorch's storage) and where ``a`` starts in it; None when there is none."""
    if type(a) is not np.ndarray:
        return None
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.dtype != a.dtype or not root.flags.c_contiguous:
        return None
    off, rem = divmod(a.__array_interface__["data"][0] - root.__array_interface__["data"][0],
                      a.itemsize)
    return (root.reshape(-1), off) if not rem and 0 <= off <= root.size else None


def _resize_(self, *sizes, memory_format=None) -> Tensor:
    """Give this tensor the shape ``sizes`` in place (PyTorch's ``resize_``), contiguous,
    over its memory from its first element on: the same elements in a new shape, the first
    ones when fewer, and when more, the memory after them if the array it views holds it
    (as PyTorch's storage), else a new array with the elements followed by zeros (PyTorch's
    are uninitialised). For a contiguous tensor that does not require grad."""
    from ..shapes import as_shape
    from ..trace.state import STATE as TRACE
    from .inplace import check_writeable

    shape = as_shape(sizes)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: "
                           f"{list(shape)}")
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if TRACE.tracer is not None:
        TRACE.tracer.graph_break("resize_() changes a tensor's shape in place")
    a = self._data
    if tuple(a.shape) == shape:
        return self
    if not a.flags.c_contiguous:
        raise NotImplementedError("resize_: jitgrad resizes contiguous tensors only (a "
                                  "non-contiguous tensor's memory order is not its element "
                                  "order); call .contiguous() first")
    check_writeable(self)
    n = math.prod(shape)
    storage = _storage(a)
    if n <= a.size:
        new = a.reshape(-1)[:n].reshape(shape)
    elif storage is not None and storage[1] + n <= storage[0].size:
        new = storage[0][storage[1]:storage[1] + n].reshape(shape)
    else:  # a new array, holding what the old memory held from the first element on
        new = devices.array_namespace(a).zeros(shape, a.dtype)
        old = a.reshape(-1) if storage is None else storage[0][storage[1]:]
        new.reshape(-1)[:old.size] = old
    self._data = new
    self._vc[0] += 1
    return self


def resize_as_(input: Tensor, the_template: Tensor, *, memory_format=None) -> Tensor:
    """``input.resize_(the_template.shape)``."""
    return _resize_(input, tuple(the_template.shape))


def _false(doc: str):
    return property(lambda self: False, doc=doc)


def _legacy(name: str):
    def method(self, *args, **kwargs):
        from . import legacy_linalg

        return getattr(legacy_linalg, name)(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``jitgrad.{name}(self, ...)``."
    return method


def _nn(name: str):
    def method(self, *args, **kwargs):
        from . import nn_namespace

        return getattr(nn_namespace, name)(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``jitgrad.{name}(self, ...)``."
    return method


#: the ``Tensor`` members this module adds (:mod:`jitgrad.ops.methods` installs them)
TENSOR_METHODS = {
    "is_neg": is_neg, "resolve_neg": resolve_neg,
    "split_with_sizes": split_with_sizes, "unsafe_split": _unsafe_split_method,
    "unsafe_split_with_sizes": unsafe_split_with_sizes, "unsafe_chunk": unsafe_chunk,
    "dsplit": dsplit, "narrow_copy": narrow_copy, "sum_to_size": _sum_to_size,
    "mode": mode, "histogram": histogram, "new_empty_strided": _new_empty_strided,
    "nonzero_static": nonzero_static, "resize_": _resize_, "resize_as_": resize_as_,
    "cholesky": _legacy("cholesky"), "cholesky_solve": _legacy("cholesky_solve"),
    "cholesky_inverse": _legacy("cholesky_inverse"),
    "triangular_solve": _legacy("triangular_solve"),
    **{name: _legacy(name) for name in ("lu", "lu_solve", "geqrf", "orgqr", "ormqr")},
    "hardshrink": _nn("hardshrink"), "prelu": _nn("prelu"),
    "output_nr": property(lambda self: self._output_nr,
                          doc="Which output of its ``grad_fn`` the tensor is (0 for most)."),
    "layout": property(lambda self: strided, doc="The memory layout: ``jitgrad.strided``."),
    "is_sparse": _false("Whether the tensor is sparse (COO): never in jitgrad."),
    "is_sparse_csr": _false("Whether the tensor is sparse CSR: never in jitgrad."),
    "is_quantized": _false("Whether the tensor is quantized: never in jitgrad."),
    "is_meta": _false("Whether the tensor is on the meta device: never in jitgrad."),
    "is_mkldnn": _false("Whether the tensor is in MKL-DNN layout: never in jitgrad."),
    "is_nested": _false("Whether the tensor is a nested tensor: never in jitgrad."),
    **{f"is_{d}": _false(f"Whether the tensor is on an {d.upper()} device: never in jitgrad.")
       for d in ("mps", "xpu", "xla", "ipu", "vulkan", "mtia", "maia")},
}
