"""``Cauchy``: the Cauchy (Lorentz) distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Tensor
from . import constraints
from .distribution import Distribution
from .utils import _standard_normal

__all__ = ["Cauchy"]


class Cauchy(Distribution):
    """The Cauchy distribution with median ``loc`` and half width at half maximum
    ``scale`` (reparameterized: ``rsample() = loc + eps * scale`` with standard Cauchy
    noise ``eps``, the ratio of two standard normals from jitgrad's generator).

    >>> import jitgrad
    >>> from jitgrad.distributions import Cauchy
    >>> Cauchy(0.0, 1.0).cdf(jitgrad.tensor(1.0))
    tensor(0.7500)

    Args:
        loc: the mode / median.
        scale: the half width at half maximum (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 validate_args: bool | None = None) -> None:
        batch_shape = self._set_broadcast_params(loc=loc, scale=scale)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Cauchy:
        return self._expand_params(Cauchy, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self) -> Tensor:
        return jitgrad.full(self._extended_shape(), math.nan, dtype=self.loc.dtype,
                            device=self.loc.device)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return jitgrad.full(self._extended_shape(), math.inf, dtype=self.loc.dtype,
                            device=self.loc.device)

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        num = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        den = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (num / den) * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (-math.log(math.pi) - self.scale.log()
                - (((value - self.loc) / self.scale) ** 2).log1p())

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return jitgrad.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value: Tensor) -> Tensor:
        return jitgrad.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()
