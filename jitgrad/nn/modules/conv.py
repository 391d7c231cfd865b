"""PyTorch's ``torch.nn.modules.conv`` path. The convolutions and their base ``_ConvNd``
(jitgrad's ``_ConvBase``: ``isinstance(m, _ConvNd)`` holds for every convolution layer,
transposed ones too; a subclass may call ``_ConvNd.__init__`` with PyTorch's arguments and
use ``_conv_forward``), the transposed ones' base ``_ConvTransposeNd`` and the lazy ones.

The classes are jitgrad.nn's own, re-exported here."""

from __future__ import annotations

from ..conv_transpose import (  # noqa: F401 - re-exported
    ConvTranspose1d,
    ConvTranspose2d,
)
from ..conv_transpose import (
    _ConvTransposeBase as _ConvTransposeNd,
)
from ..layers import (  # noqa: F401 - re-exported
    Conv2d,
)
from ..layers import (
    _ConvBase as _ConvNd,
)
from ..lazy import (  # noqa: F401 - re-exported
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
)
from ..one_dimensional import (  # noqa: F401 - re-exported
    Conv1d,
)
from ..three_dimensional import (  # noqa: F401 - re-exported
    Conv3d,
    ConvTranspose3d,
)

__all__ = ["ConvTranspose1d", "ConvTranspose2d", "_ConvTransposeNd", "Conv2d",
           "_ConvNd", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "Conv1d", "Conv3d",
           "ConvTranspose3d"]
