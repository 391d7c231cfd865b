"""3-D convolution and pooling over ``(N, C, D, H, W)`` (or unbatched ``(C, D, H, W)``)
inputs, written with the 2-D ops (so their kernels, gradients, compilation and CUDA paths
serve them): ``conv3d`` / ``Conv3d``, ``max_pool3d`` / ``MaxPool3d``, ``avg_pool3d`` /
``AvgPool3d``, ``adaptive_avg_pool3d`` / ``AdaptiveAvgPool3d``, ``conv_transpose3d`` /
``ConvTranspose3d``.

* ``conv3d``: for each kernel depth ``kd``, the depth slices it reads (strided, dilated) are
  folded into the batch and convolved in 2-D with ``weight[:, :, kd]``; the ``KD`` results
  are added.
* ``conv_transpose3d``: for each kernel depth, the 2-D transposed convolution of every input
  slice with ``weight[:, :, kd]``; the results are spread along depth by the stride (zeros
  between), shifted by ``kd * dilation``, added, and cropped by the padding.
* ``max_pool3d``: 2-D max pooling of every depth slice, then the maximum over each depth
  window (``max(dim)``, so the gradient goes to one element: the first maximum in
  ``(d, h, w)`` order, as PyTorch's; ``return_indices`` gives its flat ``d*H*W + h*W + w``).
* ``avg_pool3d``: window sums (2-D sums of every slice, then over depth windows) divided by
  PyTorch's divisor (the window clipped to the padded input, or to the input without
  ``count_include_pad``; ``divisor_override``).
* ``adaptive_avg_pool3d``: adaptive averages along depth (a product with the averaging
  matrix), then 2-D adaptive average pooling.
"""

from __future__ import annotations

import numpy as np

from .. import creation
from ..amp.autocast_mode import autocast_op
from ..ops.dispatch import as_tensor_arg
from ..ops.movement import stack
from ..tensor import Tensor
from .conv_transpose import _ConvTransposeBase
from .layers import _ConvBase, place
from .module import Module

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d",
           "Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d"]


def _triple(v, name: str) -> tuple[int, int, int]:
    t = tuple(v) if isinstance(v, (tuple, list)) else (v, v, v)
    if len(t) == 1:
        t = t * 3
    if len(t) != 3:
        raise ValueError(f"{name} must be an int or a 3-tuple, got {v!r}")
    return tuple(int(x) for x in t)


def _batched(input: Tensor, fn_name: str) -> tuple[Tensor, bool]:
    convolution = fn_name.startswith("conv")
    if input.ndim not in (4, 5) or (input.numel() == 0 and not convolution):
        if convolution:
            msg = (f"Expected 4D (unbatched) or 5D (batched) input to {fn_name}, but got input "
                   f"of size: {list(input.shape)}")
        elif fn_name == "adaptive_avg_pool3d":
            msg = f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(input.shape)}"
        else:
            msg = "non-empty 4D or 5D (batch mode) tensor expected for input"
        raise RuntimeError(msg)
    unbatched = input.ndim == 4
    return (input.unsqueeze(0) if unbatched else input), unbatched


def _fold_depth(x: Tensor) -> Tensor:
    """``(N, C, D, H, W)`` -> ``(N * D, C, H, W)``."""
    n, c, d, h, w = x.shape
    return x.permute(0, 2, 1, 3, 4).reshape(n * d, c, h, w)


