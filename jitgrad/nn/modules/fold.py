"""PyTorch's ``torch.nn.modules.fold`` path: ``Fold`` and ``Unfold``. The classes are
jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..more_layers import (  # noqa: F401 - re-exported
    Fold,
    Unfold,
)

__all__ = ["Fold", "Unfold"]
