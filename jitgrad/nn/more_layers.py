"""More layers and functions, written with jitgrad's ops (so differentiable, compilable and
on CUDA): ``rms_norm`` / ``RMSNorm``, ``bilinear`` / ``Bilinear``, ``unfold`` / ``fold``
(``Unfold`` / ``Fold``: sliding patches as columns, and back, summing overlaps),
``hardshrink`` / ``softshrink`` / ``tanhshrink`` and their modules, ``Softmax2d``,
``dropout3d`` / ``Dropout3d``, ``gumbel_softmax``, ``channel_shuffle`` / ``ChannelShuffle``,
``UpsamplingNearest2d`` / ``UpsamplingBilinear2d`` and the deprecated ``upsample*``.
Loaded on first use (``jitgrad.nn`` and ``jitgrad.nn.functional`` module ``__getattr__``)."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import creation, dtypes
from ..ops.selection import where
from ..shapes import as_shape, fmt_shape
from ..tensor import Tensor
from . import functional as F
from . import init
from .activation import _Pointwise
from .interpolation import Upsample, interpolate
from .layers import _pair, place
from .module import Module
from .parameter import Parameter

__all__ = [
    "rms_norm", "bilinear", "unfold", "fold", "hardshrink", "softshrink", "tanhshrink",
    "dropout3d", "gumbel_softmax", "channel_shuffle", "upsample", "upsample_nearest",
    "upsample_bilinear", "RMSNorm", "Bilinear", "Unfold", "Fold", "Hardshrink", "Softshrink",
    "Tanhshrink", "Softmax2d", "Dropout3d", "ChannelShuffle", "UpsamplingNearest2d",
    "UpsamplingBilinear2d",
]


# ------------------------------------------------------------------------- functional
def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """``input / sqrt(mean(input**2) + eps) * weight`` over the trailing
    ``normalized_shape`` dims (``eps``: the dtype's machine epsilon by default; float16
    computed in float32, as PyTorch's)."""
    ns = as_shape((normalized_shape,))
    if tuple(input.shape[input.ndim - len(ns):]) != ns or len(ns) > input.ndim:
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in ns)}], but got input of size"
                           f"{fmt_shape(input.shape)}")
    if eps is None:
        eps = float(np.finfo(input.dtype.np).eps)
    half = input.dtype == dtypes.float16
    x = input.float() if half else input
    dims = tuple(range(input.ndim - len(ns), input.ndim))
    out = x * (x * x).mean(dims, keepdim=True).add(eps).rsqrt()
    if half:
        out = out.half()
    return out * weight if weight is not None else out


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]``."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{fmt_shape(input1.shape[:-1])} and {fmt_shape(input2.shape[:-1])}")
    if weight.ndim != 3 or weight.shape[1] != input1.shape[-1] or \
            weight.shape[2] != input2.shape[-1]:
        raise RuntimeError(f"bilinear(): weight of size {fmt_shape(weight.shape)} does not "
                           f"match inputs of sizes {fmt_shape(input1.shape)} and "
                           f"{fmt_shape(input2.shape)}")
    lead = input1.shape[:-1]
    a = input1.reshape(-1, input1.shape[-1])
    b = input2.reshape(-1, input2.shape[-1])
    # (B, i) @ (o, i, j) -> (o, B, j); times b, summed over j -> (o, B)
    y = ((a @ weight) * b).sum(-1).t()
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, weight.shape[0])


def _patch_args(kernel_size, dilation, padding, stride) -> tuple:
    """unfold's and fold's window arguments, each as a pair."""
    return (_pair(kernel_size, "kernel_size"), _pair(dilation, "dilation"),
            _pair(padding, "padding"), _pair(stride, "stride"))


