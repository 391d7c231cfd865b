"""The op registry and the eager implementation of every op (see :mod:`.registry`)."""

from . import (  # noqa: F401 - registers ops
    conv,  # noqa: F401
    elementwise,
    linalg,
    losses,
    methods,  # noqa: F401 - attaches Tensor methods
    movement,
    nnops,  # noqa: F401 - nn ops (jitgrad.nn.functional) and optimizer methods
    reduce,
)
from .registry import REGISTRY, OpDef, get

__all__ = ["REGISTRY", "OpDef", "get"]
