"""``Weibull``: the two-parameter Weibull distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from ._transforms_elementwise import AffineTransform, PowerTransform
from .exponential import Exponential
from .transformed_distribution import TransformedDistribution
from .utils import broadcast_all, euler_constant

__all__ = ["Weibull"]


class Weibull(TransformedDistribution):
    """The Weibull distribution with scale ``lambda = scale`` and shape
    ``k = concentration``: ``scale * E ** (1 / concentration)`` for ``E ~ Exponential(1)``
    (reparameterized).

    >>> import jitgrad
    >>> from jitgrad.distributions import Weibull
    >>> Weibull(1.0, 1.0).mean
    tensor(1.)

    Args:
        scale: the scale ``lambda`` (positive).
        concentration: the shape ``k`` (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale: Tensor | float, concentration: Tensor | float,
                 validate_args: bool | None = None) -> None:
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(jitgrad.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal),
                      AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Weibull:
        new = self._get_checked_instance(Weibull, _instance)
        batch_shape = Size(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        base_dist = self.base_dist.expand(batch_shape)
        transforms = [PowerTransform(exponent=new.concentration_reciprocal),
                      AffineTransform(loc=0, scale=new.scale)]
        super(Weibull, new).__init__(base_dist, transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.scale * jitgrad.exp(jitgrad.lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self) -> Tensor:
        return (self.scale * ((self.concentration - 1) / self.concentration)
                ** self.concentration.reciprocal())

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (
            jitgrad.exp(jitgrad.lgamma(1 + 2 * self.concentration_reciprocal))
            - jitgrad.exp(2 * jitgrad.lgamma(1 + self.concentration_reciprocal)))

    def entropy(self) -> Tensor:
        return (euler_constant * (1 - self.concentration_reciprocal)
                + jitgrad.log(self.scale * self.concentration_reciprocal) + 1)
