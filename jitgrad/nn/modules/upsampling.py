"""PyTorch's ``torch.nn.modules.upsampling`` path. ``Upsample``, ``UpsamplingNearest2d``,
``UpsamplingBilinear2d``.

The classes are jitgrad.nn's own, re-exported here."""

from __future__ import annotations

from ..interpolation import (  # noqa: F401 - re-exported
    Upsample,
)
from ..more_layers import (  # noqa: F401 - re-exported
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
