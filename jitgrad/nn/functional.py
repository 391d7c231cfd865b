"""``jitgrad.nn.functional``: layers and losses as functions, with PyTorch's signatures.

The primitives are registry ops (``jitgrad.ops.nnops``, ``jitgrad.ops.conv``...); what is
here is composite: dropout, the softmax dim rule, ``relu(inplace=)``.

>>> import jitgrad
>>> import jitgrad.nn.functional as F
>>> logits = jitgrad.tensor([[1000.0, 0.0], [0.0, 1000.0]], requires_grad=True)
>>> loss = F.cross_entropy(logits, jitgrad.tensor([1, 1]))   # stable for large logits
>>> loss
tensor(500., grad_fn=<NllLossBackward0>)
"""

from __future__ import annotations

import math
import warnings

from ..amp.autocast_mode import autocast_op
from ..ops.elementwise import relu as _relu
from ..ops.elementwise import sigmoid, tanh
from ..ops.losses import binary_cross_entropy_with_logits
from ..ops.nnops.activation import gelu
from ..ops.nnops.embedding import embedding
from ..ops.nnops.linear import linear
from ..ops.nnops.losses import (
    binary_cross_entropy,
    huber_loss,
    l1_loss,
    mse_loss,
    smooth_l1_loss,
)
from ..ops.nnops.nll import cross_entropy, nll_loss
from ..ops.nnops.norm import batch_norm, layer_norm
from ..ops.numpy_names import numpy_names
from ..ops.padding import pad
from ..ops.pooling import adaptive_avg_pool2d, avg_pool2d
from ..ops.reduce import log_softmax as _log_softmax
from ..ops.reduce import softmax as _softmax
from ..tensor import Tensor
from .activation_functions import (
    celu,
    elu,
    glu,
    hardsigmoid,
    hardswish,
    hardtanh,
    leaky_relu,
    logsigmoid,
    mish,
    prelu,
    relu6,
    selu,
    silu,
    softplus,
    softsign,
    threshold,
)
from .attention import scaled_dot_product_attention
from .kl_div import kl_div
from .similarity import cosine_similarity as _cosine_similarity
from .similarity import normalize
from .similarity import pairwise_distance as _pairwise_distance

# torch.nn.functional's two bound straight to C there, so they take NumPy's names (axis=,
# keepdims=) as PyTorch's parser does; the Python-defined rest (softmax...) do not
cosine_similarity = numpy_names(_cosine_similarity)
pairwise_distance = numpy_names(_pairwise_distance)

# the losses of .more_losses (loaded on first use: module __getattr__ below)
_MORE_LOSSES = ("margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
                "cosine_embedding_loss", "triplet_margin_loss",
                "triplet_margin_with_distance_loss", "multi_margin_loss",
                "multilabel_margin_loss", "multilabel_soft_margin_loss", "poisson_nll_loss",
                "gaussian_nll_loss", "ctc_loss")
# the functions of .more_layers (loaded on first use too)
_MORE_LAYERS = ("rms_norm", "bilinear", "unfold", "fold", "hardshrink", "softshrink",
                "tanhshrink", "dropout3d", "gumbel_softmax", "channel_shuffle", "upsample",
                "upsample_nearest", "upsample_bilinear")
_OTHER_LAZY = {"conv_transpose1d": "conv_transpose", "adaptive_max_pool2d": "adaptive_max_pool",
               "adaptive_max_pool1d": "adaptive_max_pool", "embedding_bag": "embedding_bag",
               "adaptive_max_pool3d": "adaptive_max_pool",
               "adaptive_max_pool3d_with_indices": "adaptive_max_pool",
               "grid_sample": "grid_sampling", "affine_grid": "grid_sampling",
               "conv3d": "three_dimensional", "max_pool3d": "three_dimensional",
               "conv_transpose3d": "three_dimensional",
               "avg_pool3d": "three_dimensional", "adaptive_avg_pool3d": "three_dimensional",
               **dict.fromkeys(("adaptive_avg_pool1d", "max_unpool1d", "max_unpool2d",
                                "max_unpool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d",
                                "max_pool1d_with_indices", "max_pool2d_with_indices",
                                "max_pool3d_with_indices", "adaptive_max_pool1d_with_indices",
                                "adaptive_max_pool2d_with_indices"), "pooling_extra"),
               "local_response_norm": "local_response_norm", "pdist": "pdist",
               **dict.fromkeys(("rrelu", "rrelu_", "alpha_dropout", "feature_alpha_dropout"),
                               "random_activations"),
               **dict.fromkeys(("relu_", "elu_", "leaky_relu_", "hardtanh_", "selu_", "celu_",
                                "threshold_"), "inplace_activations"),
               "multi_head_attention_forward": "transformer"}

