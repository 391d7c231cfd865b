"""``LogNormal``: ``exp`` of a normal variable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tensor import Tensor
from . import constraints
from ._transforms_elementwise import ExpTransform
from .normal import Normal
from .transformed_distribution import TransformedDistribution

__all__ = ["LogNormal"]


class LogNormal(TransformedDistribution):
    """``Y = exp(X)`` for ``X ~ Normal(loc, scale)`` (reparameterized).

    >>> import jitgrad
    >>> from jitgrad.distributions import LogNormal
    >>> LogNormal(0.0, 1.0).log_prob(jitgrad.tensor(1.0))
    tensor(-0.9189)

    Args:
        loc: the mean of ``log(Y)``.
        scale: the standard deviation of ``log(Y)`` (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True
    base_dist: Normal

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 validate_args: bool | None = None) -> None:
        base_dist = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> LogNormal:
        new = self._get_checked_instance(LogNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self) -> Tensor:
        """The mean of ``log(Y)``."""
        return self.base_dist.loc

    @property
    def scale(self) -> Tensor:
        """The standard deviation of ``log(Y)``."""
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self) -> Tensor:
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self) -> Tensor:
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc
