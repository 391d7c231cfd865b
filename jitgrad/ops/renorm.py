"""``renorm``: each slice along a dim whose p-norm exceeds ``maxnorm`` scaled down to it,
PyTorch's ``x * (maxnorm / (norm + 1e-7))`` where ``norm > maxnorm``. Written with ops
(the norm a ``vector_norm`` over the other dims), so the gradient is PyTorch's
``renorm_backward``, the norm's dependence on the input included."""

from __future__ import annotations

from ..shapes import wrap_dim
from ..tensor import Tensor
from .api import api
from .dispatch import as_tensor_arg
from .norms import VECTOR_NORM, vector_norm
from .selection import WHERE, where

__all__ = ["renorm"]


@api(VECTOR_NORM, WHERE, method="renorm", inplace="renorm_", export="renorm")
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """``input`` with every sub-tensor ``input.select(dim, i)`` of p-norm above
    ``maxnorm`` rescaled to that norm (``p > 0``; ``inf`` allowed)."""
    input = as_tensor_arg(input)
    if input.dim() < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} "
                           f"dimensions")
    if not p > 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    d = wrap_dim(dim, input.dim())
    others = tuple(i for i in range(input.dim()) if i != d)
    norm = vector_norm(input, p, dim=others, keepdim=True)
    factor = where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return input * factor
