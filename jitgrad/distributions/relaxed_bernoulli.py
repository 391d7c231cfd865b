"""``LogitRelaxedBernoulli`` and ``RelaxedBernoulli``: the binary Concrete (Gumbel-softmax)
relaxation of the Bernoulli distribution, with reparameterized samples in ``(0, 1)``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tensor import Size, Tensor
from . import constraints
from ._probs_logits import BinaryProbsOrLogits
from ._transforms_elementwise import SigmoidTransform
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .utils import (
    _uniform,
    broadcast_all,
    clamp_probs,
)

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


class LogitRelaxedBernoulli(BinaryProbsOrLogits, Distribution):
    """The logit of a :class:`RelaxedBernoulli` sample (Maddison et al. 2017, Jang et
    al. 2017): ``(logit(U) + logits) / temperature`` for ``U`` uniform; parameterized by
    ``probs`` or ``logits``, exactly one of them.

    >>> import jitgrad
    >>> from jitgrad.distributions.relaxed_bernoulli import LogitRelaxedBernoulli
    >>> d = LogitRelaxedBernoulli(jitgrad.tensor(0.5), logits=jitgrad.tensor([0.0]))
    >>> d.log_prob(jitgrad.tensor([0.0]))
    tensor([-2.0794])

    Args:
        temperature: the relaxation temperature (a tensor).
        probs: the probability of 1.
        logits: the log-odds of 1.
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature: Tensor, probs: Tensor | float | None = None,
                 logits: Tensor | float | None = None,
                 validate_args: bool | None = None) -> None:
        self.temperature = temperature
        self._set_probs_or_logits(probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int],
               _instance: Any = None) -> LogitRelaxedBernoulli:
        new = self._get_checked_instance(LogitRelaxedBernoulli, _instance)
        batch_shape = Size(batch_shape)
        new.temperature = self.temperature
        self._expand_probs_or_logits(new, batch_shape)
        super(LogitRelaxedBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(_uniform(shape, dtype=probs.dtype, device=probs.device))
        return (uniforms.log() - (-uniforms).log1p() + probs.log()
                - (-probs).log1p()) / self.temperature

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    """The relaxed (Concrete) Bernoulli distribution: ``sigmoid`` of a
    :class:`LogitRelaxedBernoulli` sample, in ``(0, 1)``, reparameterized.

    >>> import jitgrad
    >>> from jitgrad.distributions import RelaxedBernoulli
    >>> d = RelaxedBernoulli(jitgrad.tensor(2.2), probs=jitgrad.tensor([0.1, 0.99]))
    >>> d.sample((5,)).shape
    jitgrad.Size([5, 2])

    Args:
        temperature: the relaxation temperature (a tensor).
        probs: the probability of 1.
        logits: the log-odds of 1.
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True
    base_dist: LogitRelaxedBernoulli

    def __init__(self, temperature: Tensor, probs: Tensor | float | None = None,
                 logits: Tensor | float | None = None,
                 validate_args: bool | None = None) -> None:
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> RelaxedBernoulli:
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self) -> Tensor:
        """The relaxation temperature."""
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        """The log-odds of 1."""
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        """The probability of 1."""
        return self.base_dist.probs
