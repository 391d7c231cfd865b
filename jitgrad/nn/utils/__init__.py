"""``jitgrad.nn.utils``: gradient clipping (``clip_grad_norm_``, ``clip_grad_value_``...),
as ``torch.nn.utils``."""

from .clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_"]
