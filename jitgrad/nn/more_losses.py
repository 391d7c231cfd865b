"""Margin, ranking, embedding and likelihood losses -- PyTorch's formulas, written with
jitgrad's ops (so differentiable, compilable and on CUDA): ``margin_ranking_loss``,
``hinge_embedding_loss``, ``soft_margin_loss``, ``cosine_embedding_loss``,
``triplet_margin_loss``, ``triplet_margin_with_distance_loss``, ``multi_margin_loss``,
``multilabel_margin_loss``, ``multilabel_soft_margin_loss``, ``poisson_nll_loss``,
``gaussian_nll_loss``, ``ctc_loss`` (an op: ``jitgrad.ops.nnops.ctc``), and their modules.
Loaded on first use (``jitgrad.nn`` and
``jitgrad.nn.functional`` module ``__getattr__``)."""

from __future__ import annotations

import math

import numpy as np

from ..amp.autocast_mode import autocast_op
from ..autograd.grad_mode import no_grad
from ..devices import array_namespace
from ..ops.dispatch import as_tensor_arg
from ..ops.nnops.ctc import ctc_loss
from ..ops.nnops.reduction import reduction_arg
from ..ops.selection import where
from ..shapes import fmt_shape
from ..tensor import Tensor
from ..trace.effects import run_check
from .activation_functions import logsigmoid
from .loss import _Loss, _WeightedLoss
from .similarity import pairwise_distance

__all__ = [
    "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "cosine_embedding_loss",
    "triplet_margin_loss", "triplet_margin_with_distance_loss", "multi_margin_loss",
    "multilabel_margin_loss", "multilabel_soft_margin_loss", "poisson_nll_loss",
    "gaussian_nll_loss", "ctc_loss", "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss",
    "CosineEmbeddingLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss",
    "MultiMarginLoss", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "PoissonNLLLoss",
    "GaussianNLLLoss", "CTCLoss",
]


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _same_shape(name: str, a: Tensor, b: Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{name}: target size ({fmt_shape(b.shape)}) must be the same as "
                         f"input size ({fmt_shape(a.shape)})")


# ------------------------------------------------------------------------- functional
@autocast_op
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``: ``target`` (1 or -1) says which
    input should rank higher."""
    reduction = reduction_arg(size_average, reduce, reduction)
    if not (input1.dim() == input2.dim() == target.dim()):
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got "
            f"sizes: input1: {fmt_shape(input1.shape)}, input2: {fmt_shape(input2.shape)}, "
            f"target: {fmt_shape(target.shape)} ")
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


@autocast_op
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1 (a
    distance loss for similar / dissimilar pairs)."""
    reduction = reduction_arg(size_average, reduce, reduction)
    margin_clamp = (margin - input).clamp_min(0)
    zero = input * 0
    loss = where(target != 1, margin_clamp, zero) + where(target != -1, input, zero)
    return _reduce(loss, reduction)


