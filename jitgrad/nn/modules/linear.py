"""PyTorch's ``torch.nn.modules.linear`` path: ``Identity``, ``Linear``, ``Bilinear``,
``LazyLinear``. The classes are jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..layers import (  # noqa: F401 - re-exported
    Identity,
    Linear,
)
from ..lazy import (  # noqa: F401 - re-exported
    LazyLinear,
)
from ..more_layers import (  # noqa: F401 - re-exported
    Bilinear,
)

__all__ = ["Identity", "Linear", "LazyLinear", "Bilinear"]
