"""``FisherSnedecor``: the F distribution, a ratio of scaled chi-squared variables."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import broadcast_all, finfo

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    """The Fisher-Snedecor (F) distribution with ``df1`` and ``df2`` degrees of freedom:
    ``X1 / X2`` for ``X1 ~ Gamma(df1 / 2, df1)``, ``X2 ~ Gamma(df2 / 2, df2)``
    (reparameterized through Gamma's implicit gradients; sampling is a graph break under
    ``jitgrad.compile``).

    >>> import jitgrad
    >>> from jitgrad.distributions import FisherSnedecor
    >>> FisherSnedecor(jitgrad.tensor([1.0]), jitgrad.tensor([4.0])).mean
    tensor([2.])

    Args:
        df1: the first degrees of freedom (positive).
        df2: the second degrees of freedom (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1: Tensor | float, df2: Tensor | float,
                 validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        if isinstance(df1, numbers.Number) and isinstance(df2, numbers.Number):
            batch_shape = Size()
        else:
            batch_shape = self.df1.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> FisherSnedecor:
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = Size(batch_shape)
        new.df1 = self.df1.expand(batch_shape)
        new.df2 = self.df2.expand(batch_shape)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        super(FisherSnedecor, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        df2 = jitgrad.where(self.df2 <= 2, math.nan, self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self) -> Tensor:
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return jitgrad.where(self.df1 <= 2, math.nan, mode)

    @property
    def variance(self) -> Tensor:
        df2 = jitgrad.where(self.df2 <= 4, math.nan, self.df2)
        return (2 * df2.pow(2) * (self.df1 + df2 - 2)
                / (self.df1 * (df2 - 2).pow(2) * (df2 - 4)))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        # X1 ~ Gamma(df1 / 2, 1 / df1), X2 ~ Gamma(df2 / 2, 1 / df2)
        # Y = df2 * df1 * X1 / (df1 * df2 * X2) = X1 / X2 ~ F(df1, df2)
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = float(finfo(x2.dtype).tiny)
        x2 = x2.clamp(min=tiny)
        return (x1 / x2).clamp(min=tiny)

    def log_prob(self, value: Tensor | float) -> Tensor:
        value = jitgrad.as_tensor(value, dtype=self.df1.dtype, device=self.df1.device)
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = jitgrad.lgamma(ct1 + ct2) - jitgrad.lgamma(ct1) - jitgrad.lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * jitgrad.log(value)
        t3 = (ct1 + ct2) * jitgrad.log1p(ct3 * value)
        return t1 + t2 - t3
