"""Transposed 2-D convolution: ``conv_transpose2d`` / ``ConvTranspose2d``. It is the adjoint
of ``conv2d`` in its input -- the op that computes conv2d's input gradient
(``conv2d_backward_input``, whose gradients are defined for double backward) -- plus a
bias, so it shares conv2d's kernels on the CPU and on CUDA."""

from __future__ import annotations

import numpy as np

from .. import creation, dtypes
from ..amp.autocast_mode import autocast_op
from ..autograd.grad_mode import no_grad
from ..ops.conv import conv2d_backward_input
from ..ops.conv_common import half_through_float
from ..shapes import fmt_shape
from ..tensor import Size, Tensor
from .layers import _ConvBase, _pair, place
from .parameter import Parameter

__all__ = ["conv_transpose2d", "ConvTranspose2d", "conv_transpose1d", "ConvTranspose1d"]


@autocast_op
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The transposed convolution of ``input`` (N, C_in, H, W) with ``weight``
    (C_in, C_out/groups, kH, kW): output height ``(H - 1) * stride - 2 * padding +
    dilation * (kH - 1) + output_padding + 1`` (likewise the width)."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to "
                           f"conv_transpose2d, but got input of size: {fmt_shape(input.shape)}")
    if input._data.dtype == np.float16:
        return half_through_float(conv_transpose2d, input, weight, bias, stride, padding,
                                  output_padding, groups, dilation)
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    if weight.ndim != 4 or weight.shape[0] != x.shape[1]:
        raise RuntimeError(f"Given transposed=1, weight of size {fmt_shape(weight.shape)}, "
                           f"expected input{fmt_shape(x.shape)} to have {weight.shape[0]} "
                           f"channels, but got {x.shape[1]} channels instead")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0")
    (sh, sw), (ph, pw) = _pair(stride, "stride"), _pair(padding, "padding")
    (oph, opw), (dh, dw) = _pair(output_padding, "output_padding"), _pair(dilation, "dilation")
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise RuntimeError("output padding must be smaller than either stride or dilation, "
                           f"but got output_padding_height: {oph} output_padding_width: {opw} "
                           f"stride_height: {sh} stride_width: {sw} dilation_height: {dh} "
                           f"dilation_width: {dw}")
    kh, kw = weight.shape[2], weight.shape[3]
    out_h = (x.shape[2] - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    out_w = (x.shape[3] - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    if out_h <= 0 or out_w <= 0:
        raise RuntimeError(f"Given input size per channel: ({x.shape[2]} x {x.shape[3]}). "
                           f"Calculated output size per channel: ({out_h} x {out_w}). Output "
                           f"size is too small")
    p = {"input_size": (out_h, out_w), "stride": (sh, sw), "padding": (ph, ph, pw, pw),
         "dilation": (dh, dw), "groups": int(groups)}
    out = conv2d_backward_input(x, weight, p)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out.squeeze(0) if unbatched else out


class _ConvTransposeBase(_ConvBase):
    """What the transposed convolution layers share: parameters (``weight`` ``(C_in,
    C_out/groups, *kernel)``), PyTorch's initialisation and ``output_size``."""

    transposed = True

    def _setup_transposed(self, in_channels: int, out_channels: int, kernel_size: tuple,
                          stride: tuple, padding: tuple, output_padding: tuple, groups: int,
                          bias: bool, dilation: tuple, padding_mode: str, dtype) -> None:
        self._check_groups(in_channels, out_channels, groups)
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.output_padding, self.dilation, self.groups = output_padding, dilation, groups
        self.padding_mode = padding_mode
        dt = None if dtype is None else dtypes.to_dtype(dtype)
        shape = (in_channels, out_channels // groups, *self.kernel_size)
        self.weight = Parameter(creation.empty(*shape, dtype=dt, device="cpu"))
        if bias:
            self.bias = Parameter(creation.empty(out_channels, dtype=dt, device="cpu"))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        """The output padding that makes the output's spatial size ``output_size``."""
        k = len(self.kernel_size)
        size = list(output_size)[-k:]
        smallest = [(input.shape[-k + d] - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(k)]
        pads = [size[d] - smallest[d] for d in range(k)]
        for d in range(k):
            if not 0 <= pads[d] < max(self.stride[d], self.dilation[d]):
                largest = [s + self.stride[j] - 1 for j, s in enumerate(smallest)]
                raise ValueError(f"requested an output size of {size}, but valid sizes range "
                                 f"from {smallest} to {largest} (for an input of "
                                 f"{Size(input.shape[-k:])})")
        return tuple(pads)


class ConvTranspose2d(_ConvTransposeBase):
    """Transposed 2-D convolution (a learned upsampling), PyTorch's parameters and
    initialisation (``weight`` (C_in, C_out/groups, kH, kW))."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__()
        self._setup_transposed(in_channels, out_channels, _pair(kernel_size, "kernel_size"),
                               _pair(stride, "stride"), _pair(padding, "padding"),
                               _pair(output_padding, "output_padding"), groups, bias,
                               _pair(dilation, "dilation"), padding_mode, dtype)
        place(self, device)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = self._output_padding(input, output_size)
        return conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                output_padding, self.groups, self.dilation)


@autocast_op
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The transposed convolution of ``(N, C_in, L)`` (or ``(C_in, L)``) with ``weight``
    ``(C_in, C_out/groups, k)``: :func:`conv_transpose2d` over a height of one."""
    from .one_dimensional import _single

    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to "
                           f"conv_transpose1d, but got input of size: {fmt_shape(input.shape)}")
    if weight.ndim != 3:
        raise RuntimeError(f"conv_transpose1d: weight must be 3-D (C_in, C_out/groups, k), got "
                           f"{fmt_shape(weight.shape)}")
    out = conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias,
                           (1, _single(stride, "stride")), (0, _single(padding, "padding")),
                           (0, _single(output_padding, "output_padding")), groups,
                           (1, _single(dilation, "dilation")))
    return out.squeeze(-2)


class ConvTranspose1d(ConvTranspose2d):
    """Transposed 1-D convolution, PyTorch's parameters and initialisation (``weight``
    ``(C_in, C_out/groups, k)``)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        from .one_dimensional import _single

        k = _single(kernel_size, "kernel_size")
        super().__init__(in_channels, out_channels, (1, k), 1, 0, 0, groups, bias, 1,
                         padding_mode, None, dtype)
        self.kernel_size = (k,)
        self.stride, self.padding = (_single(stride, "stride"),), (_single(padding, "padding"),)
        self.output_padding = (_single(output_padding, "output_padding"),)
        self.dilation = (_single(dilation, "dilation"),)
        with no_grad():
            self.weight = Parameter(self.weight.detach().squeeze(2).clone())
        place(self, device)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        output_padding = self.output_padding[0]
        if output_size is not None:
            size = list(output_size)[-1]
            smallest = ((input.shape[-1] - 1) * self.stride[0] - 2 * self.padding[0]
                        + self.dilation[0] * (self.kernel_size[0] - 1) + 1)
            output_padding = size - smallest
            if not 0 <= output_padding < max(self.stride[0], self.dilation[0]):
                raise ValueError(f"requested an output size of {[size]}, but valid sizes range "
                                 f"from {[smallest]} to {[smallest + self.stride[0] - 1]} (for "
                                 f"an input of {Size(input.shape[-1:])})")
        return conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                output_padding, self.groups, self.dilation)
