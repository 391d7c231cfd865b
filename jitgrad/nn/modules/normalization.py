"""PyTorch's ``torch.nn.modules.normalization`` path. ``LayerNorm``, ``GroupNorm``,
``LocalResponseNorm``, ``RMSNorm``.

The classes are jitgrad.nn's own, re-exported here."""

from __future__ import annotations

from ..local_response_norm import (  # noqa: F401 - re-exported
    LocalResponseNorm,
)
from ..more_layers import (  # noqa: F401 - re-exported
    RMSNorm,
)
from ..normalization import (  # noqa: F401 - re-exported
    GroupNorm,
    LayerNorm,
)

__all__ = ["LocalResponseNorm", "RMSNorm", "GroupNorm", "LayerNorm"]
