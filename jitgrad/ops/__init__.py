"""The op registry and the eager implementation of every op (see :mod:`.registry`)."""

from . import (  # noqa: F401 - registers ops
    conv,
    elementwise,
    linalg,
    losses,
    methods,
    movement,
    nnops,  # nn ops (jitgrad.nn.functional) and optimizer methods
    norms,
    padding,
    reduce,
    sorting,
    triangular,
)
from .registry import REGISTRY, OpDef, get

# last, once every op module has declared its ops: the Tensor methods of ops are derived
# from the registry
methods.install()

__all__ = ["REGISTRY", "OpDef", "get"]
