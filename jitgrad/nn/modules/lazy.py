"""PyTorch's ``torch.nn.modules.lazy`` path: ``LazyModuleMixin``, the base of the lazy modules.
The classes are jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..lazy import (  # noqa: F401 - re-exported
    LazyModuleMixin,
)

__all__ = ["LazyModuleMixin"]
