"""The op registry and the eager implementation of every op (see :mod:`.registry`)."""

from . import (  # noqa: F401 - registers ops
    arrangements,
    contractions,
    conv,
    counting,
    decompositions,
    diagonals,
    elementwise,
    linalg,
    losses,
    matrix_functions,
    methods,
    movement,
    nan_reductions,
    nnops,  # nn ops (jitgrad.nn.functional) and optimizer methods
    norms,
    padding,
    picking,
    pointwise_composites,
    products,
    reduce,
    reorder,
    rounding,
    sampling_and_sets,
    scans,
    scatter_reduce,
    scattering,
    sorting,
    special_functions,
    statistics,
    transcendental,
    triangular,
    value_tests,
)
from .registry import REGISTRY, OpDef, get

# last, once every op module has declared its ops: the Tensor methods of ops are derived
# from the registry
methods.install()

__all__ = ["REGISTRY", "OpDef", "get"]
