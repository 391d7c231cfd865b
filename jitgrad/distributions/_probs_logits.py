"""What the distributions of one success probability share (Bernoulli, Binomial,
NegativeBinomial, Geometric, ContinuousBernoulli, the relaxed Bernoulli): exactly one of
``probs`` and ``logits`` is given, the other is computed on first use, and ``expand`` expands
whichever of them exists -- PyTorch's structure, written once."""

from __future__ import annotations

from typing import Any

from ..tensor import Size, Tensor
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["BinaryProbsOrLogits"]


class BinaryProbsOrLogits:
    """Mixin of a distribution parameterised by a success probability ``probs`` or its
    log-odds ``logits``."""

    def _set_probs_or_logits(self, probs: Any, logits: Any, *others: Any) -> tuple:
        """Store the given parameter (``probs`` or ``logits``, PyTorch's error unless exactly
        one is given) broadcast with ``others``; returns ``others`` broadcast and cast to the
        parameter's type. ``self._param`` is the stored parameter."""
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        name, given = ("probs", probs) if probs is not None else ("logits", logits)
        *rest, param = broadcast_all(*others, given)
        setattr(self, name, param)
        self._param = param
        return tuple(r.type_as(param) for r in rest)

    def _expand_probs_or_logits(self, new: Any, batch_shape: Size) -> None:
        """Give ``new`` this distribution's ``probs`` and/or ``logits`` (those computed so
        far) expanded to ``batch_shape``."""
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(batch_shape))
                new._param = getattr(new, name)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter given (``probs`` or ``logits``)."""
        return self._param.size()
