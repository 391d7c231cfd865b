"""PyTorch's ``torch.nn.modules.flatten`` path: ``Flatten`` and ``Unflatten``. The classes are
jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..layers import (  # noqa: F401 - re-exported
    Flatten,
)
from ..shape_layers import (  # noqa: F401 - re-exported
    Unflatten,
)

__all__ = ["Flatten", "Unflatten"]
