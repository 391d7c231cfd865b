"""PyTorch's ``torch.nn.modules.instancenorm`` path. Instance normalisation: ``_InstanceNorm``,
``InstanceNorm1d/2d/3d`` and the lazy ones.

The classes are jitgrad.nn's own, re-exported here."""

from __future__ import annotations

from ..lazy import (  # noqa: F401 - re-exported
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
)
from ..normalization import (  # noqa: F401 - re-exported
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _InstanceNorm,
)

__all__ = ["LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "_InstanceNorm"]
