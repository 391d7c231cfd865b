"""Transforms (``torch.distributions.transforms``): invertible maps with a computable log
absolute Jacobian determinant, for :class:`~jitgrad.distributions.TransformedDistribution`
and for mapping unconstrained parameters onto constraints (:mod:`.constraint_registry`).

The combinators (``Transform``, ``ComposeTransform``, ``identity_transform``,
``IndependentTransform``, ``ReshapeTransform``, ``CatTransform``, ``StackTransform``) live in
``_transform_base``, the element-wise maps (``ExpTransform``, ``AffineTransform``,
``SigmoidTransform``, ``TanhTransform``, ``PowerTransform``, ``SoftplusTransform``,
``AbsTransform``, ``CumulativeDistributionTransform``) in ``_transforms_elementwise``, the
maps onto the simplex and onto matrices (``SoftmaxTransform``, ``StickBreakingTransform``,
``LowerCholeskyTransform``, ``PositiveDefiniteTransform``, ``CorrCholeskyTransform``) in
``_transforms_structured``; this module gathers them.

>>> import jitgrad
>>> from jitgrad.distributions.transforms import AffineTransform, ExpTransform
>>> t = ExpTransform()
>>> x = jitgrad.tensor([0.0, 1.0])
>>> bool(jitgrad.allclose(t.inv(t(x)), x))
True
>>> t.log_abs_det_jacobian(x, t(x))
tensor([0., 1.])
"""

from __future__ import annotations

from ._transform_base import (
    CatTransform,
    ComposeTransform,
    IndependentTransform,
    ReshapeTransform,
    StackTransform,
    Transform,
    identity_transform,
)
from ._transforms_elementwise import (
    AbsTransform,
    AffineTransform,
    CumulativeDistributionTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
    SoftplusTransform,
    TanhTransform,
)
from ._transforms_structured import (
    CorrCholeskyTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    SoftmaxTransform,
    StickBreakingTransform,
)

__all__ = [
    "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
    "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
    "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftplusTransform",
    "TanhTransform", "SoftmaxTransform", "StackTransform", "StickBreakingTransform",
    "Transform", "identity_transform",
]
