"""``InverseGamma``: the reciprocal of a Gamma variable."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Tensor
from . import constraints
from ._transforms_elementwise import PowerTransform
from .gamma import Gamma
from .transformed_distribution import TransformedDistribution

__all__ = ["InverseGamma"]


class InverseGamma(TransformedDistribution):
    """``Y = 1 / X`` for ``X ~ Gamma(concentration, rate)`` (reparameterized through
    Gamma's implicit gradients; sampling is a graph break under ``jitgrad.compile``).

    >>> import jitgrad
    >>> from jitgrad.distributions import InverseGamma
    >>> InverseGamma(jitgrad.tensor([2.0]), jitgrad.tensor([3.0])).mean
    tensor([3.])

    Args:
        concentration: the shape ``alpha`` (positive).
        rate: the rate of the Gamma variable, ``1 / scale`` (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True
    base_dist: Gamma

    def __init__(self, concentration: Tensor | float, rate: Tensor | float,
                 validate_args: bool | None = None) -> None:
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -jitgrad.ones((), dtype=base_dist.rate.dtype, device=base_dist.rate.device)
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> InverseGamma:
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self) -> Tensor:
        return self.base_dist.concentration

    @property
    def rate(self) -> Tensor:
        return self.base_dist.rate

    @property
    def mean(self) -> Tensor:
        result = self.rate / (self.concentration - 1)
        return jitgrad.where(self.concentration > 1, result, math.inf)

    @property
    def mode(self) -> Tensor:
        return self.rate / (self.concentration + 1)

    @property
    def variance(self) -> Tensor:
        result = self.rate.square() / ((self.concentration - 1).square()
                                       * (self.concentration - 2))
        return jitgrad.where(self.concentration > 2, result, math.inf)

    def entropy(self) -> Tensor:
        return (self.concentration + self.rate.log() + jitgrad.lgamma(self.concentration)
                - (1 + self.concentration) * jitgrad.digamma(self.concentration))
