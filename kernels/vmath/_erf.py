"""erf.

Method: two branch-free regions, both computed, one selected.
|x| < 1: erf(x) = x + x*R(x*x) (the leading x is exact, R ~ 2/sqrt(pi) - 1 is small).
|x| >= 1: erf(|x|) = 1 - exp(-x*x)*G(|x|) with G(a) = erfc(a)*exp(a*a), a polynomial in
a - mid on each piece of [1, ERF_ONE] (float64 uses 4 pieces, coefficients picked per lane
with selects). Only the absolute error of exp(-x*x)*G matters next to 1, so the rounding
of x*x is harmless. |x| is clamped at ERF_ONE, beyond which erf rounds to +-1.
"""

from __future__ import annotations

from ._common import horner, impl
from ._llvm import copysign, fabs, fma, select


def _piecewise_horner(ftype, edges, mids, tables):
    """Jitted p(a): the polynomial of the piece containing a, evaluated at a - mid."""
    if len(tables) == 1:
        poly = horner(ftype, tables[0])
        mid = ftype(mids[0])

        def single(a):
            return poly(a - mid)

        return impl(single)
    ns = {"fma": fma, "select": select}
    inner = edges[1:-1]
    conds = [f"a < e{j}" for j in range(len(inner))]
    ns.update({f"e{j}": ftype(e) for j, e in enumerate(inner)})

    def pick(values, prefix):
        for p, v in enumerate(values):
            ns[f"{prefix}_{p}"] = ftype(v)
        expr = f"{prefix}_{len(values) - 1}"
        for p in reversed(range(len(values) - 1)):
            expr = f"select(in{p}, {prefix}_{p}, {expr})"
        return expr

    lines = ["def poly(a):"]
    lines += [f"    in{j} = {c}" for j, c in enumerate(conds)]
    lines.append(f"    u = a - {pick(mids, 'm')}")
    degree = len(tables[0]) - 1
    lines.append(f"    r = {pick([t[degree] for t in tables], f'c{degree}')}")
    for k in reversed(range(degree)):
        lines.append(f"    r = fma(r, u, {pick([t[k] for t in tables], f'c{k}')})")
    lines.append("    return r")
    src = "\n".join(lines) + "\n"
    exec(src, ns)  # noqa: S102 - trusted, built here
    ns["poly"].__jg_source__ = src  # for _flatten (exec'd code has no source file)
    return impl(ns["poly"])


def build(K, exp) -> dict:
    """erf for the dtype described by ``K``, using that dtype's ``exp``."""
    F, ONE = K.F, K.ONE
    SPLIT, ERF_ONE = F(K.ERF_EDGES[0]), K.ERF_ONE
    small = horner(F, K.ERF_R)
    large = _piecewise_horner(F, K.ERF_EDGES, K.ERF_MIDS, K.ERF_G)

    @impl
    def erf(x):
        x = F(x)
        a = fabs(x)
        near = fma(x, small(x * x), x)
        b = select(a > ERF_ONE, ERF_ONE, a)
        b = select(b < SPLIT, SPLIT, b)
        far = copysign(ONE - exp(-(b * b)) * large(b), x)
        return select(a < SPLIT, near, far)

    return {"erf": erf}
