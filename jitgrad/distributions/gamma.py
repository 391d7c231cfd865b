"""``Gamma`` (shape ``concentration``, inverse scale ``rate``) and ``Chi2``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Tensor
from . import constraints
from ._gamma_helpers import gammainc, standard_gamma
from .exp_family import ExponentialFamily
from .utils import finfo

__all__ = ["Gamma", "Chi2"]


class Gamma(ExponentialFamily):
    """The Gamma distribution ``p(x) = rate**c x**(c-1) exp(-rate x) / Gamma(c)`` with
    ``c = concentration``. ``rsample`` is differentiable in both parameters (implicit
    reparameterization in the concentration, as PyTorch); its draws depend on the
    parameters' values, so under ``jitgrad.compile`` sampling is a graph break.

    >>> import jitgrad
    >>> from jitgrad.distributions import Gamma
    >>> Gamma(jitgrad.tensor([2.0]), jitgrad.tensor([4.0])).mean
    tensor([0.5000])

    Args:
        concentration: the shape ``alpha`` (positive).
        rate: the inverse scale ``beta`` (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def __init__(self, concentration: Tensor | float, rate: Tensor | float,
                 validate_args: bool | None = None) -> None:
        batch_shape = self._set_broadcast_params(concentration=concentration, rate=rate)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Gamma:
        return self._expand_params(Gamma, batch_shape, _instance, ("concentration", "rate"))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        # at least the dtype's smallest normal number, not recorded by autograd
        tiny = float(finfo(value.dtype).tiny)
        return value + (value.detach().clamp(min=tiny) - value.detach())

    def log_prob(self, value: Tensor | float) -> Tensor:
        value = jitgrad.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (jitgrad.xlogy(self.concentration, self.rate)
                + jitgrad.xlogy(self.concentration - 1, value)
                - self.rate * value - jitgrad.lgamma(self.concentration))

    def entropy(self) -> Tensor:
        return (self.concentration - jitgrad.log(self.rate) + jitgrad.lgamma(self.concentration)
                + (1.0 - self.concentration) * jitgrad.digamma(self.concentration))

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return jitgrad.lgamma(x + 1) + (x + 1) * jitgrad.log(-y.reciprocal())


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom:
    ``Gamma(concentration=0.5 * df, rate=0.5)``.

    >>> import jitgrad
    >>> from jitgrad.distributions import Chi2
    >>> Chi2(jitgrad.tensor([3.0])).variance
    tensor([6.])

    Args:
        df: the degrees of freedom (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Tensor | float, validate_args: bool | None = None) -> None:
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Chi2:
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self) -> Tensor:
        return self.concentration * 2