def _unfold_depth(x: Tensor, n: int) -> Tensor:
    """``(N * D, C, H, W)`` -> ``(N, C, D, H, W)``."""
    nd, c, h, w = x.shape
    return x.reshape(n, nd // n, c, h, w).permute(0, 2, 1, 3, 4)


def _depth_taps(x: Tensor, k: int, stride: int, dilation: int, out: int) -> list[Tensor]:
    """For each tap ``j < k`` of a depth window, the slices ``x[:, :, o*s + j*dil]``."""
    return [x[:, :, j * dilation: j * dilation + (out - 1) * stride + 1: stride]
            for j in range(k)]


# ---------------------------------------------------------------------------- conv3d
def _same_padding(kernel, dilation) -> list[tuple[int, int]]:
    pads = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        pads.append((total // 2, total - total // 2))
    return pads


@autocast_op
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """3-D convolution (cross-correlation) of ``input`` (N, C, D, H, W) with ``weight``
    (O, C/groups, kD, kH, kW); ``padding`` a number, a triple or "same" / "valid"."""
    from ..ops.conv import conv2d
    from ..ops.padding import pad as pad_fn

    input = as_tensor_arg(input, "input")
    x, unbatched = _batched(input, "conv3d")
    if weight.ndim != 5:
        raise RuntimeError(f"Expected {weight.ndim}-dimensional input for "
                           f"{weight.ndim}-dimensional weight {list(weight.shape)}, but got "
                           f"5-dimensional input of size {list(x.shape)} instead")
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(x.shape)} to have {weight.shape[1] * groups} "
                           f"channels, but got {x.shape[1]} channels instead")
    s, dil = _triple(stride, "stride"), _triple(dilation, "dilation")
    kernel = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * 3
        elif padding == "same":
            if any(v != 1 for v in s):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            pads = _same_padding(kernel, dil)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        pads = [(p, p) for p in _triple(padding, "padding")]
    if any(lo != hi for lo, hi in pads[1:]):  # asymmetric 'same' in H or W: pad first
        x = pad_fn(x, (pads[2][0], pads[2][1], pads[1][0], pads[1][1]))
        pads = [pads[0], (0, 0), (0, 0)]
    if pads[0] != (0, 0):
        x = pad_fn(x, (0, 0, 0, 0, pads[0][0], pads[0][1]))
    size = [x.shape[2], x.shape[3] + 2 * pads[1][0], x.shape[4] + 2 * pads[2][0]]
    span = [d * (k - 1) + 1 for k, d in zip(kernel, dil)]
    if any(sz < sp for sz, sp in zip(size, span)):
        raise RuntimeError(f"Calculated padded input size per channel: "
                           f"({' x '.join(map(str, size))}). Kernel size: "
                           f"({' x '.join(map(str, kernel))}). Kernel size can't be greater "
                           f"than actual input size")
    n = x.shape[0]
    out_d = (size[0] - span[0]) // s[0] + 1
    out = None
    for kd, taps in enumerate(_depth_taps(x, kernel[0], s[0], dil[0], out_d)):
        term = conv2d(_fold_depth(taps), weight[:, :, kd], None, s[1:],
                      (pads[1][0], pads[2][0]), dil[1:], groups)
        out = term if out is None else out + term
    out = _unfold_depth(out, n)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def _spread(y: Tensor, stride: int) -> Tensor:
    """``y`` (N, C, D, H, W) with ``stride - 1`` zero slices between its depth slices."""
    if stride == 1:
        return y
    n, c, d, h, w = y.shape
    zeros = creation.zeros((n, c, d, h, w), dtype=y.dtype, device=y.device)
    return stack([y] + [zeros] * (stride - 1), 3).reshape(n, c, d * stride, h, w)[
        :, :, :(d - 1) * stride + 1]


@autocast_op
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The transposed 3-D convolution of ``input`` (N, C_in, D, H, W) with ``weight``
    (C_in, C_out/groups, kD, kH, kW): output depth ``(D - 1) * stride - 2 * padding +
    dilation * (kD - 1) + output_padding + 1`` (likewise height and width)."""
    from ..ops.padding import pad as pad_fn
    from .conv_transpose import conv_transpose2d

    input = as_tensor_arg(input, "input")
    x, unbatched = _batched(input, "conv_transpose3d")
    if weight.ndim != 5 or weight.shape[0] != x.shape[1]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, "
                           f"expected input{list(x.shape)} to have {weight.shape[0]} "
                           f"channels, but got {x.shape[1]} channels instead")
    if weight.shape[0] < groups or weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {list(weight.shape)} instead")
    s, p = _triple(stride, "stride"), _triple(padding, "padding")
    op, d = _triple(output_padding, "output_padding"), _triple(dilation, "dilation")
    if any(o >= max(st, di) for o, st, di in zip(op, s, d)):
        names = ("depth", "height", "width")
        raise RuntimeError(
            "output padding must be smaller than either stride or dilation, but got "
            + " ".join(f"output_padding_{nm}: {v}" for nm, v in zip(names, op)) + " "
            + " ".join(f"stride_{nm}: {v}" for nm, v in zip(names, s)) + " "
            + " ".join(f"dilation_{nm}: {v}" for nm, v in zip(names, d)))
    kernel = tuple(weight.shape[2:])
    sizes = tuple(x.shape[2:])
    outs = [(i - 1) * st - 2 * pp + di * (k - 1) + o + 1
            for i, st, pp, di, k, o in zip(sizes, s, p, d, kernel, op)]
    if any(o <= 0 for o in outs):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, sizes))}). "
                           f"Calculated output size per channel: "
                           f"({' x '.join(map(str, outs))}). Output size is too small")
    n = x.shape[0]
    full = (sizes[0] - 1) * s[0] + d[0] * (kernel[0] - 1) + 1 + op[0]
    planes = _fold_depth(x)
    out = None
    for kd in range(kernel[0]):
        y = _spread(_unfold_depth(conv_transpose2d(planes, weight[:, :, kd], None, s[1:],
                                                   p[1:], op[1:], groups, d[1:]), n), s[0])
        front = kd * d[0]
        term = pad_fn(y, (0, 0, 0, 0, front, full - front - y.shape[2]))
        out = term if out is None else out + term
    out = out[:, :, p[0]: p[0] + outs[0]]
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


# ---------------------------------------------------------------------------- pooling
def _pool_out(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size (with ceil_mode's rule that the last window starts
    inside the input or its left padding)."""
    num = size + 2 * p - d * (k - 1) - 1
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_args(kernel_size, stride, padding, dilation=1):
    k = _triple(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] or stride == () else _triple(stride, "stride")
    p, d = _triple(padding, "padding"), _triple(dilation, "dilation")
    for kk, pp in zip(k, p):
        if pp > kk // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pp}, kernel_size={kk} and dilation=1")
    return k, s, p, d


def _depth_padded(y: Tensor, p: int, out: int, k: int, s: int, d: int, value: float) -> Tensor:
    """``y`` padded along depth with ``value``: ``p`` in front, behind as far as the last
    window reaches."""
    from ..ops.padding import pad as pad_fn

    back = max(0, (out - 1) * s + d * (k - 1) + 1 - (y.shape[2] + p))
    if p == 0 and back == 0:
        return y
    return pad_fn(y, (0, 0, 0, 0, p, back), value=value)


def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """3-D max pooling of ``input`` (N, C, D, H, W) (``return_indices``: also the flat
    ``d*H*W + h*W + w`` position of each maximum)."""
    from ..ops.pooling import max_pool2d

    input = as_tensor_arg(input, "input")
    x, unbatched = _batched(input, "max_pool3d")
    k, s, p, d = _pool_args(kernel_size, stride, padding, dilation)
    n, c, depth, h, w = x.shape
    out_d = _pool_out(depth, k[0], s[0], p[0], d[0], ceil_mode)
    planes, idx2 = max_pool2d(_fold_depth(x), k[1:], s[1:], p[1:], d[1:], ceil_mode, True)
    planes, idx2 = _unfold_depth(planes, n), _unfold_depth(idx2, n)
    taps = stack(_depth_taps(_depth_padded(planes, p[0], out_d, k[0], s[0], d[0],
                                           float("-inf")), k[0], s[0], d[0], out_d), -1)
    best = taps.max(-1)
    out = best.values
    if return_indices:
        # the depth of the chosen tap, and its plane's flat position there
        idx_taps = stack(_depth_taps(_depth_padded(idx2, p[0], out_d, k[0], s[0], d[0], 0),
                                     k[0], s[0], d[0], out_d), -1)
        plane_pos = idx_taps.gather(-1, best.indices.unsqueeze(-1)).squeeze(-1)
        starts = creation.arange(out_d, device=x.device).reshape(1, 1, -1, 1, 1) * s[0] - p[0]
        depth_of = starts + best.indices * d[0]
        indices = depth_of * (h * w) + plane_pos
        if unbatched:
            return out.squeeze(0), indices.squeeze(0)
        return out, indices
    return out.squeeze(0) if unbatched else out


def _divisor(size: int, k: int, s: int, p: int, out: int, include_pad: bool) -> np.ndarray:
    starts = np.arange(out) * s - p
    ends = np.minimum(starts + k, size + p)
    if include_pad:
        return (ends - starts).astype(np.float64)
    return (np.minimum(ends, size) - np.maximum(starts, 0)).astype(np.float64)


def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """3-D average pooling of ``input`` (N, C, D, H, W)."""
    from ..ops.pooling import avg_pool2d

    input = as_tensor_arg(input, "input")
    x, unbatched = _batched(input, "avg_pool3d")
    k, s, p, _ = _pool_args(kernel_size, stride, padding)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    n, c, depth, h, w = x.shape
    outs = [_pool_out(sz, kk, ss, pp, 1, ceil_mode) for sz, kk, ss, pp in
            zip((depth, h, w), k, s, p)]
    sums2 = _unfold_depth(avg_pool2d(_fold_depth(x), k[1:], s[1:], p[1:], ceil_mode, True,
                                     divisor_override=1), n)
    taps = _depth_taps(_depth_padded(sums2, p[0], outs[0], k[0], s[0], 1, 0.0), k[0], s[0],
                       1, outs[0])
    total = taps[0]
    for t in taps[1:]:
        total = total + t
    if divisor_override is not None:
        out = total / float(divisor_override)
    else:
        dd, dh, dw = (_divisor(sz, kk, ss, pp, o, count_include_pad)
                      for sz, kk, ss, pp, o in zip((depth, h, w), k, s, p, outs))
        div = dd[:, None, None] * dh[None, :, None] * dw[None, None, :]
        out = total / creation.tensor(div, dtype=x.dtype, device=x.device)
    return out.squeeze(0) if unbatched else out


def _adaptive_matrix(size: int, out: int) -> np.ndarray:
    """``(out, size)``: row ``i`` averages ``floor(i*size/out)`` to ``ceil((i+1)*size/out)``."""
    m = np.zeros((out, size))
    for i in range(out):
        a, b = (i * size) // out, -((-(i + 1) * size) // out)
        m[i, a:b] = 1.0 / (b - a)
    return m


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """3-D adaptive average pooling of ``input`` (N, C, D, H, W) to ``output_size`` (an int,
    or a triple whose None entries keep the input's size)."""
    from ..ops.pooling import adaptive_avg_pool2d

    input = as_tensor_arg(input, "input")
    x, unbatched = _batched(input, "adaptive_avg_pool3d")
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * 3
    if len(sizes) != 3:
        raise ValueError(f"adaptive_avg_pool3d: output_size must be 3, got {len(sizes)}")
    sizes = tuple(int(x.shape[2 + i]) if v is None else int(v) for i, v in enumerate(sizes))
    if sizes == (1, 1, 1):
        out = x.mean((-3, -2, -1), keepdim=True)
    else:
        n, c, depth = x.shape[:3]
        m = creation.tensor(_adaptive_matrix(depth, sizes[0]), dtype=x.dtype, device=x.device)
        along_depth = (x.movedim(2, -1) @ m.T).movedim(-1, 2)
        out = _unfold_depth(adaptive_avg_pool2d(_fold_depth(along_depth), sizes[1:]), n)
    return out.squeeze(0) if unbatched else out


# ---------------------------------------------------------------------------- modules
class Conv3d(_ConvBase):
    """3-D convolution over ``(N, C, D, H, W)``, PyTorch's default initialisation
    (``kaiming_uniform_(a=sqrt(5))``, bias bound ``1/sqrt(fan_in)``)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super().__init__()
        self._setup(in_channels, out_channels, _triple(kernel_size, "kernel_size"),
                    _triple(stride, "stride"),
                    padding if isinstance(padding, str) else _triple(padding, "padding"),
                    _triple(dilation, "dilation"), groups, bias, padding_mode, dtype)
        place(self, device)

    def forward(self, input: Tensor) -> Tensor:
        input, padding = self._padded(input)
        return conv3d(input, self.weight, self.bias, self.stride, padding, self.dilation,
                      self.groups)


class ConvTranspose3d(_ConvTransposeBase):
    """Transposed 3-D convolution (a learned upsampling), PyTorch's parameters and
    initialisation (``weight`` (C_in, C_out/groups, kD, kH, kW))."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__()
        self._setup_transposed(in_channels, out_channels, _triple(kernel_size, "kernel_size"),
                               _triple(stride, "stride"), _triple(padding, "padding"),
                               _triple(output_padding, "output_padding"), groups, bias,
                               _triple(dilation, "dilation"), padding_mode, dtype)
        place(self, device)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = self._output_padding(input, output_size)
        return conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                output_padding, self.groups, self.dilation)


class MaxPool3d(Module):
    """:func:`max_pool3d` as a module."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor):
        return max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool3d(Module):
    """:func:`avg_pool3d` as a module."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(Module):
    """:func:`adaptive_avg_pool3d` as a module."""

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return adaptive_avg_pool3d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
