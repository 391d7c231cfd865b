"""PyTorch's top-level names for the layers of ``nn.functional``: ``torch.conv2d``,
``torch.dropout``, ``torch.layer_norm``, ``torch.embedding``, ``torch.kl_div``...

Each takes ``torch.X``'s own arguments, which are ATen's and not always ``F.X``'s: the order
differs (``embedding(weight, indices)``, ``batch_norm(input, weight, bias, running_mean,
running_var, ...)``), losses take ``reduction`` as an int (0 none, 1 mean, 2 sum; any other
value leaves the loss unreduced, as ATen) whose default is 0, as PyTorch's Python binding
has it (ATen declares ``at::Reduction::Mean``, which that binding does not parse: so
``torch.kl_div(x, y)`` is unreduced), pools take ``stride=()`` for "the kernel size",
dropouts take ``(input, p, train)`` with no defaults, and ``embedding``'s ``padding_idx``
is -1 for none. Each then calls the one implementation in ``jitgrad.nn.functional`` (its
modules load on first use, so importing this module stays cheap), so values, gradients and
errors are those of the functional form.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..tensor import Tensor

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "avg_pool1d", "max_pool1d", "max_pool2d", "max_pool3d",
    "max_pool1d_with_indices", "adaptive_avg_pool1d", "adaptive_max_pool1d",
    "dropout", "dropout_", "feature_dropout", "feature_dropout_", "alpha_dropout",
    "alpha_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_",
    "embedding", "layer_norm", "group_norm", "instance_norm", "batch_norm", "rms_norm",
    "bilinear", "celu", "celu_", "selu", "selu_", "rrelu", "rrelu_", "prelu", "threshold",
    "threshold_", "hardshrink", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
    "cosine_similarity", "pairwise_distance", "pdist", "kl_div",
    "binary_cross_entropy_with_logits", "ctc_loss", "poisson_nll_loss", "margin_ranking_loss",
    "hinge_embedding_loss", "cosine_embedding_loss", "triplet_margin_loss", "constant_pad_nd",
    "grid_sampler", "affine_grid_generator", "norm_except_dim",
]


def _F():  # noqa: N802 - the usual name of nn.functional
    from ..nn import functional

    return functional


def _reduction(reduction: int) -> str:
    """ATen's reduction enum as ``nn.functional``'s string: 1 mean, 2 sum, anything else
    none (ATen reduces only for those two)."""
    return "mean" if reduction == 1 else "sum" if reduction == 2 else "none"


def _stride(stride):
    """A pool's ``stride``: ATen's empty default is the kernel size (``F``'s None)."""
    if stride is None or (isinstance(stride, Sequence) and len(stride) == 0):
        return None
    return stride


# ------------------------------------------------------------------------ convolutions
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-D convolution over ``(N, C, L)`` (``nn.functional.conv1d``)."""
    return _F().conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D convolution over ``(N, C, H, W)`` (``nn.functional.conv2d``)."""
    return _F().conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """3-D convolution over ``(N, C, D, H, W)`` (``nn.functional.conv3d``)."""
    return _F().conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """1-D transposed convolution (``nn.functional.conv_transpose1d``)."""
    return _F().conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """2-D transposed convolution (``nn.functional.conv_transpose2d``)."""
    return _F().conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """3-D transposed convolution (``nn.functional.conv_transpose3d``)."""
    return _F().conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride, padding, dilation,
                transposed: bool, output_padding, groups: int) -> Tensor:
    """ATen's generic convolution: the 1-, 2- or 3-D (``weight.dim() - 2``) convolution, or
    with ``transposed`` the transposed one, with every argument given."""
    n = weight.dim() - 2
    if n not in (1, 2, 3):
        raise RuntimeError(f"convolution: expected a weight of 3, 4 or 5 dimensions (jitgrad "
                           f"has 1-, 2- and 3-D convolutions), but got {weight.dim()}")
    F = _F()
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1]
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    fn = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    return fn(input, weight, bias, stride, padding, dilation, groups)


# ------------------------------------------------------------------------------- pools
def avg_pool1d(input: Tensor, kernel_size, stride=(), padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """1-D average pooling (``nn.functional.avg_pool1d``; ``stride=()``: the kernel size)."""
    return _F().avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode,
                           count_include_pad)


def max_pool1d(input: Tensor, kernel_size, stride=(), padding=0, dilation=1,
               ceil_mode: bool = False) -> Tensor:
    """1-D max pooling (``nn.functional.max_pool1d``; ``stride=()``: the kernel size)."""
    return _F().max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode: bool = False) -> tuple[Tensor, Tensor]:
    """1-D max pooling and the flat index of each maximum in its row."""
    return _F().max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode,
                           return_indices=True)


