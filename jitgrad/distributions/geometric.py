"""``Geometric``: the number of failures before the first success of Bernoulli trials."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jitgrad
import jitgrad.nn.functional as F

from ..tensor import Size, Tensor
from . import constraints
from ._probs_logits import BinaryProbsOrLogits
from .distribution import Distribution
from .utils import (
    _uniform,
    broadcast_all,
    finfo,
)

__all__ = ["Geometric"]


class Geometric(BinaryProbsOrLogits, Distribution):
    """``P(X = k) = (1 - p)**k p`` for ``k = 0, 1, ...``: the failures before the first
    success, the success probability ``probs`` (in ``(0, 1]``) or its ``logits``, exactly
    one of them. Samples by inverting the CDF of one uniform draw (traceable).

    >>> import jitgrad
    >>> from jitgrad.distributions import Geometric
    >>> Geometric(jitgrad.tensor(0.25)).mean
    tensor(3.)

    Args:
        probs: the probability of success of each trial.
        logits: its log-odds.
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs: Tensor | float | None = None,
                 logits: Tensor | float | None = None,
                 validate_args: bool | None = None) -> None:
        self._set_probs_or_logits(probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)
        if self._validate_args and probs is not None:
            value = self.probs
            valid = value > 0
            if not bool(valid.all()):
                invalid_value = value.detach()[~valid]
                raise ValueError(
                    "Expected parameter probs "
                    f"({type(value).__name__} of shape {tuple(value.shape)}) "
                    f"of distribution {self!r} "
                    f"to be positive but found invalid values:\n{invalid_value}")

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Geometric:
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = Size(batch_shape)
        self._expand_probs_or_logits(new, batch_shape)
        super(Geometric, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return jitgrad.zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        tiny = float(finfo(self.probs.dtype).tiny)
        with jitgrad.no_grad():
            u = _uniform(shape, dtype=self.probs.dtype, device=self.probs.device)
            u = u.clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # 0 * log(0) is 0 where probs == 1 and value == 0
        probs = jitgrad.where((probs == 1) & (value == 0), jitgrad.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs,
                                                  reduction="none") / self.probs
