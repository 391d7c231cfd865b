"""``LogisticNormal``: a normal vector mapped onto the simplex by stick breaking."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tensor import Tensor
from . import constraints
from ._transforms_structured import StickBreakingTransform
from .normal import Normal
from .transformed_distribution import TransformedDistribution

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """``StickBreakingTransform()(X)`` for ``X ~ Normal(loc, scale)`` over the last
    dimension: samples on the simplex of one more dimension (reparameterized).

    >>> import jitgrad
    >>> from jitgrad.distributions import LogisticNormal
    >>> LogisticNormal(jitgrad.zeros(3), jitgrad.ones(3)).sample().shape
    jitgrad.Size([4])

    Args:
        loc: the mean of the base normal distribution.
        scale: its standard deviation (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 validate_args: bool | None = None) -> None:
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])
        super().__init__(base_dist, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> LogisticNormal:
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self) -> Tensor:
        """The mean of the base normal distribution."""
        return self.base_dist.base_dist.loc

    @property
    def scale(self) -> Tensor:
        """The standard deviation of the base normal distribution."""
        return self.base_dist.base_dist.scale
