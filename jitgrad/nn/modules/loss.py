"""PyTorch's ``torch.nn.modules.loss`` path. The losses and their bases ``_Loss``
(``reduction``) and ``_WeightedLoss`` (and a ``weight`` buffer), for user losses too.

The classes are jitgrad.nn's own, re-exported here."""

from __future__ import annotations

from ..loss import (  # noqa: F401 - re-exported
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    NLLLoss2d,
    SmoothL1Loss,
    _Loss,
    _WeightedLoss,
)
from ..more_losses import (  # noqa: F401 - re-exported
    CosineEmbeddingLoss,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)

__all__ = ["BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss",
           "L1Loss", "MSELoss", "NLLLoss", "NLLLoss2d", "SmoothL1Loss", "_Loss",
           "_WeightedLoss", "CTCLoss", "CosineEmbeddingLoss", "GaussianNLLLoss",
           "HingeEmbeddingLoss", "MarginRankingLoss", "MultiLabelMarginLoss",
           "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss",
           "SoftMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss"]
