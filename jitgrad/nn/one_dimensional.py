"""1-D convolution and pooling over ``(N, C, L)`` (or unbatched ``(C, L)``) inputs, as the
2-D ops over a height of one: ``conv1d`` / ``Conv1d``, ``max_pool1d`` / ``MaxPool1d``,
``avg_pool1d`` / ``AvgPool1d``. The 2-D ops' kernels, gradients and CUDA paths serve them."""

from __future__ import annotations

from ..amp.autocast_mode import autocast_op
from ..tensor import Tensor
from .layers import _ConvBase, place
from .module import Module

__all__ = ["conv1d", "max_pool1d", "avg_pool1d", "Conv1d", "MaxPool1d", "AvgPool1d"]


def _single(v, name: str) -> int:
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(t) != 1:
        raise ValueError(f"{name} must be an int or a 1-tuple, got {v!r}")
    return int(t[0])


def _lifted(input: Tensor, fn_name: str) -> tuple[Tensor, bool]:
    """``input`` as ``(N, C, 1, L)``, and whether it had no batch dim."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to {fn_name}, but "
                           f"got input of size: {list(input.shape)}")
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    return x.unsqueeze(2), unbatched


def _dropped(out: Tensor, unbatched: bool) -> Tensor:
    out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out


@autocast_op
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-D convolution (cross-correlation) of ``input`` (N, C, L) with ``weight``
    (O, C/groups, k); ``padding`` a number or "same" / "valid"."""
    from ..ops.conv import conv2d

    x, unbatched = _lifted(input, "conv1d")
    if weight.ndim != 3:
        raise RuntimeError(f"conv1d: expected a 3-D weight (out, in/groups, k), got shape "
                           f"{list(weight.shape)}")
    if x.shape[1] != weight.shape[1] * groups:  # (PyTorch's message, in 1-D shapes)
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{[x.shape[0], x.shape[1], x.shape[3]]} to have "
                           f"{weight.shape[1] * groups} channels, but got {x.shape[1]} "
                           f"channels instead")
    pad = padding if isinstance(padding, str) else (0, _single(padding, "padding"))
    if padding != "same":  # (PyTorch's message, in 1-D sizes)
        padded = x.shape[3] + (0 if isinstance(pad, str) else 2 * max(pad[1], 0))
        kernel = max(_single(dilation, "dilation"), 1) * (weight.shape[2] - 1) + 1
        if padded < kernel:
            raise RuntimeError(f"Calculated padded input size per channel: ({padded}). Kernel "
                               f"size: ({kernel}). Kernel size can't be greater than actual "
                               "input size")
    out = conv2d(x, weight.unsqueeze(2), bias, (1, _single(stride, "stride")), pad,
                 (1, _single(dilation, "dilation")), groups)
    return _dropped(out, unbatched)


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """1-D max pooling of ``input`` (N, C, L) (``return_indices``: also the argmax
    positions along L)."""
    from ..ops.pooling import max_pool2d

    x, unbatched = _lifted(input, "max_pool1d")
    k = _single(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] else _single(stride, "stride")
    res = max_pool2d(x, (1, k), (1, s), (0, _single(padding, "padding")),
                     (1, _single(dilation, "dilation")), ceil_mode, return_indices)
    if return_indices:
        out, idx = res
        return _dropped(out, unbatched), _dropped(idx, unbatched)
    return _dropped(res, unbatched)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """1-D average pooling of ``input`` (N, C, L)."""
    from ..ops.pooling import avg_pool2d

    x, unbatched = _lifted(input, "avg_pool1d")
    k = _single(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] else _single(stride, "stride")
    out = avg_pool2d(x, (1, k), (1, s), (0, _single(padding, "padding")), ceil_mode,
                     count_include_pad)
    return _dropped(out, unbatched)


class Conv1d(_ConvBase):
    """1-D convolution over ``(N, C, L)``, PyTorch's default initialisation
    (``kaiming_uniform_(a=sqrt(5))``, bias bound ``1/sqrt(fan_in)``)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super().__init__()
        self._setup(in_channels, out_channels, (_single(kernel_size, "kernel_size"),),
                    (_single(stride, "stride"),),
                    padding if isinstance(padding, str) else (_single(padding, "padding"),),
                    (_single(dilation, "dilation"),), groups, bias, padding_mode, dtype)
        place(self, device)

    def forward(self, input: Tensor) -> Tensor:
        input, padding = self._padded(input)
        pad = padding if isinstance(padding, str) else padding[0]
        return conv1d(input, self.weight, self.bias, self.stride[0], pad, self.dilation[0],
                      self.groups)


class MaxPool1d(Module):
    """:func:`max_pool1d` as a module."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None \
            else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor):
        return max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool1d(Module):
    """:func:`avg_pool1d` as a module."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = (_single(kernel_size, "kernel_size"),)
        self.stride = self.kernel_size if stride is None else (_single(stride, "stride"),)
        self.padding = (_single(padding, "padding"),)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return avg_pool1d(input, self.kernel_size[0], self.stride[0], self.padding[0],
                          self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}")
