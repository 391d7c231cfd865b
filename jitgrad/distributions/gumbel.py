"""``Gumbel``: the Gumbel (type-I extreme value) distribution."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from ._transforms_elementwise import AffineTransform, ExpTransform
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import broadcast_all, euler_constant, finfo

__all__ = ["Gumbel"]


def _is_number(v: object) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, Tensor)


class Gumbel(TransformedDistribution):
    """The Gumbel distribution with location ``loc`` and scale ``scale``:
    ``loc - scale * log(-log(U))`` for ``U`` uniform in ``(0, 1)``.

    >>> import jitgrad
    >>> from jitgrad.distributions import Gumbel
    >>> Gumbel(0.0, 1.0).log_prob(jitgrad.tensor(0.0))
    tensor(-1.)

    Args:
        loc: the location.
        scale: the scale (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        fi = finfo(self.loc.dtype)
        tiny, one_minus_eps = float(fi.tiny), 1 - float(fi.eps)
        if _is_number(loc) and _is_number(scale):
            base_dist = Uniform(tiny, one_minus_eps, validate_args=validate_args)
        else:
            base_dist = Uniform(jitgrad.full_like(self.loc, tiny),
                                jitgrad.full_like(self.loc, one_minus_eps),
                                validate_args=validate_args)
        transforms = [ExpTransform().inv,
                      AffineTransform(loc=0, scale=-jitgrad.ones_like(self.scale)),
                      ExpTransform().inv,
                      AffineTransform(loc=loc, scale=-self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Gumbel:
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(Size(batch_shape))
        new.scale = self.scale.expand(Size(batch_shape))
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value: Tensor) -> Tensor:
        # written out: more precise than through the transforms
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * euler_constant

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + euler_constant)
