"""Norm-based functions written with jitgrad's ops: ``normalize``, ``cosine_similarity``,
``pairwise_distance`` (PyTorch's formulas, so their values and gradients; differentiable,
compilable, on every device)."""

from __future__ import annotations

from ..amp.autocast_mode import autocast_op
from ..ops.dispatch import as_tensor_arg
from ..shapes import broadcast_sizes
from ..tensor import Tensor
from .module import Module

__all__ = ["normalize", "cosine_similarity", "pairwise_distance", "CosineSimilarity",
           "PairwiseDistance"]


@autocast_op
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out=None) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim``."""
    denom = input.norm(p, dim, keepdim=True).clamp(min=eps)
    res = input / denom
    return res if out is None else out.copy_(res)


@autocast_op
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between ``x1`` and ``x2`` along ``dim`` (broadcast), each
    scaled by ``1 / max(||x||, eps)`` first (PyTorch's formula: no overflow, ``|cos| <= 1``)."""
    x1, x2 = as_tensor_arg(x1, "x1"), as_tensor_arg(x2, "x2")
    if not (x1.dtype.is_floating_point or x2.dtype.is_floating_point):
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is "
                           f"{x1.dtype.tensor_type[:-6]}")
    shape = broadcast_sizes(tuple(x1.shape), tuple(x2.shape))
    if tuple(x1.shape) != shape:
        x1 = x1.expand(*shape)
    if tuple(x2.shape) != shape:
        x2 = x2.expand(*shape)
    n1 = x1.norm(2, dim, keepdim=True).clamp(min=eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim."""
    x1, x2 = as_tensor_arg(x1, "x1"), as_tensor_arg(x2, "x2")
    dim = -1 if max(x1.dim(), x2.dim()) > 0 else None
    diff = x1 - x2 + eps
    if dim is None:
        return diff.abs()
    return diff.norm(p, dim, keepdim=keepdim)


class CosineSimilarity(Module):
    """:func:`cosine_similarity` along ``dim``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """:func:`pairwise_distance` over the last dim."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