__all__ = ["linear", "relu", "gelu", "sigmoid", "tanh", "softmax", "log_softmax", "dropout",
           "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "layer_norm",
           "batch_norm", "embedding", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "cross_entropy", "nll_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "pad", "scaled_dot_product_attention", "silu",
           "softplus", "mish", "elu", "selu", "celu", "leaky_relu", "prelu", "hardtanh",
           "relu6", "hardsigmoid", "hardswish", "logsigmoid", "softsign", "glu", "threshold",
           "kl_div", "cosine_similarity", "normalize", "pairwise_distance", "one_hot",
           "group_norm", "dropout1d", "dropout2d", "instance_norm", "pixel_shuffle",
           "pixel_unshuffle", "softmin",
           # loaded on first use (module __getattr__ below)
           "conv1d", "max_pool1d", "avg_pool1d", "conv_transpose2d", "interpolate",  # noqa: F822
           *_MORE_LOSSES, *_MORE_LAYERS, *_OTHER_LAZY]

# layers whose modules load on first use (keeps ``import jitgrad`` fast)
_LAZY = {**dict.fromkeys(_MORE_LOSSES, "more_losses"),
         **dict.fromkeys(_MORE_LAYERS, "more_layers"), **_OTHER_LAZY,
         "conv_transpose2d": "conv_transpose", "interpolate": "interpolation",
         "conv1d": "one_dimensional", "max_pool1d": "one_dimensional",
         "avg_pool1d": "one_dimensional",
         # PyTorch's private mask helpers, which custom attention modules call
         "_canonical_mask": "transformer", "_none_or_dtype": "transformer"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(input, 0)`` (in place with ``inplace=True``)."""
    return input.relu_() if inplace else _relu(input)


def _softmax_dim(ndim: int) -> int:
    warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x), dim)``, stable for large inputs."""
    if dim is None:
        dim = _softmax_dim(input.ndim)
    return _softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype=None) -> Tensor:
    """``x - logsumexp(x, dim)``, stable for large inputs."""
    if dim is None:
        dim = _softmax_dim(input.ndim)
    return _log_softmax(input, dim, dtype)


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (as
    PyTorch on the CPU: ``input * mask``, a ``MulBackward0`` node). The mask comes from the
    default generator (``jitgrad.manual_seed``).

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.dropout(jitgrad.ones(4), p=0.5, training=False)
    tensor([1., 1., 1., 1.])
    """
    return _dropout(input, p, training, inplace, input._data.shape)


def _dropout(input: Tensor, p: float, training: bool, inplace: bool, shape: tuple) -> Tensor:
    """``input`` times a mask of ``shape`` (broadcast: whole channels for dropout1d/2d)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    from ..creation import rand, zeros

    dt = input.dtype
    if p == 1.0:
        mask = zeros(*shape, dtype=dt, device=input.device)
    else:
        # a random factory, so a compiled step draws a new mask each call; PyTorch's
        # bernoulli(1 - p) / (1 - p), divided in the input's dtype
        mask = (rand(*shape, dtype=dt, device=input.device) >= p).to(dt) / (1.0 - p)
    return input.mul_(mask) if inplace else input * mask


@autocast_op
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D convolution over ``(N, C, H, W)`` inputs (see ``jitgrad.ops.conv``)."""
    from ..ops.conv import conv2d as _conv2d

    return _conv2d(input, weight, bias, stride, padding, dilation, groups)


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """2-D max pooling over ``(N, C, H, W)`` inputs (see ``jitgrad.ops.conv``)."""
    from ..ops.conv import max_pool2d as _max_pool2d

    return _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot rows of the class indices in ``tensor`` (a new last dim of
    ``num_classes``; -1: the largest index + 1)."""
    from .. import creation, dtypes

    if tensor.dtype is not dtypes.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max().item()) + 1
    if tensor.numel():  # (checks a compiled plan runs at every call: no .item() in a trace)
        from ..trace.effects import run_check

        run_check(tensor, lambda a: bool((a < 0).any()),
                  lambda: RuntimeError("Class values must be non-negative."),
                  "one_hot's class check")
        run_check(tensor, lambda a: bool((a >= num_classes).any()),
                  lambda: RuntimeError("Class values must be smaller than num_classes."),
                  "one_hot's class check")
    classes = creation.arange(num_classes, device=tensor.device)
    # (row-major, as PyTorch's one_hot: a comparison keeps a transposed input's order)
    return (tensor.unsqueeze(-1) == classes).long().contiguous()


