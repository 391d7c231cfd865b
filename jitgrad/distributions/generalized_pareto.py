"""``GeneralizedPareto``: the generalized Pareto distribution (peaks over a threshold)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .utils import _uniform, broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution with location ``loc``, scale ``scale`` and
    shape ``concentration`` (``xi``): ``log p(x) = -log(scale) - (1 / xi + 1) log(1 + xi z)``
    for ``z = (x - loc) / scale`` (``-z`` where ``xi == 0``). Special cases: Exponential
    (``loc = 0, xi = 0``), Pareto (``xi > 0, loc = scale / xi``), Uniform (``xi = -1``).
    ``rsample`` is the inverse CDF of uniform noise (reparameterized).

    >>> import jitgrad
    >>> from jitgrad.distributions import GeneralizedPareto
    >>> GeneralizedPareto(0.0, 1.0, 0.5).mean
    tensor(2.)

    Args:
        loc: the location, the support's lower bound.
        scale: the scale (positive).
        concentration: the shape ``xi``; for ``xi < 0`` the support's upper bound is
            ``loc - scale / xi``.
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 concentration: Tensor | float, validate_args: bool | None = None) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if all(isinstance(v, numbers.Number) for v in (loc, scale, concentration)):
            batch_shape = Size()
        else:
            batch_shape = self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> GeneralizedPareto:
        return self._expand_params(GeneralizedPareto, batch_shape, _instance,
                                   ("loc", "scale", "concentration"))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, self.loc.dtype, self.loc.device)
        return self.icdf(u)

    def _safe_concentration(self) -> tuple[Tensor, Tensor]:
        """(``concentration == 0`` as ``isclose`` has it, the concentration with 1 there)."""
        eq_zero = jitgrad.isclose(self.concentration, jitgrad.zeros_like(self.concentration))
        safe = jitgrad.where(eq_zero, jitgrad.ones_like(self.concentration),
                             self.concentration)
        return eq_zero, safe

    def log_prob(self, value: Tensor | float) -> Tensor:
        value = jitgrad.as_tensor(value, dtype=self.loc.dtype, device=self.loc.device)
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + jitgrad.ones_like(z)
        where_nonzero = jitgrad.where(y == 0, y, y * jitgrad.log1p(safe_conc * z))
        return -self.scale.log() - jitgrad.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value: Tensor | float) -> Tensor:
        """``log(1 - cdf(value))``."""
        value = jitgrad.as_tensor(value, dtype=self.loc.dtype, device=self.loc.device)
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        where_nonzero = -jitgrad.log1p(safe_conc * z) / safe_conc
        return jitgrad.where(eq_zero, -z, where_nonzero)

    def log_cdf(self, value: Tensor | float) -> Tensor:
        """``log(cdf(value))``."""
        return jitgrad.log1p(-jitgrad.exp(self.log_survival_function(value)))

    def cdf(self, value: Tensor | float) -> Tensor:
        return jitgrad.exp(self.log_cdf(value))

    def icdf(self, value: Tensor | float) -> Tensor:
        value = jitgrad.as_tensor(value, dtype=self.loc.dtype, device=self.loc.device)
        eq_zero, safe_conc = self._safe_concentration()
        logu = jitgrad.log1p(-value)
        where_nonzero = self.loc + self.scale / safe_conc * jitgrad.expm1(-safe_conc * logu)
        where_zero = self.loc - self.scale * logu
        return jitgrad.where(eq_zero, where_zero, where_nonzero)

    def _z(self, x: Tensor) -> Tensor:
        return (x - self.loc) / self.scale

    @property
    def mean(self) -> Tensor:
        valid = self.concentration < 1
        safe_conc = jitgrad.where(valid, self.concentration, 0.5)
        result = self.loc + self.scale / (1 - safe_conc)
        return jitgrad.where(valid, result, math.nan)

    @property
    def variance(self) -> Tensor:
        valid = self.concentration < 0.5
        safe_conc = jitgrad.where(valid, self.concentration, 0.25)
        result = self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return jitgrad.where(valid, result, math.nan)

    def entropy(self) -> Tensor:
        ans = jitgrad.log(self.scale) + self.concentration + 1
        return jitgrad.broadcast_to(ans, self._batch_shape)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> constraints.Constraint:
        lower = self.loc
        upper = jitgrad.where(self.concentration < 0, lower - self.scale / self.concentration,
                              math.inf)
        return constraints.interval(lower, upper)
