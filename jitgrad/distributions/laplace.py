"""``Laplace``: the Laplace (double exponential) distribution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Tensor
from . import constraints
from .distribution import Distribution
from .utils import _uniform, finfo

__all__ = ["Laplace"]


class Laplace(Distribution):
    """The Laplace distribution with location ``loc`` and scale ``scale``
    (reparameterized: inverse-CDF of uniform noise).

    >>> import jitgrad
    >>> from jitgrad.distributions import Laplace
    >>> Laplace(0.0, 1.0).variance
    tensor(2.)

    Args:
        loc: the location (mean).
        scale: the scale (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return (2**0.5) * self.scale

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 validate_args: bool | None = None) -> None:
        batch_shape = self._set_broadcast_params(loc=loc, scale=scale)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Laplace:
        return self._expand_params(Laplace, batch_shape, _instance, ("loc", "scale"))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = float(finfo(self.loc.dtype).eps)
        # uniform in [eps - 1, 1), as PyTorch draws it
        u = (_uniform(shape, dtype=self.loc.dtype, device=self.loc.device) * 2 - 1).clamp(
            min=eps - 1)
        return self.loc - self.scale * u.sign() * jitgrad.log1p(-u.abs())

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -jitgrad.log(2 * self.scale) - jitgrad.abs(value - self.loc) / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * jitgrad.expm1(
            -(value - self.loc).abs() / self.scale)

    def icdf(self, value: Tensor) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * term.sign() * jitgrad.log1p(-2 * term.abs())

    def entropy(self) -> Tensor:
        return 1 + jitgrad.log(2 * self.scale)
