"""``|X|`` for ``X`` centred at 0 with a ``scale`` (HalfNormal, HalfCauchy): what the folded
distributions share -- PyTorch's two classes, written once."""

from __future__ import annotations

import math

import jitgrad

from ..tensor import Tensor
from . import constraints
from ._transforms_elementwise import AbsTransform
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution

__all__ = ["FoldedAtZero"]


class FoldedAtZero(TransformedDistribution):
    """``Y = |X|`` for ``X ~ base(0, scale)`` (reparameterized); a subclass names ``base``
    (a location-scale family symmetric about its location) and its moments, and keeps
    ``expand`` (PyTorch's check that a subclass with its own ``__init__`` has its own)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    base: type[Distribution]

    def __init__(self, scale: Tensor | float, validate_args: bool | None = None) -> None:
        base_dist = self.base(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    @property
    def scale(self) -> Tensor:
        """The scale of the unfolded distribution."""
        return self.base_dist.scale

    @property
    def mode(self) -> Tensor:
        return jitgrad.zeros_like(self.scale)

    def _value(self, value: Tensor) -> Tensor:
        """``value`` as ``log_prob`` takes it (HalfCauchy: as a tensor of the scale's type)."""
        return value

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = self._value(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return jitgrad.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob: Tensor) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)
