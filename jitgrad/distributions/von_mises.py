"""``VonMises``: the circular von Mises distribution."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import jitgrad

from ..random import rng
from ..tensor import Tensor
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property

__all__ = ["VonMises"]


def _eval_poly(y: Tensor, coef: Sequence[float]) -> Tensor:
    coef = list(coef)
    result = coef.pop()
    while coef:
        result = coef.pop() + y * result
    return result


_I0_COEF_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2]
_I0_COEF_LARGE = [0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2,
                  -0.2057706e-1, 0.2635537e-1, -0.1647633e-1, 0.392377e-2]
_I1_COEF_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2,
                  0.32411e-3]
_I1_COEF_LARGE = [0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1,
                  0.2282967e-1, -0.2895312e-1, 0.1787654e-1, -0.420059e-2]
_COEF_SMALL = [_I0_COEF_SMALL, _I1_COEF_SMALL]
_COEF_LARGE = [_I0_COEF_LARGE, _I1_COEF_LARGE]


def _log_modified_bessel_fn(x: Tensor, order: int = 0) -> Tensor:
    """``log(I_order(x))`` for ``x > 0`` and ``order`` 0 or 1 (PyTorch's polynomial
    approximations, Abramowitz & Stegun 9.8.1-9.8.4)."""
    if order not in (0, 1):
        raise AssertionError(f"order must be 0 or 1, got {order}")
    y = x / 3.75
    y = y * y
    small = _eval_poly(y, _COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    small = small.log()
    y = 3.75 / x
    large = x - 0.5 * x.log() + _eval_poly(y, _COEF_LARGE[order]).log()
    return jitgrad.where(x < 3.75, small, large)


def _rejection_sample(loc: np.ndarray, concentration: np.ndarray, proposal_r: np.ndarray,
                      shape: tuple[int, ...]) -> np.ndarray:
    """Best & Fisher's rejection sampler ("Efficient simulation of the von Mises
    distribution", Applied Statistics 1979), in float64 on the host from jitgrad's
    generator; angles in ``[-pi, pi)``."""
    gen = rng(None)
    concentration = np.broadcast_to(concentration, shape)
    proposal_r = np.broadcast_to(proposal_r, shape)
    x = np.zeros(shape)
    done = np.zeros(shape, dtype=bool)
    with np.errstate(all="ignore"):
        while not done.all():
            u1, u2, u3 = gen.random((3,) + shape)
            z = np.cos(math.pi * u1)
            f = (1 + proposal_r * z) / (proposal_r + z)
            c = concentration * (proposal_r - f)
            accept = ((c * (2 - c) - u2) > 0) | (np.log(c / u2) + 1 - c >= 0)
            accept &= ~done
            x = np.where(accept, np.sign(u3 - 0.5) * np.arccos(f), x)
            done |= accept
    return np.mod(x + math.pi + loc, 2 * math.pi) - math.pi


class VonMises(Distribution):
    """The circular von Mises distribution ``p(x) = exp(kappa cos(x - loc)) /
    (2 pi I0(kappa))`` with ``kappa = concentration``. ``loc`` and values may be any
    real numbers (angles modulo ``2 pi``). Sampling (Best & Fisher's rejection algorithm,
    in float64) runs on the host: a graph break under ``jitgrad.compile``; not
    reparameterized.

    >>> import jitgrad
    >>> from jitgrad.distributions import VonMises
    >>> VonMises(jitgrad.tensor([0.0]), jitgrad.tensor([1.0])).log_prob(jitgrad.tensor([0.0]))
    tensor([-1.0738])

    Args:
        loc: the mean angle in radians.
        concentration: the concentration ``kappa`` (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc: Tensor | float, concentration: Tensor | float,
                 validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, (), validate_args)

    def log_prob(self, value: Tensor | float) -> Tensor:
        value = jitgrad.as_tensor(value, dtype=self.loc.dtype, device=self.loc.device)
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * jitgrad.cos(value - self.loc)
        return (log_prob - math.log(2 * math.pi)
                - _log_modified_bessel_fn(self.concentration, order=0))

    @lazy_property
    def _proposal_r(self) -> np.ndarray:
        kappa = np.asarray(self.concentration.detach().cpu().numpy(), dtype=np.float64)
        with np.errstate(all="ignore"):
            tau = 1 + np.sqrt(1 + 4 * kappa ** 2)
            rho = (tau - np.sqrt(2 * tau)) / (2 * kappa)
            proposal_r = (1 + rho ** 2) / (2 * rho)
            return np.where(kappa < 1e-5, 1 / kappa + kappa, proposal_r)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """Draws by Best & Fisher's rejection algorithm (float64 internally, as PyTorch,
        so small concentrations do not hang)."""
        shape = tuple(self._extended_shape(sample_shape))
        loc = np.asarray(self.loc.detach().cpu().numpy(), dtype=np.float64)
        kappa = np.asarray(self.concentration.detach().cpu().numpy(), dtype=np.float64)
        out = _rejection_sample(loc, kappa, self._proposal_r, shape)
        return jitgrad.tensor(out, dtype=self.loc.dtype, device=self.loc.device)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> VonMises:
        validate_args = self.__dict__.get("_validate_args")
        loc = self.loc.expand(batch_shape)
        concentration = self.concentration.expand(batch_shape)
        return type(self)(loc, concentration, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        """The circular mean."""
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        """The circular variance ``1 - I1(kappa) / I0(kappa)``."""
        return 1 - (_log_modified_bessel_fn(self.concentration, order=1)
                    - _log_modified_bessel_fn(self.concentration, order=0)).exp()
