"""``ExpRelaxedCategorical`` and ``RelaxedOneHotCategorical``: the Concrete (Gumbel-softmax)
relaxation of the one-hot categorical distribution, with reparameterized samples on the
simplex."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from ._transforms_elementwise import ExpTransform
from .categorical import Categorical
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .utils import _uniform, broadcast_all, clamp_probs

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(Distribution):
    """The log of a :class:`RelaxedOneHotCategorical` sample: ``log_softmax((logits + G)
    / temperature)`` with Gumbel noise ``G`` (Maddison et al. 2017); parameterized by
    ``probs`` or ``logits``, exactly one of them. The support is ``real_vector`` (the true
    support is a submanifold of it).

    >>> import jitgrad
    >>> from jitgrad.distributions.relaxed_categorical import ExpRelaxedCategorical
    >>> d = ExpRelaxedCategorical(jitgrad.tensor(1.0), logits=jitgrad.zeros(3))
    >>> bool(d.rsample((2,)).exp().sum(-1).allclose(jitgrad.ones(2)))
    True

    Args:
        temperature: the relaxation temperature (a tensor).
        probs: event probabilities.
        logits: event log probabilities (unnormalised).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature: Tensor, probs: Tensor | None = None,
                 logits: Tensor | None = None, validate_args: bool | None = None) -> None:
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int],
               _instance: Any = None) -> ExpRelaxedCategorical:
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = Size(batch_shape)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        super(ExpRelaxedCategorical, new).__init__(batch_shape, self.event_shape,
                                                   validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter given (``probs`` or ``logits``)."""
        return self._categorical.param_shape

    @property
    def logits(self) -> Tensor:
        """The normalised log probabilities."""
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        """The normalised probabilities."""
        return self._categorical.probs

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        uniforms = clamp_probs(_uniform(shape, dtype=self.logits.dtype,
                                        device=self.logits.device))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        K = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = (jitgrad.full_like(self.temperature, float(K)).lgamma()
                     - self.temperature.log().mul(-(K - 1)))
        score = logits - value.mul(self.temperature)
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """The relaxed one-hot categorical (Concrete / Gumbel-softmax) distribution: ``exp``
    of an :class:`ExpRelaxedCategorical` sample, on the simplex, reparameterized.

    >>> import jitgrad
    >>> from jitgrad.distributions import RelaxedOneHotCategorical
    >>> d = RelaxedOneHotCategorical(jitgrad.tensor(2.2), probs=jitgrad.tensor([0.1, 0.9]))
    >>> d.sample((3,)).shape
    jitgrad.Size([3, 2])

    Args:
        temperature: the relaxation temperature (a tensor).
        probs: event probabilities.
        logits: event log probabilities (unnormalised).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True
    base_dist: ExpRelaxedCategorical

    def __init__(self, temperature: Tensor, probs: Tensor | None = None,
                 logits: Tensor | None = None, validate_args: bool | None = None) -> None:
        base_dist = ExpRelaxedCategorical(temperature, probs, logits,
                                          validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int],
               _instance: Any = None) -> RelaxedOneHotCategorical:
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self) -> Tensor:
        """The relaxation temperature."""
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        """The normalised log probabilities."""
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        """The normalised probabilities."""
        return self.base_dist.probs
