"""``ExponentialFamily``: distributions of the form
``p(x; theta) = exp(<t(x), theta> - F(theta) + k(x))``, whose entropy and KL divergence
follow from the log normalizer ``F`` by automatic differentiation (Bregman divergence)."""

from __future__ import annotations

import jitgrad

from ..tensor import Tensor
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base class of exponential-family distributions: subclasses give
    ``_natural_params``, ``_log_normalizer`` and ``_mean_carrier_measure``."""

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        """The natural parameters (a tuple of tensors)."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params: Tensor) -> Tensor:
        """The log normalizer ``F`` at the given natural parameters."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self) -> float:
        """The expected carrier measure ``E[k(x)]``."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """The entropy from the Bregman divergence of the log normalizer."""
        result: Tensor | float = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        lg_normal = self._log_normalizer(*nparams)
        gradients = jitgrad.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for np_, g in zip(nparams, gradients):
            result = result - (np_ * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