def _patch_index(hp: int, wp: int, k, d, s) -> tuple[np.ndarray, int, int]:
    """Flat positions ``row * wp + col`` in a padded ``hp x wp`` plane of each kernel offset
    (rows) at each output position (columns), and the output's height and width."""
    oh = (hp - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (wp - d[1] * (k[1] - 1) - 1) // s[1] + 1
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input with spatial size ({hp}, {wp}), kernel_size={k}, "
                           f"dilation={d}, stride={s}: calculated shape of the array of "
                           f"sliding blocks as ({oh}, {ow}), but its components must be at "
                           f"least one.")
    ki, kj = np.meshgrid(np.arange(k[0]) * d[0], np.arange(k[1]) * d[1], indexing="ij")
    oi, oj = np.meshgrid(np.arange(oh) * s[0], np.arange(ow) * s[1], indexing="ij")
    rows = ki.reshape(-1, 1) + oi.reshape(1, -1)
    cols = kj.reshape(-1, 1) + oj.reshape(1, -1)
    return (rows * wp + cols).astype(np.int64), oh, ow


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding ``kernel_size`` blocks of ``(N, C, H, W)`` (or ``(C, H, W)``) as columns:
    ``(N, C * kh * kw, L)`` (PyTorch's ``im2col`` order: channel, then kernel row, column)."""
    k, d, p, s = _patch_args(kernel_size, dilation, padding, stride)
    batched = input.ndim == 4
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got "
                           f"{input.ndim}D)")
    x = input if batched else input.unsqueeze(0)
    xp = F.pad(x, (p[1], p[1], p[0], p[0])) if any(p) else x
    n, c, hp, wp = xp.shape
    idx, _, _ = _patch_index(hp, wp, k, d, s)
    flat = xp.reshape(n, c, hp * wp)
    cols = flat.index_select(2, creation.tensor(idx.reshape(-1), device=x.device))
    out = cols.reshape(n, c * k[0] * k[1], idx.shape[1])
    return out if batched else out.squeeze(0)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0,
         stride=1) -> Tensor:
    """The adjoint of :func:`unfold`: columns ``(N, C * kh * kw, L)`` summed back into an
    ``(N, C, H, W)`` image (overlapping blocks add)."""
    o = _pair(output_size, "output_size")
    k, d, p, s = _patch_args(kernel_size, dilation, padding, stride)
    batched = input.ndim == 3
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors "
                           f"are supported (got {input.ndim}D)")
    x = input if batched else input.unsqueeze(0)
    n, ck, length = x.shape
    if ck % (k[0] * k[1]):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={ck} and "
                           f"kernel_size={k}")
    hp, wp = o[0] + 2 * p[0], o[1] + 2 * p[1]
    idx, oh, ow = _patch_index(hp, wp, k, d, s)
    if oh * ow != length:
        raise RuntimeError(f"Given output_size={o}, kernel_size={k}, dilation={d}, "
                           f"padding={p}, stride={s}, expected size of input's dimension 2 "
                           f"to match the calculated number of sliding blocks {oh} * {ow} = "
                           f"{oh * ow}, but got input.size(2)={length}.")
    c = ck // (k[0] * k[1])
    vals = x.reshape(n, c, k[0] * k[1] * length)
    plane = creation.zeros(n, c, hp * wp, dtype=x.dtype, device=x.device)
    img = plane.index_add(2, creation.tensor(idx.reshape(-1), device=x.device), vals)
    img = img.reshape(n, c, hp, wp)[:, :, p[0]:p[0] + o[0], p[1]:p[1] + o[1]]
    return img if batched else img.squeeze(0)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """0 on ``[-lambd, lambd]``, ``x`` elsewhere."""
    return where((input >= -lambd) & (input <= lambd), 0.0, input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, 0.0))


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - input.tanh()


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, D, H, W)`` (or ``(C, D, H, W)``) with probability
    ``p``."""
    return F._channel_dropout("dropout3d", input, p, training, inplace, 3)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """A sample from the Gumbel-softmax distribution over ``dim``: ``softmax((logits + g) /
    tau)`` with Gumbel noise ``g``; with ``hard``, the one-hot of its argmax in the forward
    pass and the soft sample's gradient (straight-through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", UserWarning,
                      stacklevel=2)
    u = creation.rand_like(logits).clamp(np.finfo(logits.dtype.np).tiny, 1.0)
    gumbels = -(-u.log()).log()  # -log(Exp(1)): Gumbel(0, 1)
    y_soft = F.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    d = dim % logits.ndim
    index = y_soft.argmax(d, keepdim=True)
    positions = creation.arange(logits.shape[d], device=logits.device).reshape(
        [-1 if i == d else 1 for i in range(logits.ndim)])
    y_hard = (positions == index).to(logits.dtype)
    return y_hard - y_soft.detach() + y_soft


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave the channels of ``(N, C, *)`` from ``groups`` groups (ShuffleNet)."""
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value "
                           f"of groups:{groups}")
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with sizes {fmt_shape(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    rest = tuple(input.shape[2:])
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
             align_corners=None) -> Tensor:
    """``interpolate`` (PyTorch's deprecated name, with its warning)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", UserWarning, stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """``interpolate(mode="nearest")`` (deprecated, with PyTorch's warning)."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", UserWarning, stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """``interpolate(mode="bilinear", align_corners=True)`` (deprecated, with PyTorch's
    warning)."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", UserWarning, stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------------------- modules
class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` dims, with a
    learned scale (ones) when ``elementwise_affine``."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        ns = as_shape((normalized_shape,))
        self.normalized_shape = ns
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            dt = None if dtype is None else dtypes.to_dtype(dtype)
            self.weight = Parameter(creation.ones(*ns, dtype=dt))
        else:
            self.register_parameter("weight", None)
        place(self, device)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Bilinear(Module):
    """``y = x1^T A x2 + b`` with ``A`` of shape (out, in1, in2), initialised
    U(-1/sqrt(in1), 1/sqrt(in1)) as PyTorch's (the bias too)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        dt = None if dtype is None else dtypes.to_dtype(dtype)
        self.weight = Parameter(creation.empty(out_features, in1_features, in2_features,
                                               dtype=dt))
        if bias:
            self.bias = Parameter(creation.empty(out_features, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        place(self, device)

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Unfold(Module):
    """:func:`unfold` as a module."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """:func:`fold` as a module."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                    self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class _Shrink(_Pointwise):
    """A shrink with threshold ``lambd`` (its repr: the number, as PyTorch's)."""

    settings = ("lambd",)

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__(lambd=lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    """:func:`hardshrink` as a module."""

    fn = staticmethod(hardshrink)


class Softshrink(_Shrink):
    """:func:`softshrink` as a module."""

    fn = staticmethod(softshrink)


class Tanhshrink(_Pointwise):
    """``x - tanh(x)``."""

    fn = staticmethod(tanhshrink)


class Softmax2d(Module):
    """Softmax over the channels of ``(N, C, H, W)`` or ``(C, H, W)`` inputs."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D "
                             f"instead")
        return F.softmax(input, -3)


class Dropout3d(Module):
    """Zeroes whole channels of ``(N, C, D, H, W)`` inputs with probability ``p`` in
    training."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return dropout3d(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class ChannelShuffle(Module):
    """:func:`channel_shuffle` as a module."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(mode="nearest")`` of ``(N, C, H, W)`` inputs."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(mode="bilinear", align_corners=True)`` of ``(N, C, H, W)`` inputs."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)

