"""The trapezoidal rule along a dim: ``trapezoid`` (alias ``trapz``) and
``cumulative_trapezoid``, with samples spaced by ``dx`` (default 1) or at positions ``x`` (a
vector along the dim, or a tensor broadcasting with ``y`` whose differences are taken along
the dim), as PyTorch's formulas: ``(sum(y) - (y[0] + y[-1]) / 2) * dx`` and ``sum((y[1:] +
y[:-1]) * diff(x)) / 2``. Written with ops, so differentiable in ``y`` and ``x``."""

from __future__ import annotations

from ..shapes import wrap_dim
from ..tensor import Tensor
from .api import api
from .arithmetic import MUL, SUB
from .dispatch import as_tensor_arg
from .scans import CUMSUM
from .sums import SUM

__all__ = ["trapezoid", "trapz", "cumulative_trapezoid"]


def _dim(y: Tensor, dim: int) -> int:
    if y.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return wrap_dim(dim, y.dim())


def _cut(t: Tensor, dim: int, start: int, stop: int | None) -> Tensor:
    return t[(slice(None),) * dim + (slice(start, stop),)]


def _spacing(y: Tensor, x: Tensor, dim: int, name: str) -> Tensor:
    """``diff(x)`` along ``dim``, shaped to broadcast with ``y``'s differences."""
    if y.dtype.name == "bool" or x.dtype.name == "bool":
        raise RuntimeError(f"{name}: received a bool input for `x` or `y`, but bool is not "
                           f"supported")
    if x.dim() == 1:
        if x.shape[0] != y.shape[dim]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        shape = [1] * y.dim()
        shape[dim] = x.shape[0]
        x = x.reshape(shape)
    elif x.dim() < y.dim():
        x = x.reshape((1,) * (y.dim() - x.dim()) + tuple(x.shape))
    return _cut(x, dim, 1, None) - _cut(x, dim, 0, -1)


def _check_args(x, dx, name: str) -> None:
    if x is not None and dx is not None:
        raise TypeError(f"{name}() received an invalid combination of arguments - got both "
                        f"x and dx")
    if dx is not None and isinstance(dx, (bool, complex)):
        raise RuntimeError(f"{name}: Currently, we only support dx as a real number.")


@api(SUM, SUB, MUL, export="trapezoid")
def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
              dim: int = -1) -> Tensor:
    """The integral of ``y`` along ``dim`` by the trapezoidal rule, samples ``dx`` apart (1
    by default) or at positions ``x``.

    >>> import jitgrad
    >>> jitgrad.trapezoid(jitgrad.tensor([1., 2., 4.]))
    tensor(4.5000)
    """
    _check_args(x, dx, "trapezoid")
    y = as_tensor_arg(y, "y")
    d = _dim(y, dim)
    if y.shape[d] == 0:
        from ..creation import zeros

        shape = tuple(s for i, s in enumerate(y.shape) if i != d)
        return zeros(shape, dtype=y.dtype, device=y.device)
    if x is not None:
        step = _spacing(y, as_tensor_arg(x, "x"), d, "trapezoid")
        return ((_cut(y, d, 0, -1) + _cut(y, d, 1, None)) * step).sum(d) / 2.0
    if y.dtype.name == "bool":
        raise RuntimeError("trapezoid: received a bool input for `y`, but bool is not "
                           "supported")
    step = 1.0 if dx is None else float(dx)
    ends = y.select(d, 0) + y.select(d, -1)
    return (y.sum(d) - ends * 0.5) * step


@api(SUM, SUB, MUL, export="trapz")
def trapz(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
          dim: int = -1) -> Tensor:
    """:func:`trapezoid` (its older name)."""
    return trapezoid(y, x, dx=dx, dim=dim)


@api(CUMSUM, SUB, MUL, export="cumulative_trapezoid")
def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
                         dim: int = -1) -> Tensor:
    """The running trapezoidal integral of ``y`` along ``dim`` (one value fewer than
    samples), samples ``dx`` apart (1 by default) or at positions ``x``."""
    _check_args(x, dx, "cumulative_trapezoid")
    y = as_tensor_arg(y, "y")
    d = _dim(y, dim)
    pairs = _cut(y, d, 0, -1) + _cut(y, d, 1, None)
    if x is not None:
        step = _spacing(y, as_tensor_arg(x, "x"), d, "cumulative_trapezoid")
        return (pairs * step).cumsum(d) / 2.0
    if y.dtype.name == "bool":
        raise RuntimeError("cumulative_trapezoid: received a bool input for `y`, but bool is "
                           "not supported")
    step = 1.0 if dx is None else float(dx)
    return (pairs * (step / 2.0)).cumsum(d)
