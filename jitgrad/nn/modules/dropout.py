"""PyTorch's ``torch.nn.modules.dropout`` path: The dropout layers. The classes are
jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..activation import (  # noqa: F401 - re-exported
    Dropout,
    Dropout1d,
    Dropout2d,
)
from ..more_layers import (  # noqa: F401 - re-exported
    Dropout3d,
)
from ..random_activations import (  # noqa: F401 - re-exported
    AlphaDropout,
    FeatureAlphaDropout,
)

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout"]
