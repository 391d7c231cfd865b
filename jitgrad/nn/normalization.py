"""Normalisation modules: ``LayerNorm``, ``GroupNorm``, ``BatchNorm1d`` / ``2d`` / ``3d`` and
``InstanceNorm1d`` / ``2d`` / ``3d`` (running statistics, where tracked, updated in training
mode and used in eval mode)."""

from __future__ import annotations

import warnings

from .. import creation, dtypes
from ..shapes import as_shape
from ..tensor import Tensor
from . import functional as F
from . import init
from .layers import place
from .module import Module
from .parameter import Parameter

__all__ = ["LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


def _dt(dtype):
    return None if dtype is None else dtypes.to_dtype(dtype)


def _affine(module: Module, shape: tuple, weight: bool, bias: bool, dtype) -> None:
    """Give ``module`` a ``weight`` of ones and a ``bias`` of zeros of ``shape`` (a None
    parameter where not wanted, as PyTorch registers it)."""
    if weight:
        module.weight = Parameter(creation.ones(*shape, dtype=_dt(dtype), device="cpu"))
    else:
        module.register_parameter("weight", None)
    if bias:
        module.bias = Parameter(creation.zeros(*shape, dtype=_dt(dtype), device="cpu"))
    else:
        module.register_parameter("bias", None)


class _Affine(Module):
    """A normalisation's affine parameters, reset to ones and zeros."""

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)


class LayerNorm(_Affine):
    """Normalise over the trailing ``normalized_shape`` dims; affine weight (ones) and bias
    (zeros) when ``elementwise_affine``."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        ns = as_shape((normalized_shape,))
        self.normalized_shape = ns
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine(self, ns, elementwise_affine, elementwise_affine and bias, dtype)
        place(self, device)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class _NormBase(_Affine):
    """What batch and instance norm share (PyTorch's ``_NormBase``): the running statistics
    buffers ``running_mean`` (zeros), ``running_var`` (ones) and ``num_batches_tracked`` (an
    int64 0) when ``track_running_stats`` (None buffers otherwise), and their reset.
    Subclasses (PyTorch's ``_BatchNorm`` and ``_InstanceNorm``, and user classes) define
    ``_check_input_dim`` and ``forward``."""

    _version = 2  # (state dicts' metadata: PyTorch's, since num_batches_tracked)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine(self, (num_features,), affine, affine and bias, dtype)
        self._register_running_stats(num_features, track_running_stats, dtype)
        place(self, device)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _register_running_stats(self, num_features: int, track: bool, dtype) -> None:
        if track:
            dt = _dt(dtype)
            self.register_buffer("running_mean",
                                 creation.zeros(num_features, dtype=dt, device="cpu"))
            self.register_buffer("running_var",
                                 creation.ones(num_features, dtype=dt, device="cpu"))
            self.register_buffer("num_batches_tracked", creation.tensor(0, device="cpu"))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches tracked."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Reset the running statistics and the affine parameters (ones and zeros)."""
        self.reset_running_stats()
        super().reset_parameters()

    def _upgrade_state_dict(self, state_dict: dict, prefix: str) -> None:
        """A state dict without ``num_batches_tracked`` loads with the current count (as
        PyTorch loads pre-1.0 checkpoints)."""
        key = prefix + "num_batches_tracked"
        if self.track_running_stats and key not in state_dict:
            state_dict[key] = self.num_batches_tracked


class _BatchNorm(_NormBase):
    """Batch normalisation over the channel dim ``1`` (PyTorch's ``_BatchNorm``, the base of
    ``BatchNorm1d/2d/3d``, ``SyncBatchNorm`` and the lazy ones; subclasses give
    ``_check_input_dim``).

    In training mode it normalises with the batch statistics and updates ``running_mean`` /
    ``running_var`` (unbiased variance) with ``momentum`` (``None``: cumulative average); in
    eval mode it uses the running statistics."""

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average: 1 / batches seen, as a
                # 0-d float64 tensor (the bits of Python's 1.0 / n; no .item(): compiles)
                momentum = 1.0 / self.num_batches_tracked.double()
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch, momentum, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(N, C)`` or ``(N, C, L)`` inputs per channel ``C`` (see
    :class:`_BatchNorm` for the running statistics).

    >>> import jitgrad
    >>> bn = jitgrad.nn.BatchNorm1d(2)
    >>> _ = bn(jitgrad.tensor([[1.0, 2.0], [3.0, 6.0]]))
    >>> bn.running_mean
    tensor([0.2000, 0.4000])
    """

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(N, C, H, W)`` inputs per channel ``C`` (see
    :class:`_BatchNorm` for the running statistics)."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of ``(N, C, D, H, W)`` inputs per channel ``C``."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim != 5:
            raise ValueError(f"expected 5D input (got {input.ndim}D input)")


class GroupNorm(_Affine):
    """Normalise each sample over groups of ``num_channels // num_groups`` channels (and all
    their positions), then scale and shift per channel (``affine``: ones and zeros; no
    shift without ``bias``)."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        _affine(self, (num_channels,), affine, affine and bias, dtype)
        place(self, device)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class _InstanceNorm(_NormBase):
    """Normalise each channel of each sample over its positions; ``affine``: a weight (ones)
    and bias (zeros) per channel.

    With ``track_running_stats`` it keeps ``running_mean`` / ``running_var`` as PyTorch does:
    training mode normalises with each instance's statistics and updates the buffers with
    their batch average (``momentum``; ``None`` counts as 0, so nothing moves and
    ``num_batches_tracked`` stays 0, as in PyTorch); eval mode normalises with the buffers.
    """

    spatial = 1

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _check_input_dim(self, input: Tensor) -> None:
        nd = self.spatial + 2
        if input.ndim not in (nd - 1, nd):
            raise ValueError(f"expected {nd - 1}D or {nd}D input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        feature_dim = input.ndim - (self.spatial + 1)
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You "
                          f"can silence this warning by not passing in num_features, which is "
                          f"not used because affine=False", stacklevel=2)
        unbatched = feature_dim == 0
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of ``(N, C, L)`` (or ``(C, L)``) inputs."""

    spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of ``(N, C, H, W)`` (or ``(C, H, W)``) inputs."""

    spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of ``(N, C, D, H, W)`` (or ``(C, D, H, W)``) inputs."""

    spatial = 3