def max_pool2d(input: Tensor, kernel_size, stride=(), padding=0, dilation=1,
               ceil_mode: bool = False) -> Tensor:
    """2-D max pooling (``nn.functional.max_pool2d``; ``stride=()``: the kernel size)."""
    return _F().max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input: Tensor, kernel_size, stride=(), padding=0, dilation=1,
               ceil_mode: bool = False) -> Tensor:
    """3-D max pooling (``nn.functional.max_pool3d``; ``stride=()``: the kernel size)."""
    return _F().max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """1-D adaptive average pooling to ``output_size`` positions."""
    return _F().adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input: Tensor, output_size) -> tuple[Tensor, Tensor]:
    """1-D adaptive max pooling: ``(values, indices)``, always both (ATen's form)."""
    return _F().adaptive_max_pool1d(input, output_size, return_indices=True)


# ---------------------------------------------------------------------------- dropouts
def _check_p(p: float) -> None:
    if p < 0 or p > 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` when
    ``train`` (``nn.functional.dropout``)."""
    _check_p(p)
    return _F().dropout(input, p, train)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """:func:`dropout` in place."""
    _check_p(p)
    return _F().dropout(input, p, train, inplace=True)


def _feature_dropout(input: Tensor, p: float, train: bool, inplace: bool) -> Tensor:
    _check_p(p)
    if p == 0 or not train or input.numel() == 0:
        return input
    if input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    return _F()._dropout(input, p, train, inplace, shape)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Dropout of whole channels: one draw per ``(sample, channel)`` of ``(N, C, *)``."""
    return _feature_dropout(input, p, train, False)


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """:func:`feature_dropout` in place."""
    return _feature_dropout(input, p, train, True)


def _alpha(input: Tensor, p: float, train: bool, inplace: bool, feature: bool) -> Tensor:
    from ..nn import random_activations as R

    _check_p(p)
    fn = R.feature_alpha_dropout if feature else R.alpha_dropout
    return fn(input, p, train, inplace)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Alpha dropout, which keeps SELU's mean and variance
    (``nn.functional.alpha_dropout``)."""
    return _alpha(input, p, train, False, False)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """:func:`alpha_dropout` in place."""
    return _alpha(input, p, train, True, False)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Alpha dropout of whole channels (``nn.functional.feature_alpha_dropout``)."""
    return _alpha(input, p, train, False, True)


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """:func:`feature_alpha_dropout` in place."""
    return _alpha(input, p, train, True, True)


# ---------------------------------------------------------------- embedding and norms
def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` at ``indices`` (note the order: ``F.embedding(indices,
    weight)``); the row ``padding_idx`` gets no gradient (a negative one: none, as ATen)."""
    pad = padding_idx if 0 <= padding_idx < weight.shape[0] else None
    return _F().embedding(indices, weight, pad, scale_grad_by_freq=scale_grad_by_freq,
                          sparse=sparse)


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5,
               cudnn_enable: bool = True) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims (``nn.functional.layer_norm``;
    ``cudnn_enable`` is ignored)."""
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5,
               cudnn_enabled: bool = True) -> Tensor:
    """Normalise groups of channels (``nn.functional.group_norm``; ``cudnn_enabled`` is
    ignored)."""
    return _F().group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                  running_mean: Tensor | None, running_var: Tensor | None,
                  use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool) -> Tensor:
    """Normalise each channel of each sample (``nn.functional.instance_norm``, ATen's
    argument order)."""
    return _F()._instance_norm(input, weight, bias, running_mean, running_var,
                               use_input_stats, momentum, eps)


def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
               running_mean: Tensor | None, running_var: Tensor | None, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool) -> Tensor:
    """Batch normalisation (``nn.functional.batch_norm``, ATen's argument order: the affine
    parameters before the running statistics)."""
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training,
                           momentum, eps)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """Root-mean-square normalisation over the trailing dims (``nn.functional.rms_norm``)."""
    return _F().rms_norm(input, normalized_shape, weight, eps)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """``x1^T W x2 + b`` (``nn.functional.bilinear``)."""
    return _F().bilinear(input1, input2, weight, bias)


