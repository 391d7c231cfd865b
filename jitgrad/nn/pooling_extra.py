"""More pooling, as PyTorch's: ``adaptive_avg_pool1d`` / ``AdaptiveAvgPool1d`` (the 2-D op
over a height of one), ``max_unpool1d/2d/3d`` / ``MaxUnpool1d/2d/3d`` (a scatter of the
pooled values to their indices in a zero output: the gradient is the gather back),
``lp_pool1d/2d/3d`` / ``LPPool1d/2d/3d`` (PyTorch's composite: average pooling of ``x ** p``
rescaled, then the ``1/p`` power), ``max_pool1d/2d/3d_with_indices`` and
``adaptive_max_pool1d/2d_with_indices``."""

from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from .module import Module

__all__ = ["adaptive_avg_pool1d", "max_unpool1d", "max_unpool2d", "max_unpool3d",
           "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_pool1d_with_indices",
           "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "AdaptiveAvgPool1d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "LPPool1d",
           "LPPool2d", "LPPool3d"]


def _tuple(v, n: int) -> tuple:
    if isinstance(v, (tuple, list)):
        return tuple(int(x) for x in v)
    return (int(v),) * n


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Average pooling of ``(N, C, L)`` (or ``(C, L)``) into ``output_size`` windows
    (PyTorch's window bounds ``floor(i L / out)`` .. ``ceil((i + 1) L / out)``)."""
    from ..ops.pooling import adaptive_avg_pool2d

    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional "
                           "tensor for argument #1 'self' (while checking arguments for "
                           "adaptive_avg_pool1d)")
    out = _tuple(output_size, 1)
    if len(out) != 1:
        raise RuntimeError(f"adaptive_avg_pool1d: output_size must be 1, but got {len(out)}")
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, out[0])).squeeze(-2)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = False
                            ) -> tuple[Tensor, Tensor]:
    """``max_pool1d(..., return_indices=True)``: the pooled values and their positions."""
    from .one_dimensional import max_pool1d

    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = False
                            ) -> tuple[Tensor, Tensor]:
    """``max_pool2d(..., return_indices=True)``: the pooled values and their flat positions
    in each ``H * W`` plane."""
    from . import functional as F

    return F.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = False
                            ) -> tuple[Tensor, Tensor]:
    """``max_pool3d(..., return_indices=True)``."""
    from .three_dimensional import max_pool3d

    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size,
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """``adaptive_max_pool1d(..., return_indices=True)``."""
    from .adaptive_max_pool import adaptive_max_pool1d

    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size,
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """``adaptive_max_pool2d(..., return_indices=True)``."""
    from .adaptive_max_pool import adaptive_max_pool2d

    return adaptive_max_pool2d(input, output_size, True)


# ---------------------------------------------------------------------- unpooling
def _unpool_output_size(input: Tensor, kernel_size: tuple, stride: tuple, padding: tuple,
                        output_size) -> list[int]:
    """PyTorch's unpooled size: ``(in - 1) * stride + kernel - 2 * padding`` per dim, or
    ``output_size`` (the spatial sizes, or with batch and channel) within a stride of it."""
    n = len(kernel_size)
    default = [(input.shape[-n + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d]
               for d in range(n)]
    if output_size is None:
        ret = default
    else:
        given = output_size
        if len(given) == n + 2:
            given = given[2:]
        if len(given) != n:
            raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} "
                             f"elements, but it has a length of '{len(given)}'")
        for d in range(n):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < given[d] < hi:
                raise ValueError(f'invalid output_size "{given}" (dim {d} must be between '
                                 f"{lo} and {hi})")
        ret = list(given)
    for d in range(n):
        if ret[d] < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={ret[d]}")
    return [int(r) for r in ret]


