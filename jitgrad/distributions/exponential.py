"""``Exponential``: the exponential distribution with rate ``rate``."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _uniform, broadcast_all

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    """The exponential distribution ``p(x) = rate * exp(-rate * x)`` on ``x >= 0``
    (reparameterized: ``rsample() = -log1p(-u) / rate`` for uniform ``u``).

    >>> import jitgrad
    >>> from jitgrad.distributions import Exponential
    >>> Exponential(jitgrad.tensor([2.0])).mean
    tensor([0.5000])

    Args:
        rate: the rate (positive; ``1 / scale``).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return jitgrad.zeros_like(self.rate)

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def __init__(self, rate: Tensor | float, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        batch_shape = Size() if isinstance(rate, numbers.Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Exponential:
        return self._expand_params(Exponential, batch_shape, _instance, ("rate",))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, dtype=self.rate.dtype, device=self.rate.device)
        return -jitgrad.log1p(-u) / self.rate  # standard exponential noise over rate

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 1 - jitgrad.exp(-self.rate * value)

    def icdf(self, value: Tensor) -> Tensor:
        return -jitgrad.log1p(-value) / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - jitgrad.log(self.rate)

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (-self.rate,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return -jitgrad.log(-x)
