"""``Categorical``: a distribution over the category indices ``0 .. K-1``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .utils import _uniform, finfo, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical"]


class Categorical(Distribution):
    """Category indices ``0 .. K-1`` with probabilities ``probs`` (non-negative, normalised
    over the last dimension) or ``logits`` (unnormalised log probabilities), exactly one
    of them; the last dimension indexes the categories, the others are batch dimensions.

    Samples come from one uniform number each (inverse CDF), drawn from jitgrad's
    generator, so sampling also runs inside ``jitgrad.compile``.

    >>> import jitgrad
    >>> from jitgrad.distributions import Categorical
    >>> Categorical(logits=jitgrad.zeros(4)).entropy()
    tensor(1.3863)

    Args:
        probs: event probabilities.
        logits: event log probabilities (unnormalised).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.ndimension() > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Categorical:
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = Size(batch_shape)
        param_shape = Size(tuple(batch_shape) + (self._num_events,))
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(param_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(param_shape)
            new._param = new.logits
        new._num_events = self._num_events
        super(Categorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @property
    def mean(self) -> Tensor:
        return jitgrad.full(self._extended_shape(), math.nan, dtype=self.probs.dtype,
                            device=self.probs.device)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(dim=-1)

    @property
    def variance(self) -> Tensor:
        return jitgrad.full(self._extended_shape(), math.nan, dtype=self.probs.dtype,
                            device=self.probs.device)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        if not isinstance(sample_shape, Size):
            sample_shape = Size(sample_shape)
        with jitgrad.no_grad():
            probs = self.probs.detach()
            cdf = probs.cumsum(-1)
            shape = self._extended_shape(sample_shape)
            # u in (0, 1] scaled to the total: the first category whose cumulative
            # probability reaches u * total has a positive probability
            u = 1 - _uniform(Size(tuple(shape) + (1,)), dtype=probs.dtype,
                             device=probs.device)
            below = (cdf < u * cdf[..., -1:]).sum(-1)
            return below.clamp(max=self._num_events - 1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = jitgrad.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self) -> Tensor:
        min_real = float(finfo(self.logits.dtype).min)
        logits = jitgrad.clamp(self.logits, min=min_real)
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = jitgrad.arange(self._num_events, dtype=jitgrad.long,
                                device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
