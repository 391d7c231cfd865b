"""``Bernoulli``: the Bernoulli distribution over ``{0, 1}``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jitgrad
import jitgrad.nn.functional as F

from ..tensor import Size, Tensor
from . import constraints
from ._probs_logits import BinaryProbsOrLogits
from .exp_family import ExponentialFamily
from .utils import _uniform, broadcast_all

__all__ = ["Bernoulli"]


class Bernoulli(BinaryProbsOrLogits, ExponentialFamily):
    """1 with probability ``probs``, 0 with ``1 - probs``; parameterized by ``probs`` or
    by ``logits`` (log-odds), exactly one of them.

    >>> import jitgrad
    >>> from jitgrad.distributions import Bernoulli
    >>> Bernoulli(probs=jitgrad.tensor([0.25])).variance
    tensor([0.1875])

    Args:
        probs: the probability of 1.
        logits: the log-odds of 1.
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs: Tensor | float | None = None,
                 logits: Tensor | float | None = None,
                 validate_args: bool | None = None) -> None:
        self._set_probs_or_logits(probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Bernoulli:
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = Size(batch_shape)
        self._expand_probs_or_logits(new, batch_shape)
        super(Bernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs)
        return jitgrad.where(self.probs == 0.5, jitgrad.full_like(mode, math.nan), mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with jitgrad.no_grad():
            probs = self.probs.expand(shape)
            u = _uniform(shape, dtype=probs.dtype, device=probs.device)
            return (u < probs).to(probs.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = jitgrad.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (jitgrad.logit(self.probs),)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return jitgrad.log1p(jitgrad.exp(x))
