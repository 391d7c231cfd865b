"""``Multinomial``: counts of ``total_count`` categorical draws."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """The counts of each of ``K`` categories in ``total_count`` independent draws with
    probabilities ``probs`` (normalised over the last dimension) or ``logits``
    (unnormalised log probabilities), exactly one of them. ``sample`` needs one shared
    integer ``total_count``; ``log_prob`` takes any counts (the total is read from them).

    >>> import jitgrad
    >>> from jitgrad.distributions import Multinomial
    >>> m = Multinomial(10, probs=jitgrad.tensor([1.0, 1.0, 2.0]))
    >>> m.mean
    tensor([2.5000, 2.5000, 5.0000])
    >>> int(m.sample().sum())
    10

    Args:
        total_count: the number of trials (an int).
        probs: event probabilities.
        logits: event log probabilities (unnormalised).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    total_count: int

    @property
    def mean(self) -> Tensor:
        return self.probs * self.total_count

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def __init__(self, total_count: int = 1, probs: Tensor | None = None,
                 logits: Tensor | None = None, validate_args: bool | None = None) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Multinomial:
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        super(Multinomial, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self) -> constraints.Constraint:
        return constraints.multinomial(self.total_count)

    @property
    def logits(self) -> Tensor:
        """The normalised log probabilities."""
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        """The normalised probabilities."""
        return self._categorical.probs

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter given (``probs`` or ``logits``)."""
        return self._categorical.param_shape

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        sample_shape = Size(sample_shape)
        samples = self._categorical.sample(Size((self.total_count,) + tuple(sample_shape)))
        # (total_count, *sample, *batch) -> (*sample, *batch, total_count)
        shifted_idx = list(range(samples.dim()))
        shifted_idx.append(shifted_idx.pop(0))
        samples = samples.permute(*shifted_idx)
        counts = jitgrad.zeros(self._extended_shape(sample_shape), dtype=samples.dtype,
                               device=samples.device)
        counts = counts.scatter_add(-1, samples, jitgrad.ones_like(samples))
        return counts.type_as(self.probs)

    def entropy(self) -> Tensor:
        n = jitgrad.tensor(self.total_count)
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - jitgrad.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = jitgrad.exp(self._binomial.log_prob(support))
        weights = jitgrad.lgamma(support + 1)
        term2 = (binomial_probs * weights).sum([0, -1])
        return term1 + term2

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = jitgrad.lgamma(value.sum(-1) + 1)
        log_factorial_xs = jitgrad.lgamma(value + 1).sum(-1)
        # 0 * (-inf) is 0 for a category of probability 0 not drawn
        logits = jitgrad.where((value == 0) & (logits == -math.inf),
                               jitgrad.zeros_like(logits), logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers
