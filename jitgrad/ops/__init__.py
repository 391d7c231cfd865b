"""The op registry and the eager implementation of every op (see :mod:`.registry`)."""

from . import (  # noqa: F401 - registers ops
    arrangements,
    bessel_polynomials,
    binary_composites,
    bitwise,
    contractions,
    conv,
    counting,
    decompositions,
    diagonals,
    elementwise,
    float_bits,
    index_updates,
    integer_ops,
    integration,
    linalg,
    losses,
    matrix_builders,
    matrix_functions,
    method_aliases,
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
    renorm,
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
    truth_reductions,
    unfold_view,
    value_tests,
    windows,
)
from .registry import REGISTRY, OpDef, get

# last, once every op module has declared its ops: the Tensor methods of ops are derived
# from the registry
methods.install()

__all__ = ["REGISTRY", "OpDef", "get"]
