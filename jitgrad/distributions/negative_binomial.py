"""``NegativeBinomial``: successes before ``total_count`` failures of Bernoulli trials."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jitgrad
import jitgrad.nn.functional as F

from ..tensor import Size, Tensor
from . import constraints
from ._probs_logits import BinaryProbsOrLogits
from .distribution import Distribution
from .gamma import Gamma
from .utils import lazy_property

__all__ = ["NegativeBinomial"]


class NegativeBinomial(BinaryProbsOrLogits, Distribution):
    """The number of successes before ``total_count`` failures of independent Bernoulli
    trials with success probability ``probs`` (or its ``logits``, exactly one of them);
    ``total_count`` may be any non-negative real. Samples are Poisson draws of Gamma
    draws, made on the host from the parameters' values (a graph break under
    ``jitgrad.compile``).

    >>> import jitgrad
    >>> from jitgrad.distributions import NegativeBinomial
    >>> NegativeBinomial(4.0, probs=jitgrad.tensor(0.5)).mean
    tensor(4.)

    Args:
        total_count: the number of failures to stop at (non-negative).
        probs: the success probability of each trial, in ``[0, 1)``.
        logits: its log-odds.
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count: Tensor | float, probs: Tensor | None = None,
                 logits: Tensor | None = None, validate_args: bool | None = None) -> None:
        (self.total_count,) = self._set_probs_or_logits(probs, logits, total_count)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> NegativeBinomial:
        new = self._get_checked_instance(NegativeBinomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        self._expand_probs_or_logits(new, batch_shape)
        super(NegativeBinomial, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.total_count * jitgrad.exp(self.logits)

    @property
    def mode(self) -> Tensor:
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.mean / jitgrad.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self) -> Gamma:
        return Gamma(concentration=self.total_count, rate=jitgrad.exp(-self.logits),
                     validate_args=False)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        with jitgrad.no_grad():
            rate = self._gamma.sample(sample_shape=sample_shape)
            return jitgrad.poisson(rate)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized_prob = (self.total_count * F.logsigmoid(-self.logits)
                                 + value * F.logsigmoid(self.logits))
        log_normalization = (-jitgrad.lgamma(self.total_count + value)
                             + jitgrad.lgamma(1.0 + value) + jitgrad.lgamma(self.total_count))
        log_normalization = log_normalization.masked_fill(self.total_count + value == 0.0,
                                                          0.0)
        return log_unnormalized_prob - log_normalization
