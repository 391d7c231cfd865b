"""The op registry and the eager implementation of every op (see :mod:`.registry`)."""

from . import (  # noqa: F401 - registers ops
    elementwise,
    linalg,
    losses,
    methods,  # noqa: F401 - attaches Tensor methods
    movement,
    reduce,
)
from .registry import REGISTRY, OpDef, get

__all__ = ["REGISTRY", "OpDef", "get"]
