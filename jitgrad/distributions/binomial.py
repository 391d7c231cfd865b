"""``Binomial``: the number of successes in ``total_count`` Bernoulli trials."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from ._probs_logits import BinaryProbsOrLogits
from .distribution import Distribution

__all__ = ["Binomial"]


def _clamp_by_zero(x: Tensor) -> Tensor:
    """``clamp(x, min=0)`` with gradient 0.5 at 0 (PyTorch's)."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(BinaryProbsOrLogits, Distribution):
    """Successes in ``total_count`` independent trials of probability ``probs`` (or
    log-odds ``logits``; exactly one of them). Samples come from NumPy's binomial sampler
    on jitgrad's generator (a graph break under ``jitgrad.compile``).

    >>> import jitgrad
    >>> from jitgrad.distributions import Binomial
    >>> Binomial(10, jitgrad.tensor([0.5])).variance
    tensor([2.5000])

    Args:
        total_count: the number of trials (nonnegative integers).
        probs: the success probability.
        logits: the success log-odds.
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count: Tensor | int = 1, probs: Tensor | None = None,
                 logits: Tensor | None = None, validate_args: bool | None = None) -> None:
        (self.total_count,) = self._set_probs_or_logits(probs, logits, total_count)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Binomial:
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        self._expand_probs_or_logits(new, batch_shape)
        super(Binomial, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with jitgrad.no_grad():
            return jitgrad.binomial(self.total_count.expand(shape),
                                    self.probs.expand(shape)).to(self._param.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = jitgrad.lgamma(self.total_count + 1)
        log_factorial_k = jitgrad.lgamma(value + 1)
        log_factorial_nmk = jitgrad.lgamma(self.total_count - value + 1)
        # k log(p) + (n - k) log(1 - p) = k logit - n max(logit, 0) - n log1p(e^-|logit|)
        normalize_term = (self.total_count * _clamp_by_zero(self.logits)
                          + self.total_count * jitgrad.log1p(jitgrad.exp(-jitgrad.abs(
                              self.logits)))
                          - log_factorial_n)
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def entropy(self) -> Tensor:
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(jitgrad.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError(
                "Inhomogeneous total count not supported by `enumerate_support`.")
        values = jitgrad.arange(1 + total_count, dtype=self._param.dtype,
                                device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
