"""PyTorch's ``torch.nn.modules.channelshuffle`` path: ``ChannelShuffle``. The classes are
jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..more_layers import (  # noqa: F401 - re-exported
    ChannelShuffle,
)

__all__ = ["ChannelShuffle"]
