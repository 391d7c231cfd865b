"""Compilation options of the math implementations and polynomial builders."""

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


#: Polynomials with at least this many coefficients are evaluated by Estrin's scheme.
ESTRIN_MIN_TERMS = 10


def horner(ftype: type, coeffs: Sequence[float]) -> Callable:
    """Jitted ``p(x) = coeffs[0] + coeffs[1]*x + ...`` in ``ftype``.

    Short polynomials use Horner's rule (one FMA per coefficient, the fewest operations: the
    independent lanes and loop iterations hide its serial latency). From
    :data:`ESTRIN_MIN_TERMS` coefficients (float64 exp's 11) the serial chain is longer than
    what the out-of-order window of a large fused loop covers, and Estrin's scheme (pairs,
    then powers x**2, x**4...: about half the depth, ~3 more multiplies) is faster: 10% on the
    float64 W2 kernel, 4-8% on float64 tanh/sigmoid loops alone (2-core Zen 3). The rounding
    differs from Horner's by far less than the functions' ulp bounds (the sweeps check them).
    """
    names = [f"c{k}" for k in range(len(coeffs))]
    if len(coeffs) >= ESTRIN_MIN_TERMS:
        lines = _estrin(names)
    else:
        expr = names[-1]
        for name in reversed(names[:-1]):
            expr = f"fma({expr}, x, {name})"
        lines = [f"    return {expr}"]
    namespace = {"fma": fma, **{n: ftype(c) for n, c in zip(names, coeffs)}}
    src = "def poly(x):\n" + "\n".join(lines) + "\n"
    exec(src, namespace)  # noqa: S102 - trusted, built here
    namespace["poly"].__jg_source__ = src  # for _flatten (exec'd code has no source file)
    return impl(namespace["poly"])


def _estrin(names: list) -> list:
    """Source lines of Estrin's scheme over coefficient names (lowest degree first)."""
    lines = []
    terms = []
    for k in range(0, len(names), 2):  # degree-1 pairs: c[k] + c[k+1]*x
        if k + 1 < len(names):
            lines.append(f"    q0_{k // 2} = fma({names[k + 1]}, x, {names[k]})")
            terms.append(f"q0_{k // 2}")
        else:
            terms.append(names[k])
    power, level = "x", 0
    while len(terms) > 1:
        lines.append(f"    x{2 ** (level + 1)} = {power} * {power}")
        power = f"x{2 ** (level + 1)}"
        level += 1
        nxt = []
        for k in range(0, len(terms), 2):
            if k + 1 < len(terms):
                lines.append(f"    q{level}_{k // 2} = fma({terms[k + 1]}, {power}, {terms[k]})")
                nxt.append(f"q{level}_{k // 2}")
            else:
                nxt.append(terms[k])
        terms = nxt
    lines.append(f"    return {terms[0]}")
    return lines
