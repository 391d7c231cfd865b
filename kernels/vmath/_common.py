"""Compilation options of the math implementations and a Horner-polynomial builder."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from numba import njit

from ._llvm import fma

# Every implementation is compiled on its own with these options and reaches the caller's
# loop through LLVM inlining, which keeps these per-instruction semantics whatever the
# caller's flags are. forceinline: LLVM "alwaysinline", else large bodies (pow, erf) stay
# calls and the loop does not vectorise. fastmath=False: each FMA is explicit, so range
# reductions and error-free transformations keep their exact rounding. error_model="numpy":
# x/0 is inf, not a ZeroDivisionError branch. All three are set explicitly because a callee
# inherits unset options from its caller.
IMPL_OPTIONS = {"fastmath": False, "error_model": "numpy", "forceinline": True}

impl = njit(**IMPL_OPTIONS)


def horner(ftype: type, coeffs: Sequence[float]) -> Callable:
    """Jitted ``p(x) = coeffs[0] + coeffs[1]*x + ...`` in ``ftype``, one FMA per coefficient.

    Horner's rule has the fewest operations; in a vectorised loop the independent lanes and
    iterations hide its serial latency, so it beats Estrin on throughput.
    """
    names = [f"c{k}" for k in range(len(coeffs))]
    expr = names[-1]
    for name in reversed(names[:-1]):
        expr = f"fma({expr}, x, {name})"
    namespace = {"fma": fma, **{n: ftype(c) for n, c in zip(names, coeffs)}}
    src = f"def poly(x):\n    return {expr}\n"
    exec(src, namespace)  # noqa: S102 - trusted, built here
    namespace["poly"].__jg_source__ = src  # for _flatten (exec'd code has no source file)
    return impl(namespace["poly"])