@autocast_op
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each sample of ``(N, C, *)`` over ``num_groups`` groups of channels (mean
    and biased variance of each group), then ``* weight + bias`` per channel."""
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    x = input.reshape(n, num_groups, -1)
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, correction=0, keepdim=True)
    out = ((x - mean) / (var + eps).sqrt()).reshape(*input.shape)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out


def _channel_dropout(name: str, input: Tensor, p: float, training: bool, inplace: bool,
                     spatial: int) -> Tensor:
    """Dropout of whole channels: one draw per (sample, channel) of an input with
    ``spatial`` dims after the channel (or an unbatched one)."""
    nd = input.ndim
    if nd not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"{name}: Expected {spatial + 1}D or {spatial + 2}D input, but "
                           f"received a {nd}D input. Note that {name} exists to provide "
                           f"channel-wise dropout on inputs with {spatial} spatial dimension"
                           f"{'s' if spatial > 1 else ''}, a channel dimension, and an "
                           f"optional batch dimension (i.e. {spatial + 1}D or "
                           f"{spatial + 2}D inputs).")
    shape = tuple(input.shape[:nd - spatial]) + (1,) * spatial
    return _dropout(input, p, training, inplace, shape)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, L)`` (or ``(C, L)``) with probability ``p``."""
    return _channel_dropout("dropout1d", input, p, training, inplace, 1)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, H, W)`` (or ``(C, H, W)``) with probability ``p``."""
    return _channel_dropout("dropout2d", input, p, training, inplace, 2)


def _verify_spatial_size(shape) -> None:
    """PyTorch's check that instance statistics have more than one element to average."""
    if math.prod(shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"jitgrad.Size({list(shape)})")


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample of ``(N, C, *)`` over its positions.

    With ``use_input_stats`` (training) the statistics are each instance's own (biased
    variance; ``group_norm`` with one group per channel) and, when given, ``running_mean`` /
    ``running_var`` (``C`` each) are updated in place, outside autograd, as PyTorch does:
    every instance updates its copy with ``momentum`` (mean, unbiased variance) and the
    copies are averaged over the batch. Without it the running statistics normalise, as
    ``batch_norm`` in eval mode. Then ``* weight + bias`` per channel.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> rm, rv = jitgrad.zeros(1), jitgrad.ones(1)
    >>> F.instance_norm(jitgrad.tensor([[[1.0, 3.0]]]), rm, rv)
    tensor([[[-1.0000,  1.0000]]])
    >>> rm, rv
    (tensor([0.2000]), tensor([1.1000]))
    """
    if use_input_stats:
        _verify_spatial_size(tuple(input.shape))
    return _instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                          momentum, eps)


def _instance_norm(input: Tensor, weight, bias, running_mean, running_var,
                   use_input_stats: bool, momentum: float, eps: float) -> Tensor:
    """``torch.instance_norm`` (ATen's: no spatial-size check; see :func:`instance_norm`)."""
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither "
                         "be None")
    n, c = input.shape[0], input.shape[1]
    # PyTorch normalises the input viewed as (1, N*C, *) with every per-channel tensor
    # repeated N times: its messages count N*C elements
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {n * c} elements not {n * t.numel()}")
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if running_mean is not None:
        _update_instance_stats(running_mean, running_var, input, momentum)
    return group_norm(input, c, weight, bias, eps)


def _update_instance_stats(running_mean: Tensor, running_var: Tensor, input: Tensor,
                           momentum: float) -> None:
    """PyTorch's running-statistics update of instance norm, in place and outside autograd
    (a compiled step writes the buffers in place, as batch norm's): each instance's
    statistics (mean, unbiased variance over the positions) update a copy of the running
    ones with ``momentum``; the copies' batch mean is written back."""
    from ..autograd.grad_mode import no_grad

    dims = tuple(range(2, input.ndim))
    with no_grad():
        x = input.detach()
        for run, stat in ((running_mean, x.mean(dims)), (running_var, x.var(dims, correction=1))):
            per_instance = stat.to(run.dtype) * momentum + run * (1.0 - momentum)
            run.copy_(per_instance.mean(0))


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``(*, C r^2, H, W)`` rearranged to ``(*, C, H r, W r)``."""
    r = int(upscale_factor)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``(*, C, H r, W r)`` rearranged to ``(*, C r^2, H, W)`` (undoes ``pixel_shuffle``)."""
    r = int(downscale_factor)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by "
                           f"downscale_factor, but input.size(-2)={h} is not divisible by {r}"
                           if h % r else
                           f"pixel_unshuffle expects width to be divisible by downscale_factor, "
                           f"but input.size(-1)={w} is not divisible by {r}")
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    n = len(lead)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


@autocast_op
def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """``softmax(-input, dim)``."""
    return softmax(-input, dim, _stacklevel + 1, dtype)
