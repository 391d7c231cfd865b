"""The transforms of ``torch.distributions.transforms`` onto structured spaces: the simplex
(``SoftmaxTransform``, ``StickBreakingTransform``) and matrices (``LowerCholeskyTransform``,
``PositiveDefiniteTransform``, ``CorrCholeskyTransform``). Import them from
:mod:`jitgrad.distributions.transforms`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import jitgrad
import jitgrad.nn.functional as F

from ..tensor import Tensor
from . import constraints
from ._transform_base import Transform
from ._transforms_elementwise import _clipped_sigmoid
from .utils import finfo, tril_matrix_to_vec, vec_to_tril_matrix

__all__ = ["CorrCholeskyTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
           "SoftmaxTransform", "StickBreakingTransform"]


def _at_least_1d(shape: Sequence[int]) -> None:
    if len(shape) < 1:
        raise ValueError("Too few dimensions on input")


class SoftmaxTransform(Transform):
    """Unconstrained vectors to the simplex: ``y = exp(x)`` normalised over the last
    dimension (not bijective: the inverse is ``log``).

    >>> import jitgrad
    >>> from jitgrad.distributions.transforms import SoftmaxTransform
    >>> SoftmaxTransform()(jitgrad.zeros(4))
    tensor([0.2500, 0.2500, 0.2500, 0.2500])
    """

    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SoftmaxTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        _at_least_1d(shape)
        return shape

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        _at_least_1d(shape)
        return shape


def _offset(x: Tensor, n: int) -> Tensor:
    """``n - [0, 1, ..., len - 1]`` in ``x``'s dtype, the stick-breaking offsets."""
    return n - x.new_ones(x.shape[-1]).cumsum(-1)


class StickBreakingTransform(Transform):
    """Unconstrained vectors of size ``K - 1`` to the simplex of size ``K`` by stick
    breaking (iterated sigmoids); bijective.

    >>> import jitgrad
    >>> from jitgrad.distributions.transforms import StickBreakingTransform
    >>> StickBreakingTransform()(jitgrad.zeros(3))
    tensor([0.2500, 0.2500, 0.2500, 0.2500])
    """

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StickBreakingTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        offset = _offset(x, x.shape[-1] + 1)
        z = _clipped_sigmoid(x - offset.log())
        z_cumprod = (1 - z).cumprod(-1)
        return F.pad(z, [0, 1], value=1) * F.pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y: Tensor) -> Tensor:
        y_crop = y[..., :-1]
        offset = _offset(y_crop, y.shape[-1])
        sf = 1 - y_crop.cumsum(-1)
        # keep the remaining stick positive (it may round to 0 when y[-1] ~ 0)
        sf = jitgrad.clamp(sf, min=float(finfo(y.dtype).tiny))
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        offset = _offset(x, x.shape[-1] + 1)
        x = x - offset.log()
        # 1 - sigmoid(x) = exp(-x) * sigmoid(x)
        return (-x + F.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        _at_least_1d(shape)
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        _at_least_1d(shape)
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class LowerCholeskyTransform(Transform):
    """Unconstrained square matrices to lower-triangular ones with a positive diagonal
    (the strict lower triangle kept, the diagonal exponentiated)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LowerCholeskyTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Unconstrained square matrices to positive-definite ones: ``L @ L.mT`` of the
    :class:`LowerCholeskyTransform` of the input."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PositiveDefiniteTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y: Tensor) -> Tensor:
        return LowerCholeskyTransform().inv(jitgrad.linalg.cholesky(y))


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length ``D * (D - 1) / 2`` to Cholesky factors of ``D x D``
    correlation matrices (lower triangular, positive diagonal, rows of unit norm): the
    vector fills the strict lower triangle row by row, goes through ``tanh``, and each
    row is completed by a signed stick-breaking step."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CorrCholeskyTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        x = jitgrad.tanh(x)
        eps = float(finfo(x.dtype).eps)
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        # stick breaking on the squares: y = r * sqrt(cumprod(1 - r^2)) shifted by one
        z = r**2
        z1m_cumprod_sqrt = (1 - z).sqrt().cumprod(-1)
        r = r + jitgrad.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return r * F.pad(z1m_cumprod_sqrt[..., :-1], [1, 0], value=1)

    def _inverse(self, y: Tensor) -> Tensor:
        y_cumsum = 1 - jitgrad.cumsum(y * y, dim=-1)
        y_cumsum_shifted = F.pad(y_cumsum[..., :-1], [1, 0], value=1)
        y_vec = tril_matrix_to_vec(y, diag=-1)
        y_cumsum_vec = tril_matrix_to_vec(y_cumsum_shifted, diag=-1)
        t = y_vec / y_cumsum_vec.sqrt()
        return (t.log1p() - t.neg().log1p()) / 2  # atanh

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        # of x and the flattened strict lower triangle of y (the spaces' dimensions
        # differ); see the Stan reference manual, "Cholesky factors of correlation
        # matrices"
        y1m_cumsum = 1 - (y * y).cumsum(dim=-1)
        y1m_cumsum_tril = tril_matrix_to_vec(y1m_cumsum, diag=-2)
        stick_breaking_logdet = 0.5 * y1m_cumsum_tril.log().sum(-1)
        tanh_logdet = -2 * (x + F.softplus(-2 * x) - math.log(2.0)).sum(dim=-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        _at_least_1d(shape)
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)
