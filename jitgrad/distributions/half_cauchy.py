"""``HalfCauchy``: the absolute value of a centred Cauchy variable."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Tensor
from ._folded import FoldedAtZero
from .cauchy import Cauchy

__all__ = ["HalfCauchy"]


class HalfCauchy(FoldedAtZero):
    """``Y = |X|`` for ``X ~ Cauchy(0, scale)`` (reparameterized).

    >>> import jitgrad
    >>> from jitgrad.distributions import HalfCauchy
    >>> HalfCauchy(1.0).cdf(jitgrad.tensor(1.0))
    tensor(0.5000)

    Args:
        scale: the scale of the full Cauchy distribution (positive).
        validate_args: whether to validate the arguments.
    """

    base = Cauchy
    base_dist: Cauchy

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> HalfCauchy:
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        return jitgrad.full(self._extended_shape(), math.inf, dtype=self.scale.dtype,
                            device=self.scale.device)

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def _value(self, value: Tensor) -> Tensor:
        return jitgrad.as_tensor(value, dtype=self.base_dist.scale.dtype,
                                 device=self.base_dist.scale.device)
