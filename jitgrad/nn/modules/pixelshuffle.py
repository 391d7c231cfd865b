"""PyTorch's ``torch.nn.modules.pixelshuffle`` path: ``PixelShuffle`` and ``PixelUnshuffle``.
The classes are jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..shape_layers import (  # noqa: F401 - re-exported
    PixelShuffle,
    PixelUnshuffle,
)

__all__ = ["PixelShuffle", "PixelUnshuffle"]
