"""Reductions written with other ops: ``nansum`` / ``nanmean`` (NaNs left out),
``median`` (the lower median, by ``kthvalue``), ``logaddexp``, ``clamp_min`` /
``clamp_max``. Differentiable, traceable and on every device through the ops they call."""

from __future__ import annotations

from ..autograd.function import BackwardCFunction, Function
from ..autograd.node import node_class
from ..tensor import Tensor
from ..trace.tracer import active
from .api import api
from .dispatch import as_tensor_arg
from .elementwise import exp, log1p
from .extrema import AMAX, AMIN, _return_type
from .selection import CLAMP, MAXIMUM, NE, WHERE, clamp, maximum, where
from .sorting import GATHER, SORT_INDICES, kthvalue
from .sums import SUM
from .truth_reductions import any_true

__all__ = ["nansum", "nanmean", "median", "logaddexp", "clamp_min", "clamp_max",
           "aminmax", "return_median", "return_aminmax"]

return_median = _return_type("median")


class return_aminmax(tuple):  # noqa: N801 - PyTorch's torch.return_types.aminmax
    """``(min, max)`` of :func:`aminmax`."""

    __slots__ = ()

    def __new__(cls, min, max):  # noqa: A002 - PyTorch's field names
        return super().__new__(cls, (min, max))

    min = property(lambda self: self[0])  # noqa: A003
    max = property(lambda self: self[1])  # noqa: A003

    def __repr__(self) -> str:
        return f"jitgrad.return_types.aminmax(min={self[0]!r}, max={self[1]!r})"


def _not_nan(input: Tensor) -> Tensor:
    return input == input


@api(WHERE, NE, SUM, method="nansum", export="nansum")
def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The sum with NaNs counted as zero (their gradient is zero)."""
    input = as_tensor_arg(input)
    if dtype is not None:
        input = input.to(dtype)
    if input.dtype.is_complex:
        raise RuntimeError("nansum does not support complex inputs")
    x = where(_not_nan(input), input, 0.0) if input.dtype.is_floating_point else input
    return x.sum() if dim is None else x.sum(dim, keepdim=keepdim)


@api(WHERE, NE, SUM, method="nanmean", export="nanmean")
def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The mean of the values that are not NaN (NaN where there are none)."""
    input = as_tensor_arg(input)
    if not input.dtype.is_floating_point and dtype is None:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex "
                           f"dtype but got {input.dtype.tensor_type[:-6]}")
    if dtype is not None:
        input = input.to(dtype)
    count = _not_nan(input).to(input.dtype)
    total = nansum(input, dim, keepdim)
    n = count.sum() if dim is None else count.sum(dim, keepdim=keepdim)
    return total / n


@api(GATHER, SORT_INDICES, method="median", export="median")
def median(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """The lower median (the ``(n + 1) // 2``-th smallest value), or the first NaN where
    there is one: of every element when ``dim`` is None (a 0-d tensor; NaN for an empty
    tensor), else ``(values, indices)`` along ``dim``. The gradient goes to the chosen
    element."""
    input = as_tensor_arg(input)
    if dim is None:
        flat = input.reshape(-1)
        n = flat.shape[0]
        if n == 0:
            from ..creation import full

            return full((), float("nan"), dtype=input.dtype, device=input.device)
        return _MedianOfAll.apply(flat) if flat.requires_grad else _median_value(flat)
    d = dim % max(input.dim(), 1)
    n = input.shape[d] if input.dim() else 1
    if n == 0:
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    lower = kthvalue(input, (n + 1) // 2, d, keepdim=True)
    values, indices = lower.values, lower.indices
    if input.dtype.is_floating_point and input.dim():
        nan = input != input
        rows = nan.any(d, keepdim=True)
        if active() is not None or any_true(rows):  # (traced: at every call, whatever the values)
            first = nan.long().argmax(d, keepdim=True)  # argmax: the first NaN
            values = where(rows, input.gather(d, first), values)
            indices = where(rows, first, indices)
    if not keepdim and input.dim():
        values, indices = values.squeeze(d), indices.squeeze(d)
    return return_median(values, indices)


def _median_value(flat: Tensor) -> Tensor:
    """The lower median of a non-empty vector, NaN if it holds one (no history)."""
    from ..autograd import no_grad

    with no_grad():
        n = flat.shape[0]
        if flat.dtype.is_floating_point and active() is not None:  # the choice at every call
            return where((flat != flat).any(), float("nan"), kthvalue(flat, (n + 1) // 2).values)
        if flat.dtype.is_floating_point and any_true(flat != flat):
            return flat.new_full((), float("nan"))
        return kthvalue(flat, (n + 1) // 2).values


class _MedianOfAll(Function):
    """``median()`` of every element, with PyTorch's gradient: shared evenly by the elements
    equal to the median (NaNs when it is NaN)."""

    @staticmethod
    def forward(ctx, flat):
        v = _median_value(flat)
        ctx.save_for_backward(flat, v)
        return v

    @staticmethod
    def backward(ctx, g):
        flat, v = ctx.saved_tensors
        mask = (flat != flat) if bool((v != v).item()) else (flat == v)
        w = mask.to(g.dtype)
        return g * w / w.sum()


# its node carries PyTorch's name
_MedianOfAll._backward_cls = node_class("MedianBackward0", BackwardCFunction)


class _SharedByEquals(Function):
    """``value`` (a statistic of ``flat`` computed without history, e.g. its nanmedian), with
    PyTorch's gradient: shared evenly by the elements of ``flat`` equal to it."""

    @staticmethod
    def forward(ctx, flat, value):
        ctx.save_for_backward(flat, value)
        return value.clone()

    @staticmethod
    def backward(ctx, g):
        flat, v = ctx.saved_tensors
        w = (flat == v).to(g.dtype)
        return g * w / w.sum(), None


_SharedByEquals._backward_cls = node_class("NanmedianBackward0", BackwardCFunction)


def shared_by_equals(flat: Tensor, value: Tensor) -> Tensor:
    """:class:`_SharedByEquals` applied."""
    return _SharedByEquals.apply(flat, value)


@api(MAXIMUM, WHERE, method="logaddexp", export="logaddexp")
def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """``log(exp(input) + exp(other))`` without overflow: ``max + log1p(exp(-|a - b|))``."""
    input, other = as_tensor_arg(input), as_tensor_arg(other)
    m = maximum(input, other)
    d = input - other
    gap = where(d == d, -d.abs(), float("-inf"))  # equal infinities: the max alone
    return m + log1p(exp(gap))


@api(CLAMP, method="clamp_min", inplace="clamp_min_", export="clamp_min")
def clamp_min(input: Tensor, min) -> Tensor:  # noqa: A002 - PyTorch's name
    """``clamp(input, min=min)``."""
    return clamp(input, min=min)


@api(CLAMP, method="clamp_max", inplace="clamp_max_", export="clamp_max")
def clamp_max(input: Tensor, max) -> Tensor:  # noqa: A002 - PyTorch's name
    """``clamp(input, max=max)``."""
    return clamp(input, max=max)


@api(AMIN, AMAX, method="aminmax", export="aminmax")
def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False):
    """``(amin, amax)`` of every element, or along ``dim``."""
    input = as_tensor_arg(input)
    if dim is None:
        if keepdim:
            dims = tuple(range(input.ndim))
            return return_aminmax(input.amin(dims, keepdim=True), input.amax(dims, keepdim=True))
        return return_aminmax(input.amin(), input.amax())
    return return_aminmax(input.amin(dim, keepdim=keepdim), input.amax(dim, keepdim=keepdim))
