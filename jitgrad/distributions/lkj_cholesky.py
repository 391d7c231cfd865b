"""``LKJCholesky``: the LKJ distribution over lower Cholesky factors of correlation
matrices (following PyTorch's, itself after NumPyro's)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import _standard_normal, broadcast_all, finfo

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """The LKJ distribution of the lower Cholesky factor ``L`` of a ``dim x dim``
    correlation matrix ``M = L L^T``, with density proportional to
    ``det(M) ** (concentration - 1)`` (uniform over correlation matrices when
    ``concentration == 1``). Samples by the onion method (Lewandowski, Kurowicka & Joe,
    2009); its Beta draws run on the host (a graph break under ``jitgrad.compile``).

    >>> import jitgrad
    >>> from jitgrad.distributions import LKJCholesky
    >>> d = LKJCholesky(3, jitgrad.tensor(0.5))
    >>> d.log_prob(jitgrad.eye(3))
    tensor(-2.5310)
    >>> d.sample((2,)).shape
    jitgrad.Size([2, 3, 3])

    Args:
        dim: the matrices' dimension (at least 2).
        concentration: the shape ``eta`` (positive).
        validate_args: whether to validate the arguments.
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration: Tensor | float = 1.0,
                 validate_args: bool | None = None) -> None:
        if dim < 2:
            raise ValueError(
                f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = Size((dim, dim))
        # the marginal of the off-diagonal elements: Beta(concentration + (dim - 2) / 2)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = jitgrad.arange(self.dim - 1, dtype=self.concentration.dtype,
                                device=self.concentration.device)
        offset = jitgrad.cat([jitgrad.zeros((1,), dtype=offset.dtype, device=offset.device),
                              offset])
        beta_conc1 = offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> LKJCholesky:
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """Draws by the onion method (Section 3 of Lewandowski et al.)."""
        with jitgrad.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            shape = self._extended_shape(sample_shape)
            u_normal = _standard_normal(shape, y.dtype, y.device).tril(-1)
            # the first row is zero: 0 / 0 there, set to zero as PyTorch does
            norm = u_normal.norm(dim=-1, keepdim=True)
            first_row = jitgrad.arange(self.dim, device=y.device).unsqueeze(-1) == 0
            u_hypersphere = jitgrad.where(first_row, 0.0,
                                          u_normal / jitgrad.where(first_row, 1.0, norm))
            w = jitgrad.sqrt(y) * u_hypersphere
            eps = float(finfo(w.dtype).tiny)
            diag_elems = jitgrad.clamp(1 - jitgrad.sum(w ** 2, dim=-1), min=eps).sqrt()
            return w + jitgrad.diag_embed(diag_elems)

    def log_prob(self, value: Tensor) -> Tensor:
        # the Jacobian of the map from a correlation matrix to its Cholesky factor and
        # the LKJ normalizer (Section 3.2 of Lewandowski et al.)
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = jitgrad.arange(2, self.dim + 1, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = jitgrad.sum(order * diag_elems.log(), dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = jitgrad.lgamma(alpha) * dm1
        numerator = jitgrad.mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        normalize_term = pi_constant + numerator - denominator
        return unnormalized_log_pdf - normalize_term
