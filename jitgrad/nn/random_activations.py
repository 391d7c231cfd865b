"""Activations and dropouts with random draws from jitgrad's generator (``manual_seed``):
``rrelu`` / ``RReLU`` (a random negative slope per element in training, the mean slope in
eval), ``alpha_dropout`` / ``AlphaDropout`` and ``feature_alpha_dropout`` /
``FeatureAlphaDropout`` (dropout that keeps SELU's zero mean and unit variance: dropped
values set to SELU's negative saturation, then an affine correction), as PyTorch's formulas
(the random streams differ from PyTorch's)."""

from __future__ import annotations

import math

from ..tensor import Tensor
from .module import Module

__all__ = ["rrelu", "rrelu_", "alpha_dropout", "feature_alpha_dropout", "RReLU",
           "AlphaDropout", "FeatureAlphaDropout"]

_SELU_NEG = 1.7580993408473766  # SELU's -lim(x -> -inf) = scale * alpha


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``a * x``: ``a ~ U(lower, upper)`` per element in
    training, ``(lower + upper) / 2`` otherwise (the gradient is the slope used)."""
    return rrelu_with_generator(input, lower, upper, training, inplace, None)


def rrelu_with_generator(input: Tensor, lower: float, upper: float, training: bool,
                         inplace: bool, generator) -> Tensor:
    """:func:`rrelu` drawing its slopes from ``generator`` (the default one when None):
    ``jitgrad.rrelu`` takes one, as ``torch.rrelu``."""
    from .. import creation
    from ..ops.selection import where
    from .activation_functions import leaky_relu

    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    slope = creation.rand(*input.shape, dtype=input.dtype, device=input.device,
                          generator=generator)
    slope = slope * (upper - lower) + lower
    noise = where(input <= 0, slope, 1.0)
    out = input * noise
    return input.copy_(out) if inplace else out


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False) -> Tensor:
    """:func:`rrelu` in place."""
    return rrelu(input, lower, upper, training, True)


def _alpha_dropout(input: Tensor, p: float, training: bool, inplace: bool,
                   feature: bool) -> Tensor:
    from .. import creation

    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not training or input.numel() == 0:
        return input
    if feature and input.ndim < 2:  # (checked when drawing, as PyTorch's)
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(input.shape)
    if feature:
        shape = shape[:2] + (1,) * (len(shape) - 2)
    if p == 1:
        zeros = creation.zeros(*shape, dtype=input.dtype, device=input.device)
        return input.mul_(zeros) if inplace else input * zeros
    keep = (creation.rand(*shape, dtype=input.dtype, device=input.device) >= p).to(input.dtype)
    a = 1.0 / math.sqrt((_SELU_NEG * _SELU_NEG * p + 1) * (1 - p))
    b = (keep - 1.0) * (_SELU_NEG * a) + _SELU_NEG * a * p
    scaled = keep * a
    if inplace:
        return input.mul_(scaled).add_(b)
    return input * scaled + b


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Alpha dropout (for SELU networks): each element dropped with probability ``p`` to
    SELU's saturation value, then ``a * x + b`` restores the mean and variance."""
    return _alpha_dropout(input, p, training, inplace, False)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """:func:`alpha_dropout` of whole channels (one draw per sample and channel)."""
    return _alpha_dropout(input, p, training, inplace, True)


class RReLU(Module):
    """:func:`rrelu` as a module (random slopes in training mode)."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:
        return rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                            else "")


class _AlphaDropoutBase(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class AlphaDropout(_AlphaDropoutBase):
    """:func:`alpha_dropout` as a module (active in training mode)."""

    def forward(self, input: Tensor) -> Tensor:
        return alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_AlphaDropoutBase):
    """:func:`feature_alpha_dropout` as a module (active in training mode)."""

    def forward(self, input: Tensor) -> Tensor:
        return feature_alpha_dropout(input, self.p, self.training, self.inplace)
