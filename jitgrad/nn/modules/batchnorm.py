"""PyTorch's ``torch.nn.modules.batchnorm`` path. Batch normalisation: the bases ``_NormBase``
and ``_BatchNorm`` (subclass ``_BatchNorm`` and give ``_check_input_dim``),
``BatchNorm1d/2d/3d``, the lazy ones and ``SyncBatchNorm``.

The classes are jitgrad.nn's own, re-exported here."""

from __future__ import annotations

from ..lazy import (  # noqa: F401 - re-exported
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    _LazyNormBase,
)
from ..normalization import (  # noqa: F401 - re-exported
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    _BatchNorm,
    _NormBase,
)
from ..sync_batchnorm import (  # noqa: F401 - re-exported
    SyncBatchNorm,
)

__all__ = ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "_LazyNormBase",
           "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "_BatchNorm", "_NormBase",
           "SyncBatchNorm"]