@autocast_op
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))``: a two-class logistic loss on ``target`` in
    {1, -1}."""
    reduction = reduction_arg(size_average, reduce, reduction)
    _same_shape("soft_margin_loss", input, target)
    return _reduce((-input * target).exp().log1p(), reduction)


@autocast_op
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``1 - cos(input1, input2)`` where ``target`` is 1, ``max(0, cos - margin)`` where it
    is -1 (rows of 2-D inputs, or two vectors)."""
    reduction = reduction_arg(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() not in (1, 2):
        raise RuntimeError(f"cosine_embedding_loss: 1D target tensor expects 2D input tensors, "
                           f"but found inputs with sizes {fmt_shape(input1.shape)} and "
                           f"{fmt_shape(input2.shape)}.")
    if input1.dim() == 2 and target.dim() != 1:
        raise RuntimeError(f"cosine_embedding_loss: 1D target tensor expected, multi-target "
                           f"not supported, but got target of size {fmt_shape(target.shape)}")
    d = input1.dim() - 1
    eps = 1e-12
    prod_sum = (input1 * input2).sum(d)
    mag1 = (input1 * input1).sum(d) + eps
    mag2 = (input2 * input2).sum(d) + eps
    cos = prod_sum / (mag1 * mag2).sqrt()
    zero = cos * 0
    loss = where(target == 1, 1 - cos, zero) + where(target == -1, (cos - margin).clamp_min(0),
                                                     zero)
    return _reduce(loss, reduction)


def _triplet(d_pos: Tensor, d_neg: Tensor, margin: float, reduction: str) -> Tensor:
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


@autocast_op
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with ``d`` the
    ``p``-norm distance (``swap``: the smaller of the negative's two distances)."""
    reduction = reduction_arg(size_average, reduce, reduction)
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1 or dims[0] not in (1, 2):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {dims[0]}D, "
                           f"positive {dims[1]}D, and negative {dims[2]}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _triplet(d_pos, d_neg, margin, reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """:func:`triplet_margin_loss` with any ``distance_function`` (default: the Euclidean
    ``pairwise_distance``)."""
    reduction = reduction_arg(None, None, reduction)
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than "
                         f"0, got {margin} instead")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    return _triplet(d_pos, d_neg, margin, reduction)


def _class_targets(input: Tensor, target: Tensor, name: str) -> tuple[Tensor, Tensor, int]:
    """``input`` as (N, C) and ``target`` as (N,) class indices (their range is checked by
    the ``gather`` that picks them, eagerly and in compiled plans: no host read here)."""
    x = input if input.dim() == 2 else input.reshape(1, -1)
    t = target.reshape(-1)
    if input.dim() > 2 or x.shape[0] != t.shape[0]:
        raise RuntimeError(f"{name}: inconsistent target size: {fmt_shape(target.shape)} for "
                           f"input of size: {fmt_shape(input.shape)}")
    return x, t, x.shape[1]


@autocast_op
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average=None, reduce=None,
                      reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: per sample, ``sum_{j != y} max(0, margin - x[y] + x[j])^p /
    C`` (times ``weight[y]``)."""
    reduction = reduction_arg(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x, t, c = _class_targets(input, target, "multi_margin_loss")
    picked = x.gather(1, t.reshape(-1, 1))  # (raises for a target out of range)
    z = (margin - picked + x).clamp_min(0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.index_select(0, t).reshape(-1, 1)
    from ..creation import arange

    not_target = (arange(c, device=x.device) != t.reshape(-1, 1)).to(x.dtype)
    loss = (z * not_target).sum(1) / c
    if input.dim() < 2:
        loss = loss.reshape(target.shape) if target.dim() else loss.reshape(())
    return _reduce(loss, reduction)


@autocast_op
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss: ``target`` lists each sample's classes (indices, ended by the
    first -1); per sample ``sum_{j in y} sum_{k not in y} max(0, 1 - (x[j] - x[k])) / C``."""
    reduction = reduction_arg(size_average, reduce, reduction)
    if target.shape != input.shape or input.dim() > 2:
        raise RuntimeError(f"multilabel_margin_loss: inconsistent target size: "
                           f"{fmt_shape(target.shape)} for input of size: "
                           f"{fmt_shape(input.shape)}")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    tv = np.asarray(target.detach().cpu().numpy()).reshape(x.shape)
    n, c = x.shape
    is_target = np.zeros((n, c), dtype=bool)
    pairs = np.zeros((n, c), dtype=np.float64)  # how often x[j] is a sample's listed class
    for i in range(n):
        for j in tv[i]:
            if j < 0:
                break
            if j >= c:
                raise IndexError("target out of range")
            is_target[i, j] = True
            pairs[i, j] += 1
    dev = x.device
    from ..creation import tensor

    listed = tensor(pairs.astype(x.dtype.np), device=dev)  # (N, C): j's multiplicity
    others = tensor((~is_target).astype(x.dtype.np), device=dev)  # (N, C): k not a target
    # hinge[i, j, k] = max(0, 1 - x[i, j] + x[i, k])
    hinge = (1 - x.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0)
    loss = (hinge * listed.unsqueeze(2) * others.unsqueeze(1)).sum((1, 2)) / c
    if input.dim() < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average=None, reduce=None,
                                reduction: str = "mean") -> Tensor:
    """Multi-label logistic loss: per sample the mean over classes of
    ``-(y log sigmoid(x) + (1 - y) log sigmoid(-x))`` (times ``weight``)."""
    reduction = reduction_arg(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.dim() - 1) / input.shape[-1]
    return _reduce(loss, reduction)


@autocast_op
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """Poisson negative log-likelihood of ``target`` counts: ``exp(input) - target * input``
    (``log_input``), else ``input - target * log(input + eps)``; ``full`` adds Stirling's
    term ``target * log(target) - target + log(2 pi target) / 2`` where ``target > 1``."""
    reduction = reduction_arg(size_average, reduce, reduction)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        safe = where(target > 1, target, 1.0)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def _any_negative(a) -> bool:
    return bool(array_namespace(a).any(a < 0))


def _negative_var() -> Exception:
    return ValueError("var has negative entry/entries")


def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """Gaussian negative log-likelihood of ``target`` under mean ``input`` and variance
    ``var`` (clamped to ``eps`` without a gradient there, as PyTorch's): ``(log(var) +
    (input - target)^2 / var) / 2`` (``full``: plus ``log(2 pi) / 2``)."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = input.new_full(input.shape, var)
    var = as_tensor_arg(var, "var")
    run_check(var.detach(), _any_negative, _negative_var, "gaussian_nll_loss's var check")
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:  # homoscedastic: one variance per row
            var = var.unsqueeze(-1)
        elif not (input.dim() == var.dim() and
                  sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    with no_grad():
        floor = (var.detach().clamp_min(eps) - var.detach())
    var = var + floor  # max(var, eps), the gradient of var kept where var >= eps
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ---------------------------------------------------------------------------- modules
class MarginRankingLoss(_Loss):
    """:func:`margin_ranking_loss` as a module."""

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return margin_ranking_loss(input1, input2, target, self.margin,
                                   reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """:func:`hinge_embedding_loss` as a module."""

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """:func:`soft_margin_loss` as a module."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return soft_margin_loss(input, target, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """:func:`cosine_embedding_loss` as a module."""

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return cosine_embedding_loss(input1, input2, target, self.margin,
                                     reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """:func:`triplet_margin_loss` as a module."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                   eps=self.eps, swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """:func:`triplet_margin_with_distance_loss` as a module."""

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        self.distance_function = distance_function
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """:func:`multi_margin_loss` as a module."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{weight.dim()}D instead")
        self.p, self.margin = p, margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                 weight=self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """:func:`multilabel_margin_loss` as a module."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """:func:`multilabel_soft_margin_loss` as a module."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return multilabel_soft_margin_loss(input, target, weight=self.weight,
                                           reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """:func:`poisson_nll_loss` as a module."""

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None,
                 eps: float = 1e-8, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """:func:`gaussian_nll_loss` as a module."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6,
                 reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Tensor, target: Tensor, var) -> Tensor:
        return gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                 reduction=self.reduction)


class CTCLoss(_Loss):
    """:func:`ctc_loss` as a module."""

    def __init__(self, blank: int = 0, reduction: str = "mean",
                 zero_infinity: bool = False) -> None:
        super().__init__(None, None, reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths,
                target_lengths) -> Tensor:
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                        self.reduction, self.zero_infinity)
