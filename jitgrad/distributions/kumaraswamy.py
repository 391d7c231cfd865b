"""``Kumaraswamy``: a Beta-like distribution on the unit interval with a closed-form
CDF."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Tensor
from . import constraints
from ._transforms_elementwise import AffineTransform, PowerTransform
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import broadcast_all, euler_constant

__all__ = ["Kumaraswamy"]


def _moments(a: Tensor, b: Tensor, n: int) -> Tensor:
    """The ``n``-th moment ``b B(1 + n / a, b)``."""
    arg1 = 1 + n / a
    log_value = jitgrad.lgamma(arg1) + jitgrad.lgamma(b) - jitgrad.lgamma(arg1 + b)
    return b * jitgrad.exp(log_value)


class Kumaraswamy(TransformedDistribution):
    """The Kumaraswamy distribution with concentrations ``a = concentration1`` and
    ``b = concentration0``: ``(1 - U ** (1 / b)) ** (1 / a)`` for ``U ~ Uniform(0, 1)``
    (reparameterized).

    >>> import jitgrad
    >>> from jitgrad.distributions import Kumaraswamy
    >>> Kumaraswamy(jitgrad.tensor([1.0]), jitgrad.tensor([1.0])).mean
    tensor([0.5000])

    Args:
        concentration1: the first concentration, ``a`` (positive).
        concentration0: the second concentration, ``b`` (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Tensor | float, concentration0: Tensor | float,
                 validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1,
                                                                 concentration0)
        base_dist = Uniform(jitgrad.zeros_like(self.concentration0),
                            jitgrad.ones_like(self.concentration0),
                            validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Kumaraswamy:
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        # in log space for numerical stability; NaN where either concentration is < 1
        log_mode = (self.concentration0.reciprocal() * jitgrad.log1p(-self.concentration0)
                    - jitgrad.log1p(-self.concentration0 * self.concentration1))
        log_mode = jitgrad.where((self.concentration0 < 1) | (self.concentration1 < 1),
                                 math.nan, log_mode)
        return log_mode.exp()

    @property
    def variance(self) -> Tensor:
        return (_moments(self.concentration1, self.concentration0, 2)
                - jitgrad.pow(self.mean, 2))

    def entropy(self) -> Tensor:
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = jitgrad.digamma(self.concentration0 + 1) + euler_constant
        return (t0 + t1 * h0 - jitgrad.log(self.concentration1)
                - jitgrad.log(self.concentration0))
