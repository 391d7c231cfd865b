"""PyTorch's ``torch.nn.modules.distance`` path: ``PairwiseDistance`` and ``CosineSimilarity``.
The classes are jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..similarity import (  # noqa: F401 - re-exported
    CosineSimilarity,
    PairwiseDistance,
)

__all__ = ["CosineSimilarity", "PairwiseDistance"]
