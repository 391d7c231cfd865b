"""Automatic mixed precision (PyTorch's ``torch.amp``): :class:`autocast` runs listed
functions in float16 (or float32) and :class:`GradScaler` scales the loss so float16
gradients do not underflow. See :mod:`jitgrad.amp.autocast_mode` and
:mod:`jitgrad.amp.policy`."""

from .autocast_mode import (
    autocast,
    custom_bwd,
    custom_fwd,
    is_autocast_available,
)
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available"]
