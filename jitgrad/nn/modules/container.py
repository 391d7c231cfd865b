"""PyTorch's ``torch.nn.modules.container`` path: The containers. The classes are jitgrad.nn's
own (re-exported here)."""

from __future__ import annotations

from ..container import (  # noqa: F401 - re-exported
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)

__all__ = ["ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]
