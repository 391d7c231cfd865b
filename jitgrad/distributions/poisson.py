"""``Poisson``: counts with mean ``rate``."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """The Poisson distribution ``P(k) = rate**k exp(-rate) / k!``. Samples (float, in
    ``rate``'s dtype) come from NumPy's Poisson sampler on jitgrad's generator; they depend
    on the rate's values, so under ``jitgrad.compile`` sampling is a graph break.

    >>> import jitgrad
    >>> from jitgrad.distributions import Poisson
    >>> Poisson(jitgrad.tensor([4.0])).log_prob(jitgrad.tensor([2.0]))
    tensor([-1.9206])

    Args:
        rate: the rate (nonnegative).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    def __init__(self, rate: Tensor | float, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        batch_shape = Size() if isinstance(rate, numbers.Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Poisson:
        return self._expand_params(Poisson, batch_shape, _instance, ("rate",))

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with jitgrad.no_grad():
            return jitgrad.poisson(self.rate.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (jitgrad.log(self.rate),)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return jitgrad.exp(x)
