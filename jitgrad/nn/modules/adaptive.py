"""PyTorch's ``torch.nn.modules.adaptive`` path: ``AdaptiveLogSoftmaxWithLoss`` (jitgrad.nn's
own class, re-exported here)."""

from __future__ import annotations

from ..adaptive import AdaptiveLogSoftmaxWithLoss, _ASMoutput  # noqa: F401 - re-exported

__all__ = ["AdaptiveLogSoftmaxWithLoss"]
