"""``HalfCauchy``: the absolute value of a centred Cauchy variable."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Tensor
from . import constraints
from ._transforms_elementwise import AbsTransform
from .cauchy import Cauchy
from .transformed_distribution import TransformedDistribution

__all__ = ["HalfCauchy"]


class HalfCauchy(TransformedDistribution):
    """``Y = |X|`` for ``X ~ Cauchy(0, scale)`` (reparameterized).

    >>> import jitgrad
    >>> from jitgrad.distributions import HalfCauchy
    >>> HalfCauchy(1.0).cdf(jitgrad.tensor(1.0))
    tensor(0.5000)

    Args:
        scale: the scale of the full Cauchy distribution (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    base_dist: Cauchy

    def __init__(self, scale: Tensor | float, validate_args: bool | None = None) -> None:
        base_dist = Cauchy(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> HalfCauchy:
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def scale(self) -> Tensor:
        """The scale of the full Cauchy distribution."""
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return jitgrad.full(self._extended_shape(), math.inf, dtype=self.scale.dtype,
                            device=self.scale.device)

    @property
    def mode(self) -> Tensor:
        return jitgrad.zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = jitgrad.as_tensor(value, dtype=self.base_dist.scale.dtype,
                                  device=self.base_dist.scale.device)
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
