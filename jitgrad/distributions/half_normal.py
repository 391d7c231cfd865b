"""``HalfNormal``: the absolute value of a centred normal variable."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..tensor import Tensor
from ._folded import FoldedAtZero
from .normal import Normal

__all__ = ["HalfNormal"]


class HalfNormal(FoldedAtZero):
    """``Y = |X|`` for ``X ~ Normal(0, scale)`` (reparameterized).

    >>> import jitgrad
    >>> from jitgrad.distributions import HalfNormal
    >>> HalfNormal(1.0).cdf(jitgrad.tensor(0.0))
    tensor(0.)

    Args:
        scale: the scale of the full normal distribution (positive).
        validate_args: whether to validate the arguments.
    """

    base = Normal
    base_dist: Normal

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> HalfNormal:
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)