def _unpool(input: Tensor, indices: Tensor, size: list[int]) -> Tensor:
    """PyTorch's ``max_unpool2d`` / ``3d`` kernels: each value of ``input`` put at its flat
    index in a plane (volume) of zeros of ``size``."""
    from .. import creation, dtypes

    n = len(size)
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"Input to max_unpooling{n}d should be a {n + 1}d or {n + 2}d "
                           f"Tensor, but got a tensor with {input.ndim} dimensions.")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    if indices.dtype is not dtypes.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: "
                           f"{indices.dtype.tensor_type.replace('Tensor', '')}")
    volume = math.prod(size)
    idx = np.asarray(indices.detach().cpu().numpy())
    if idx.size and (idx.min() < 0 or idx.max() >= volume):
        bad = idx.min() if idx.min() < 0 else idx.max()
        raise RuntimeError(f"Found an invalid max index: {int(bad)} (output volumes are of "
                           f"size {'x'.join(str(d) for d in size)})")
    lead = tuple(input.shape[:-n])
    flat_in = input.reshape(*lead, -1)
    out = creation.zeros(*lead, volume, dtype=input.dtype, device=input.device)
    out = out.scatter(-1, indices.reshape(*lead, -1), flat_in)
    return out.reshape(*lead, *size)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of ``max_pool2d``: the values of ``input`` at the positions
    ``indices`` (from ``max_pool2d(..., return_indices=True)``), zeros elsewhere."""
    k = _tuple(kernel_size, 2)
    s = k if stride is None else _tuple(stride, 2)
    size = _unpool_output_size(input, k, s, _tuple(padding, 2), output_size)
    return _unpool(input, indices, size)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of ``max_pool3d``."""
    k = _tuple(kernel_size, 3)
    s = k if stride is None else _tuple(stride, 3)
    size = _unpool_output_size(input, k, s, _tuple(padding, 3), output_size)
    return _unpool(input, indices, size)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of ``max_pool1d`` (``max_unpool2d`` over a width of one, as
    PyTorch's)."""
    k = _tuple(kernel_size, 1)
    s = k if stride is None else _tuple(stride, 1)
    size = _unpool_output_size(input, k, s, _tuple(padding, 1), output_size)
    return _unpool(input.unsqueeze(-1), indices.unsqueeze(-1), size + [1]).squeeze(-1)


# --------------------------------------------------------------------- power pooling
def _lp_finish(out: Tensor, window: int, norm_type: float) -> Tensor:
    """``(sign(out) * relu(|out|) * window) ** (1 / p)``: the power mean of a window back
    to a ``p``-norm (PyTorch's composite, its gradients too)."""
    from ..ops.elementwise import relu

    return (out.sign() * relu(out.abs())).mul(window).pow(1.0 / norm_type)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """The ``norm_type``-norm of each ``kernel_size`` window of ``(N, C, H, W)``
    (``inf``: max of ``|x|``)."""
    from . import functional as F

    kh, kw = _tuple(kernel_size, 2)
    if norm_type == math.inf:
        return F.max_pool2d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -F.max_pool2d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = F.avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp_finish(out, kh * kw, norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: int, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """The ``norm_type``-norm of each window of ``kernel_size`` along ``L``."""
    from .one_dimensional import avg_pool1d, max_pool1d

    if norm_type == math.inf:
        return max_pool1d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -max_pool1d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp_finish(out, _tuple(kernel_size, 1)[0], norm_type)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """The ``norm_type``-norm of each ``kernel_size`` window of ``(N, C, D, H, W)``."""
    from .three_dimensional import avg_pool3d, max_pool3d

    k = _tuple(kernel_size, 3)
    if norm_type == math.inf:
        return max_pool3d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -max_pool3d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool3d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp_finish(out, math.prod(k), norm_type)


# ------------------------------------------------------------------------- modules
class AdaptiveAvgPool1d(Module):
    """:func:`adaptive_avg_pool1d` as a module."""

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class _MaxUnpool(Module):
    dims = 2

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        self.kernel_size = _tuple(kernel_size, self.dims)
        self.stride = _tuple(stride if stride is not None else kernel_size, self.dims)
        self.padding = _tuple(padding, self.dims)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """:func:`max_unpool1d` as a module: ``forward(input, indices, output_size=None)``."""

    dims = 1

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        return max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding,
                            output_size)


class MaxUnpool2d(_MaxUnpool):
    """:func:`max_unpool2d` as a module: ``forward(input, indices, output_size=None)``."""

    dims = 2

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        return max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding,
                            output_size)


class MaxUnpool3d(_MaxUnpool):
    """:func:`max_unpool3d` as a module: ``forward(input, indices, output_size=None)``."""

    dims = 3

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        return max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding,
                            output_size)


class _LPPool(Module):
    def __init__(self, norm_type: float, kernel_size, stride=None,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPool):
    """:func:`lp_pool1d` as a module."""

    def forward(self, input: Tensor) -> Tensor:
        return lp_pool1d(input, self.norm_type, self.kernel_size, self.stride,
                         self.ceil_mode)


class LPPool2d(_LPPool):
    """:func:`lp_pool2d` as a module."""

    def forward(self, input: Tensor) -> Tensor:
        return lp_pool2d(input, self.norm_type, self.kernel_size, self.stride,
                         self.ceil_mode)


class LPPool3d(_LPPool):
    """:func:`lp_pool3d` as a module."""

    def forward(self, input: Tensor) -> Tensor:
        return lp_pool3d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)
