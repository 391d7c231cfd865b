"""``Dirichlet``: a distribution over the probability simplex."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jitgrad
import jitgrad.nn.functional as F

from ..tensor import Size, Tensor
from . import constraints
from ._gamma_helpers import sample_dirichlet
from .exp_family import ExponentialFamily

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution with ``concentration`` (the last dimension indexes the
    components). ``rsample`` is differentiable (implicit reparameterization, as
    PyTorch); under ``jitgrad.compile`` sampling is a graph break.

    >>> import jitgrad
    >>> from jitgrad.distributions import Dirichlet
    >>> Dirichlet(jitgrad.tensor([1.0, 3.0])).mean
    tensor([0.2500, 0.7500])

    Args:
        concentration: the concentration parameters (positive), ``(*batch, k)``.
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Dirichlet:
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = Size(batch_shape)
        new.concentration = self.concentration.expand(tuple(batch_shape)
                                                      + tuple(self.event_shape))
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return sample_dirichlet(self.concentration.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (jitgrad.xlogy(self.concentration - 1.0, value).sum(-1)
                + jitgrad.lgamma(self.concentration.sum(-1))
                - jitgrad.lgamma(self.concentration).sum(-1))

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self) -> Tensor:
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, True)
        # all concentrations below 1: the mode is the vertex of the largest one
        mask = (self.concentration < 1).all(dim=-1, keepdim=True)
        vertex = F.one_hot(mode.argmax(dim=-1), concentrationm1.shape[-1]).to(mode)
        return jitgrad.where(mask, vertex, mode)

    @property
    def variance(self) -> Tensor:
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self) -> Tensor:
        k = self.concentration.size(-1)
        a0 = self.concentration.sum(-1)
        return (jitgrad.lgamma(self.concentration).sum(-1) - jitgrad.lgamma(a0)
                - (k - a0) * jitgrad.digamma(a0)
                - ((self.concentration - 1.0) * jitgrad.digamma(self.concentration)).sum(-1))

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.concentration,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return x.lgamma().sum(-1) - jitgrad.lgamma(x.sum(-1))
