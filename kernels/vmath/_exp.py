"""exp, expm1 and the extended-precision exp used by pow and erf.

Method (Cody-Waite + polynomial, as Cephes/Sleef): x = n*ln2 + r with n = rint(x/ln2),
|r| <= ln2/2, r computed with a two-part ln2 and FMAs; expm1(r) = r + r*r*P(r) with a
near-minimax P (tools/fit_vmath_coeffs.py); exp(x) = 2**n * (1 + expm1(r)). 2**n is applied as two
factors 2**(n//2) * 2**(n - n//2) built from exponent bits, so subnormal results are
rounded once and overflow lands on inf exactly where the true value rounds to inf.
Inputs are clamped just beyond the overflow/underflow thresholds (the clamps let NaN
through because both comparisons are false for NaN).
"""

from __future__ import annotations

from ._common import horner, impl
from ._llvm import as_float, as_int, fabs, fma, iadd, isar, ishl, isub, select


def build(K) -> dict:
    """exp, expm1 and helpers for the dtype described by the constants namespace ``K``."""
    F, ZERO, ONE, HALF, TWO = K.F, K.ZERO, K.ONE, K.HALF, K.TWO
    MAGIC, MAGIC_BITS, LOG2E = K.MAGIC, K.MAGIC_BITS, K.LOG2E
    LN2_HI, LN2_LO = K.LN2_HI, K.LN2_LO
    MANT, BIAS = K.MANT, K.BIAS
    LO, HI, M1_LO, TINY = K.EXP_LO, K.EXP_HI, K.EXPM1_LO, K.TINY
    expm1_poly = horner(F, K.EXP_P)

    @impl
    def reduce(x):
        """(n, r) with x = n*ln2 + r, |r| <= ln2/2 (x already clamped)."""
        t = fma(x, LOG2E, MAGIC)
        nf = t - MAGIC
        n = isub(as_int(t), MAGIC_BITS)
        r = fma(-nf, LN2_HI, x)
        r = fma(-nf, LN2_LO, r)
        return n, r

    @impl
    def scale(p, n):
        """p * 2**n without intermediate overflow or double rounding."""
        n1 = isar(n, 1)
        n2 = isub(n, n1)
        s1 = as_float(ishl(iadd(n1, BIAS), MANT), p)
        return p * s1 * as_float(ishl(iadd(n2, BIAS), MANT), p)

    @impl
    def clamp(x, lo, hi):
        x = select(x < lo, lo, x)
        return select(x > hi, hi, x)

    @impl
    def exp_core(x):
        """exp(x) for x already in [LO, HI] (or NaN)."""
        n, r = reduce(x)
        return scale(fma(r * r, expm1_poly(r), r) + ONE, n)

    @impl
    def exp(x):
        x = F(x)
        return exp_core(clamp(x, LO, HI))

    @impl
    def exp_dd(hi, lo):
        """exp(hi + lo) for |lo| <= ulp(hi): the low word joins the reduced argument."""
        hc = clamp(hi, LO, HI)
        n, r = reduce(hc)
        r = r + select(hc == hi, lo, ZERO)
        return scale(fma(r * r, expm1_poly(r), r) + ONE, n)

    @impl
    def expm1_core(x):
        """expm1(x) for x already in [M1_LO, HI] (or NaN) and |x| >= TINY."""
        n, r = reduce(x)
        e = fma(r * r, expm1_poly(r), r)
        # 2**n*(1+e) - 1 = 2*(s*e + (s - 1/2)) with s = 2**(n-1): one rounding, and
        # 2**(n-1) stays finite up to the overflow threshold.
        s = as_float(ishl(iadd(n, BIAS - 1), MANT), x)
        return TWO * fma(s, e, s - HALF)

    @impl
    def expm1(x):
        x = F(x)
        return select(fabs(x) < TINY, x, expm1_core(clamp(x, M1_LO, HI)))

    return {"exp": exp, "expm1": expm1, "exp_dd": exp_dd, "exp_core": exp_core,
            "expm1_core": expm1_core}
