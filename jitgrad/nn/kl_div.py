"""``kl_div``: the Kullback-Leibler divergence loss, written with jitgrad's ops."""

from __future__ import annotations

import warnings

from ..amp.autocast_mode import autocast_op
from ..ops.nnops.reduction import reduction_arg
from ..ops.selection import where
from ..tensor import Tensor

__all__ = ["kl_div"]


@autocast_op
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """``target * (log(target) - input)`` element-wise (``input`` holds log-probabilities;
    0 where ``target`` is 0), or ``exp(target) * (target - input)`` with ``log_target``,
    reduced by ``reduction``: "mean" (over every element, with PyTorch's warning),
    "batchmean" (the sum over the batch size: the divergence's definition), "sum", "none"."""
    if reduction != "batchmean" or size_average is not None or reduce is not None:
        reduction = reduction_arg(size_average, reduce, reduction)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        safe = where(target > 0, target, 1.0)  # log(1) = 0 where target is 0
        loss = target * safe.log() - target * input
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() else loss.sum()
    # (stacklevel 3: the autocast wrapper in between, so the warning names the caller line)
    warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                  "support size.'batchmean' divides only by the batch size, and aligns with "
                  "the KL div math definition.'mean' will be changed to behave the same as "
                  "'batchmean' in the next major release.", UserWarning, stacklevel=3)
    return loss.mean()
