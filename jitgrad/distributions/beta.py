"""``Beta``: a distribution on the unit interval (a two-component Dirichlet)."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from .dirichlet import Dirichlet
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Beta"]


class Beta(ExponentialFamily):
    """The Beta distribution with concentrations ``concentration1`` (alpha) and
    ``concentration0`` (beta). ``rsample`` is differentiable (implicit
    reparameterization, as PyTorch); under ``jitgrad.compile`` sampling is a graph break.

    >>> import jitgrad
    >>> from jitgrad.distributions import Beta
    >>> Beta(jitgrad.tensor([1.0]), jitgrad.tensor([3.0])).mean
    tensor([0.2500])

    Args:
        concentration1: the first concentration, alpha (positive).
        concentration0: the second concentration, beta (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Tensor | float, concentration0: Tensor | float,
                 validate_args: bool | None = None) -> None:
        if isinstance(concentration1, numbers.Number) and isinstance(concentration0,
                                                                     numbers.Number):
            concentration1_concentration0 = jitgrad.tensor([float(concentration1),
                                                            float(concentration0)])
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            concentration1_concentration0 = jitgrad.stack([concentration1, concentration0],
                                                          -1)
        self._dirichlet = Dirichlet(concentration1_concentration0,
                                    validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Beta:
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = Size(batch_shape)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        super(Beta, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = jitgrad.stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()

    @property
    def concentration1(self) -> Tensor:
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Tensor:
        return self._dirichlet.concentration[..., 1]

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return jitgrad.lgamma(x) + jitgrad.lgamma(y) - jitgrad.lgamma(x + y)
