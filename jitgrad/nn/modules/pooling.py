"""PyTorch's ``torch.nn.modules.pooling`` path: The pooling layers. The classes are
jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..adaptive_max_pool import (  # noqa: F401 - re-exported
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
)
from ..layers import (  # noqa: F401 - re-exported
    AdaptiveAvgPool2d,
    AvgPool2d,
    MaxPool2d,
)
from ..one_dimensional import (  # noqa: F401 - re-exported
    AvgPool1d,
    MaxPool1d,
)
from ..pooling_extra import (  # noqa: F401 - re-exported
    AdaptiveAvgPool1d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
from ..three_dimensional import (  # noqa: F401 - re-exported
    AdaptiveAvgPool3d,
    AvgPool3d,
    MaxPool3d,
)

__all__ = ["AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
           "AdaptiveAvgPool2d", "AvgPool2d", "MaxPool2d", "AvgPool1d", "MaxPool1d",
           "AdaptiveAvgPool1d", "LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d",
           "MaxUnpool2d", "MaxUnpool3d", "AdaptiveAvgPool3d", "AvgPool3d", "MaxPool3d"]
