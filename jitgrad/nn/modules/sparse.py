"""PyTorch's ``torch.nn.modules.sparse`` path: ``Embedding`` and ``EmbeddingBag``. The classes
are jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..embedding_bag import (  # noqa: F401 - re-exported
    EmbeddingBag,
)
from ..layers import (  # noqa: F401 - re-exported
    Embedding,
)

__all__ = ["EmbeddingBag", "Embedding"]
