"""``StudentT``: Student's t-distribution with location and scale."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .gamma import Chi2
from .utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    """Student's t-distribution with ``df`` degrees of freedom, location ``loc`` and scale
    ``scale`` (reparameterized: ``loc + scale * X / sqrt(Z / df)`` with ``X`` standard
    normal and ``Z ~ Chi2(df)``, whose draws are made on the host, as Gamma's).

    >>> import jitgrad
    >>> from jitgrad.distributions import StudentT
    >>> StudentT(jitgrad.tensor(3.0)).variance
    tensor(3.)

    Args:
        df: the degrees of freedom (positive).
        loc: the location.
        scale: the scale (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self) -> Tensor:
        return jitgrad.where(self.df <= 1, math.nan, self.loc)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        big = self.df > 2
        df = jitgrad.where(big, self.df, 3.0)  # no NaN gradients from the other branch
        finite = self.scale.pow(2) * df / (df - 2)
        undefined = jitgrad.where(self.df > 1, math.inf, math.nan).to(self.df.dtype)
        return jitgrad.where(big, finite, undefined)

    def __init__(self, df: Tensor | float, loc: Tensor | float = 0.0,
                 scale: Tensor | float = 1.0, validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        batch_shape = self.df.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> StudentT:
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = Size(batch_shape)
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        super(StudentT, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        X = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        Z = self._chi2.rsample(sample_shape)
        Y = X * jitgrad.rsqrt(Z / self.df)
        return self.loc + self.scale * Y

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + jitgrad.lgamma(0.5 * self.df) - jitgrad.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * jitgrad.log1p(y**2.0 / self.df) - Z

    def entropy(self) -> Tensor:
        lbeta = (jitgrad.lgamma(0.5 * self.df) + math.lgamma(0.5)
                 - jitgrad.lgamma(0.5 * (self.df + 1)))
        return (self.scale.log()
                + 0.5 * (self.df + 1) * (jitgrad.digamma(0.5 * (self.df + 1))
                                         - jitgrad.digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)
