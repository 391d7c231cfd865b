"""``ContinuousBernoulli``: the continuous Bernoulli distribution on ``[0, 1]``
(Loaiza-Ganem and Cunningham, NeurIPS 2019)."""

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
from .utils import (
    _uniform,
    broadcast_all,
    clamp_probs,
    lazy_property,
    logits_to_probs,
)

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(BinaryProbsOrLogits, ExponentialFamily):
    """The continuous Bernoulli distribution, ``p(x) = C(probs) probs**x (1-probs)**(1-x)``
    on ``[0, 1]``, parameterized by ``probs`` in ``(0, 1)`` or ``logits`` (real), exactly
    one of them (they are not a probability and log-odds, despite the names). Near
    ``probs = 0.5`` (inside ``lims``) Taylor expansions replace the unstable closed forms.
    Reparameterized (inverse CDF of a uniform draw).

    >>> import jitgrad
    >>> from jitgrad.distributions import ContinuousBernoulli
    >>> ContinuousBernoulli(probs=jitgrad.tensor(0.5)).mean
    tensor(0.5000)

    Args:
        probs: the parameter, in ``(0, 1)``.
        logits: its logit.
        lims: the interval around 0.5 where the Taylor expansions are used.
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs: Tensor | float | None = None,
                 logits: Tensor | float | None = None,
                 lims: tuple[float, float] = (0.499, 0.501),
                 validate_args: bool | None = None) -> None:
        self._set_probs_or_logits(probs, logits)
        if probs is not None:
            # validate 'probs' here if necessary, it is clamped below
            if validate_args is not None:
                if not bool(self.arg_constraints["probs"].check(self.probs).all()):
                    raise ValueError("The parameter probs has invalid values")
            self.probs = self._param = clamp_probs(self.probs)
        self._lims = lims
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int],
               _instance: Any = None) -> ContinuousBernoulli:
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = Size(batch_shape)
        self._expand_probs_or_logits(new, batch_shape)
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _outside_unstable_region(self) -> Tensor:
        return jitgrad.le(self.probs, self._lims[0]) | jitgrad.gt(self.probs, self._lims[1])

    def _cut_probs(self) -> Tensor:
        return jitgrad.where(self._outside_unstable_region(), self.probs,
                             self._lims[0] * jitgrad.ones_like(self.probs))

    def _cont_bern_log_norm(self) -> Tensor:
        """The log normalizing constant ``log C(probs)``."""
        cut_probs = self._cut_probs()
        cut_probs_below_half = jitgrad.where(jitgrad.le(cut_probs, 0.5), cut_probs,
                                             jitgrad.zeros_like(cut_probs))
        cut_probs_above_half = jitgrad.where(jitgrad.ge(cut_probs, 0.5), cut_probs,
                                             jitgrad.ones_like(cut_probs))
        log_norm = jitgrad.log(jitgrad.abs(jitgrad.log1p(-cut_probs) - jitgrad.log(cut_probs))
                               ) - jitgrad.where(jitgrad.le(cut_probs, 0.5),
                                                 jitgrad.log1p(-2.0 * cut_probs_below_half),
                                                 jitgrad.log(2.0 * cut_probs_above_half - 1.0))
        x = jitgrad.pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return jitgrad.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / (
            jitgrad.log1p(-cut_probs) - jitgrad.log(cut_probs))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * jitgrad.pow(x, 2)) * x
        return jitgrad.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self) -> Tensor:
        return jitgrad.sqrt(self.variance)

    @property
    def variance(self) -> Tensor:
        cut_probs = self._cut_probs()
        vars_ = cut_probs * (cut_probs - 1.0) / jitgrad.pow(1.0 - 2.0 * cut_probs, 2) + 1.0 / (
            jitgrad.pow(jitgrad.log1p(-cut_probs) - jitgrad.log(cut_probs), 2))
        x = jitgrad.pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return jitgrad.where(self._outside_unstable_region(), vars_, taylor)

    @lazy_property
    def probs(self) -> Tensor:
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, dtype=self.probs.dtype, device=self.probs.device)
        with jitgrad.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return (-F.binary_cross_entropy_with_logits(logits, value, reduction="none")
                + self._cont_bern_log_norm())

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = (jitgrad.pow(cut_probs, value) * jitgrad.pow(1.0 - cut_probs, 1.0 - value)
                + cut_probs - 1.0) / (2.0 * cut_probs - 1.0)
        unbounded_cdfs = jitgrad.where(self._outside_unstable_region(), cdfs, value)
        return jitgrad.where(jitgrad.le(value, 0.0), jitgrad.zeros_like(value),
                             jitgrad.where(jitgrad.ge(value, 1.0), jitgrad.ones_like(value),
                                           unbounded_cdfs))

    def icdf(self, value: Tensor) -> Tensor:
        cut_probs = self._cut_probs()
        return jitgrad.where(
            self._outside_unstable_region(),
            (jitgrad.log1p(-cut_probs + value * (2.0 * cut_probs - 1.0))
             - jitgrad.log1p(-cut_probs))
            / (jitgrad.log(cut_probs) - jitgrad.log1p(-cut_probs)),
            value)

    def entropy(self) -> Tensor:
        log_probs0 = jitgrad.log1p(-self.probs)
        log_probs1 = jitgrad.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.logits,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        """The log normalizing constant as a function of the natural parameter."""
        out_unst_reg = (jitgrad.le(x, self._lims[0] - 0.5)
                        | jitgrad.gt(x, self._lims[1] - 0.5))
        cut_nat_params = jitgrad.where(out_unst_reg, x,
                                       (self._lims[0] - 0.5) * jitgrad.ones_like(x))
        log_norm = (jitgrad.log(jitgrad.abs(jitgrad.expm1(cut_nat_params)))
                    - jitgrad.log(jitgrad.abs(cut_nat_params)))
        taylor = 0.5 * x + jitgrad.pow(x, 2) / 24.0 - jitgrad.pow(x, 4) / 2880.0
        return jitgrad.where(out_unst_reg, log_norm, taylor)