# ------------------------------------------------------------------------- activations
def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (``nn.functional.celu``)."""
    return _F().celu(input, alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """:func:`celu` in place."""
    return _F().celu(input, alpha, inplace=True)


def selu(input: Tensor) -> Tensor:
    """SELU (``nn.functional.selu``)."""
    return _F().selu(input)


def selu_(input: Tensor) -> Tensor:
    """:func:`selu` in place."""
    return _F().selu(input, inplace=True)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, generator=None) -> Tensor:
    """Randomised leaky ReLU (``nn.functional.rrelu``), the slopes drawn from
    ``generator``."""
    from ..nn.random_activations import rrelu_with_generator

    return rrelu_with_generator(input, lower, upper, training, False, generator)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False, generator=None) -> Tensor:
    """:func:`rrelu` in place."""
    from ..nn.random_activations import rrelu_with_generator

    return rrelu_with_generator(input, lower, upper, training, True, generator)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """Leaky ReLU with learned slopes (``nn.functional.prelu``)."""
    return _F().prelu(input, weight)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """``x`` where ``x > threshold``, else ``value`` (``nn.functional.threshold``)."""
    return _F().threshold(input, threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """:func:`threshold` in place."""
    return _F().threshold(input, threshold, value, inplace=True)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """0 on ``[-lambd, lambd]``, ``x`` elsewhere (``nn.functional.hardshrink``)."""
    return _F().hardshrink(input, lambd)


# -------------------------------------------------------------------------- rearranges
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``(*, C r^2, H, W)`` to ``(*, C, H r, W r)`` (``nn.functional.pixel_shuffle``)."""
    return _F().pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``(*, C, H r, W r)`` to ``(*, C r^2, H, W)`` (``nn.functional.pixel_unshuffle``)."""
    return _F().pixel_unshuffle(input, downscale_factor)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave the channels of ``groups`` groups (``nn.functional.channel_shuffle``)."""
    return _F().channel_shuffle(input, groups)


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: float = 0) -> Tensor:
    """Pad with ``value`` (``nn.functional.pad`` in ``"constant"`` mode; negative pads
    crop)."""
    return _F().pad(input, pad, "constant", value)


# ------------------------------------------------------------------------- distances
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim``."""
    return _F().cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The p-norm of ``x1 - x2 + eps`` along the last dim."""
    return _F().pairwise_distance(x1, x2, p, eps, keepdim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm distance between every pair of rows of ``input`` (upper triangle)."""
    return _F().pdist(input, p)


# ------------------------------------------------------------------------------ losses
def kl_div(input: Tensor, target: Tensor, reduction: int = 0, *,
           log_target: bool = False) -> Tensor:
    """The Kullback-Leibler divergence loss (``nn.functional.kl_div``; ``reduction`` 1 is
    the mean over every element, without the functional form's warning; unreduced by
    default, as PyTorch's)."""
    loss = _F().kl_div(input, target, reduction="none", log_target=log_target)
    how = _reduction(reduction)
    return loss.mean() if how == "mean" else loss.sum() if how == "sum" else loss


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None,
                                     reduction: int = 0) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)`` (stable for large logits)."""
    return _F().binary_cross_entropy_with_logits(input, target, weight,
                                                 reduction=_reduction(reduction),
                                                 pos_weight=pos_weight)


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths,
             blank: int = 0, reduction: int = 0, zero_infinity: bool = False) -> Tensor:
    """The connectionist temporal classification loss (``nn.functional.ctc_loss``)."""
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                         _reduction(reduction), zero_infinity)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction: int) -> Tensor:
    """The Poisson negative log likelihood loss (``nn.functional.poisson_nll_loss``)."""
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction(reduction))


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = 0) -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``."""
    return _F().margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction(reduction))


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         reduction: int = 0) -> Tensor:
    """``x`` where ``target`` is 1, ``max(0, margin - x)`` where it is -1."""
    return _F().hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor,
                          margin: float = 0.0, reduction: int = 0) -> Tensor:
    """``1 - cos(x1, x2)`` where ``target`` is 1, ``max(0, cos(x1, x2) - margin)`` where
    it is -1."""
    return _F().cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction(reduction))


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                        swap: bool = False, reduction: int = 0) -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with the p-norm pairwise distance ``d``."""
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction(reduction))


# ------------------------------------------------------------------------------- grids
_INTERPOLATION = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def grid_sampler(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                 align_corners: bool) -> Tensor:
    """``nn.functional.grid_sample`` with ATen's integer modes: interpolation 0 bilinear,
    1 nearest, 2 bicubic; padding 0 zeros, 1 border, 2 reflection."""
    if not 0 <= interpolation_mode < 3:
        raise RuntimeError(f"grid_sampler(): expected interpolation_mode to be 0, 1 or 2, "
                           f"but got: {interpolation_mode}")
    if not 0 <= padding_mode < 3:
        raise RuntimeError(f"grid_sampler(): expected padding_mode to be 0, 1 or 2, but got: "
                           f"{padding_mode}")
    return _F().grid_sample(input, grid, _INTERPOLATION[interpolation_mode],
                            _PADDING[padding_mode], align_corners)


def affine_grid_generator(theta: Tensor, size: Sequence[int], align_corners: bool) -> Tensor:
    """The sampling grid of the affine maps ``theta`` (``nn.functional.affine_grid``)."""
    return _F().affine_grid(theta, size, align_corners)


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:  # noqa: A002
    """The ``pow``-norm of ``v`` over every dim but ``dim`` (kept; the others size 1);
    ``dim=-1``: of the whole tensor (``weight_norm``'s norm)."""
    from ..nn.utils.weight_norm_hook import norm_except_dim as norm

    return norm(v, pow, dim)
