"""``Wishart``: the distribution of ``sum_k x_k x_k^T`` for ``df`` draws ``x_k`` of a
zero-mean multivariate normal."""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import jitgrad

from ..tensor import Size, Tensor
from . import constraints
from .exp_family import ExponentialFamily
from .gamma import Chi2
from .multivariate_normal import _precision_to_scale_tril
from .utils import _standard_normal, finfo, lazy_property

__all__ = ["Wishart"]

_log_2 = math.log(2)


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma function ``sum_{i<p} digamma(x - i / 2)``."""
    if not bool(x.gt((p - 1) / 2).all()):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    half = jitgrad.arange(p, dtype=x.dtype, device=x.device) / 2
    return jitgrad.digamma(x.unsqueeze(-1) - half.expand(x.shape + (-1,))).sum(-1)


def _clamp_above_eps(x: Tensor) -> Tensor:
    return x.clamp(min=float(finfo(x.dtype).eps))


def _trace_solve(L: Tensor, value: Tensor) -> Tensor:
    """``trace((L L^T)^{-1} value)`` for symmetric ``value``: ``trace(L^{-1} V L^{-T})``,
    by general solves, so that ``L``'s upper triangle gets PyTorch's ``cholesky_solve``
    gradient too."""
    z = jitgrad.linalg.solve(L, value)
    return jitgrad.linalg.solve(L, z.mT).diagonal(dim1=-2, dim2=-1).sum(-1)


class Wishart(ExponentialFamily):
    """The Wishart distribution over positive definite ``p x p`` matrices with ``df``
    degrees of freedom (``df > p - 1``) and scale matrix ``Sigma`` given as one of
    ``covariance_matrix``, ``precision_matrix`` (``Sigma^{-1}``) or ``scale_tril`` (its
    lower Cholesky factor; all computations use it). ``rsample`` uses the Bartlett
    decomposition (reparameterized; its chi-squared draws run on the host, a graph break
    under ``jitgrad.compile``) and redraws singular samples up to ``max_try_correction``
    times.

    >>> import jitgrad
    >>> from jitgrad.distributions import Wishart
    >>> d = Wishart(jitgrad.tensor(4.0), covariance_matrix=jitgrad.eye(2))
    >>> d.mean
    tensor([[4., 0.],
            [0., 4.]])
    >>> d.log_prob(jitgrad.eye(2))
    tensor(-4.2242)

    Args:
        df: the degrees of freedom (greater than ``p - 1``).
        covariance_matrix: the positive definite scale matrix.
        precision_matrix: the inverse of the scale matrix.
        scale_tril: the scale matrix's lower Cholesky factor (positive diagonal).
        validate_args: whether to validate the arguments.
    """

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df: Tensor | float, covariance_matrix: Tensor | None = None,
                 precision_matrix: Tensor | None = None, scale_tril: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        if ((covariance_matrix is not None) + (scale_tril is not None)
                + (precision_matrix is not None)) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or "
                                 "scale_tril may be specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril)
                     if p is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = Size(param.shape[:-2])
            self.df = jitgrad.tensor(df, dtype=param.dtype, device=param.device)
        else:
            batch_shape = Size(jitgrad.broadcast_shapes(param.shape[:-2], df.shape))
            self.df = df.expand(batch_shape)
        event_shape = param.shape[-2:]
        if bool(self.df.le(event_shape[-1] - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = "
                             f"{event_shape[-1] - 1}.")
        if scale_tril is not None:
            self.scale_tril = param.expand(batch_shape + (-1, -1))
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(batch_shape + (-1, -1))
        else:
            self.precision_matrix = param.expand(batch_shape + (-1, -1))
        if bool(self.df.lt(event_shape[-1]).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to "
                          "occur for ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = jitgrad.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2(self.df, batch_shape)

    def _chi2(self, df: Tensor, batch_shape: Size) -> Chi2:
        """The Bartlett decomposition's squared diagonal: ``Chi2(df - i)``, ``i < p``."""
        L = self._unbroadcasted_scale_tril
        offset = jitgrad.arange(self._event_shape[-1], dtype=L.dtype, device=L.device)
        return Chi2(df=df.unsqueeze(-1) - offset.expand(batch_shape + (-1,)))

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> Wishart:
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(batch_shape)
        cov_shape = batch_shape + self.event_shape
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._chi2(new.df, batch_shape)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(self._batch_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._batch_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        L_inv = jitgrad.linalg.inv(self._unbroadcasted_scale_tril)
        return (L_inv.mT @ L_inv).expand(self._batch_shape + self._event_shape)

    @property
    def mean(self) -> Tensor:
        return self.df.view(self._batch_shape + (1, 1)) * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = jitgrad.where(factor <= 0, math.nan, factor)
        return factor.view(self._batch_shape + (1, 1)) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        V = self.covariance_matrix
        diag_V = V.diagonal(dim1=-2, dim2=-1)
        return self.df.view(self._batch_shape + (1, 1)) * (
            V.pow(2) + diag_V.unsqueeze(-1) * diag_V.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape: Size) -> Tensor:
        diag = _clamp_above_eps(self._dist_chi2.rsample(sample_shape).sqrt())
        L = self._unbroadcasted_scale_tril
        shape = sample_shape + self._batch_shape + self._event_shape
        noise = _standard_normal(shape, L.dtype, L.device).tril(-1) + jitgrad.diag_embed(diag)
        chol = L @ noise
        return chol @ chol.mT

    def _singular(self, sample: Tensor) -> Tensor:
        singular = ~self.support.check(sample)
        if self._batch_shape:
            singular = singular.amax(self._batch_dims)
        return singular

    def rsample(self, sample_shape: Sequence[int] = (),
                max_try_correction: int | None = None) -> Tensor:
        """Bartlett-decomposition draws. Singular samples (possible for small ``df``)
        are redrawn up to ``max_try_correction`` times (10 by default), with a warning;
        some may remain (``log_prob`` is ``-inf`` there)."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        singular = self._singular(sample)
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                sample_new = self._bartlett_sampling(sample_shape)
                mask = singular.view(singular.shape + (1,) * (sample.dim() - singular.dim()))
                sample = jitgrad.where(mask, sample_new, sample)
                singular = self._singular(sample)
                if not bool(singular.any()):
                    break
        return sample

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        return (-nu * (p * _log_2 / 2 + L.diagonal(dim1=-2, dim2=-1).log().sum(-1))
                - jitgrad.mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * jitgrad.linalg.slogdet(value)[1]
                - _trace_solve(L, value) / 2)

    def entropy(self) -> Tensor:
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        return ((p + 1) * (p * _log_2 / 2 + L.diagonal(dim1=-2, dim2=-1).log().sum(-1))
                + jitgrad.mvlgamma(nu / 2, p) - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p)
                + nu * p / 2)

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        nu = self.df
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (nu - p - 1) / 2

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        p = self._event_shape[-1]
        return ((y + (p + 1) / 2) * (-jitgrad.linalg.slogdet(-2 * x)[1] + _log_2 * p)
                + jitgrad.mvlgamma(y + (p + 1) / 2, p))
