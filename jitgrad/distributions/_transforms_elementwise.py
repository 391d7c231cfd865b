"""The element-wise transforms of ``torch.distributions.transforms``: ``ExpTransform``,
``PowerTransform``, ``SigmoidTransform``, ``SoftplusTransform``, ``TanhTransform``,
``AbsTransform``, ``AffineTransform`` and ``CumulativeDistributionTransform``. Import them
from :mod:`jitgrad.distributions.transforms`."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING

import jitgrad
import jitgrad.nn.functional as F

from ..tensor import Tensor
from . import constraints
from ._transform_base import Transform
from .utils import broadcast_all, finfo, lazy_property

if TYPE_CHECKING:
    from .distribution import Distribution

__all__ = ["AbsTransform", "AffineTransform", "CumulativeDistributionTransform",
           "ExpTransform", "PowerTransform", "SigmoidTransform", "SoftplusTransform",
           "TanhTransform"]


def _is_number(v: object) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, Tensor)


def _shape_of(v: object) -> tuple[int, ...]:
    return tuple(v.shape) if isinstance(v, Tensor) else ()


class ExpTransform(Transform):
    """``y = exp(x)``.

    >>> import jitgrad
    >>> from jitgrad.distributions.transforms import ExpTransform
    >>> ExpTransform().inv(jitgrad.tensor([1.0]))
    tensor([0.])
    """

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExpTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.exp()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


class PowerTransform(Transform):
    """``y = x ** exponent`` on the positive half line.

    Args:
        exponent: the exponent (a number or a tensor broadcasting with the inputs).
        cache_size: 0 or 1.
    """

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent: Tensor | float, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @lazy_property
    def sign(self) -> Tensor:  # type: ignore[override]
        return self.exponent.sign()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PowerTransform):
            return False
        return bool(self.exponent.eq(other.exponent).all().item())

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.pow(self.exponent)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return jitgrad.broadcast_shapes(tuple(shape), _shape_of(self.exponent))

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return jitgrad.broadcast_shapes(tuple(shape), _shape_of(self.exponent))


def _clipped_sigmoid(x: Tensor) -> Tensor:
    """``sigmoid(x)`` clamped to ``[tiny, 1 - eps]`` of its dtype."""
    fi = finfo(x.dtype)
    return jitgrad.clamp(jitgrad.sigmoid(x), min=float(fi.tiny), max=1.0 - float(fi.eps))


class SigmoidTransform(Transform):
    """``y = 1 / (1 + exp(-x))`` and ``x = logit(y)`` (the output clamped to
    ``[tiny, 1 - eps]``).

    >>> import jitgrad
    >>> from jitgrad.distributions.transforms import SigmoidTransform
    >>> SigmoidTransform()(jitgrad.tensor([0.0]))
    tensor([0.5000])
    """

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SigmoidTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return _clipped_sigmoid(x)

    def _inverse(self, y: Tensor) -> Tensor:
        fi = finfo(y.dtype)
        y = y.clamp(min=float(fi.tiny), max=1.0 - float(fi.eps))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -F.softplus(-x) - F.softplus(x)


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))`` (linear above 20, as ``softplus``)."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SoftplusTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return F.softplus(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -F.softplus(-x)


class TanhTransform(Transform):
    """``y = tanh(x)`` (the inverse is ``atanh``, unclamped: use ``cache_size=1`` where
    samples reach +-1).

    >>> import jitgrad
    >>> from jitgrad.distributions.transforms import TanhTransform
    >>> TanhTransform().log_abs_det_jacobian(jitgrad.tensor([0.0]), jitgrad.tensor([0.0]))
    tensor([0.])
    """

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TanhTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.tanh()

    def _inverse(self, y: Tensor) -> Tensor:
        return jitgrad.atanh(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        # log(1 - tanh(x)^2), in a numerically stable form
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class AbsTransform(Transform):
    """``y = |x|`` (not bijective: the inverse is the identity)."""

    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbsTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.abs()

    def _inverse(self, y: Tensor) -> Tensor:
        return y


class AffineTransform(Transform):
    """The point-wise affine map ``y = loc + scale * x``.

    >>> import jitgrad
    >>> from jitgrad.distributions.transforms import AffineTransform
    >>> AffineTransform(1.0, -2.0).inv(jitgrad.tensor([5.0]))
    tensor([-2.])

    Args:
        loc: the location.
        scale: the scale.
        event_dim: the number of event dimensions (0 for univariate variables, 1 for
            vectors, ...): ``log_abs_det_jacobian`` sums over them.
        cache_size: 0 or 1.
    """

    bijective = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float, event_dim: int = 0,
                 cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self) -> int:
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        """The constraint of valid inputs."""
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        """The constraint of valid outputs."""
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if _is_number(a) and _is_number(b):
                if a != b:
                    return False
            elif not bool((a == b).all().item()):
                return False
        return True

    __hash__ = Transform.__hash__

    @property
    def sign(self) -> int | Tensor:
        if _is_number(self.scale):
            s = float(self.scale)
            return 1 if s > 0 else -1 if s < 0 else 0
        return self.scale.sign()

    def _call(self, x: Tensor) -> Tensor:
        return self.loc + self.scale * x

    def _inverse(self, y: Tensor) -> Tensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        shape = tuple(x.shape)
        scale = self.scale
        if _is_number(scale):
            result = jitgrad.full_like(x, math.log(abs(scale)))
        else:
            result = jitgrad.abs(scale).log()
        if self.event_dim:
            result = result.reshape(tuple(result.shape[:-self.event_dim]) + (-1,)).sum(-1)
            shape = shape[:-self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return jitgrad.broadcast_shapes(tuple(shape), _shape_of(self.loc),
                                        _shape_of(self.scale))

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return jitgrad.broadcast_shapes(tuple(shape), _shape_of(self.loc),
                                        _shape_of(self.scale))


class CumulativeDistributionTransform(Transform):
    """The cumulative distribution function of ``distribution`` as a transform onto the
    unit interval (its inverse is the ``icdf``, its log-Jacobian the ``log_prob``).

    Args:
        distribution: a distribution with ``cdf``, ``icdf`` and ``log_prob``.
        cache_size: 0 or 1.
    """

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution: Distribution, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self) -> constraints.Constraint | None:  # type: ignore[override]
        """The support of the distribution."""
        return self.distribution.support

    def _call(self, x: Tensor) -> Tensor:
        return self.distribution.cdf(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)
