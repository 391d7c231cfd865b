"""PyTorch's ``torch.nn.modules.transformer`` path: The transformer layers. The classes are
jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..transformer import (  # noqa: F401 - re-exported
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = ["Transformer", "TransformerDecoder", "TransformerDecoderLayer",
           "TransformerEncoder", "TransformerEncoderLayer"]
