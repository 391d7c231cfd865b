"""log, log1p and the double-word log used by pow.

Method: x = 2**k * m with m in [sqrt(1/2), sqrt(2)) taken from the exponent bits (musl's
offset trick, subnormals lifted first), f = m - 1 exactly, log(x) = k*ln2 + log1p(f).
float32: log1p(f) = f - f*f/2 + f**3*P(f), no division. float64: s = f/(2+f),
log1p(f) = f - f*f/2 + s*(f*f/2 + s*s*Q(s*s)) (FreeBSD's form; a polynomial in f would need
~40 terms). log1p adds the rounding error of u = 1 + x back as c/u (Goldberg's correction).
Special inputs are patched with selects at the end.
"""

from __future__ import annotations

import numpy as np

from ._common import horner, impl
from ._llvm import (
    as_float,
    as_int,
    fabs,
    fma,
    iadd,
    iand,
    isar,
    isub,
    select,
    small_int_to_float,
)


def build(K) -> dict:
    """log, log1p and helpers for the dtype described by the constants namespace ``K``."""
    F, ZERO, HALF, ONE, TWO, INF, NAN = K.F, K.ZERO, K.HALF, K.ONE, K.TWO, K.INF, K.NAN
    MANT, MANT_MASK, BIAS, F_MANT = K.MANT, K.MANT_MASK, K.BIAS, K.F(K.MANT)
    OFFSET, SQRT_HALF_BITS = K.ONE_BITS - K.SQRT_HALF_BITS, K.SQRT_HALF_BITS
    MIN_NORMAL, SUBNORMAL_SCALE = K.MIN_NORMAL, K.SUBNORMAL_SCALE
    LN2_HI, LN2_LO, TINY = K.LN2_HI, K.LN2_LO, K.TINY
    TT_HI, TT_LO = K.TWO_THIRDS_HI, K.TWO_THIRDS_LO
    logdd_tail = horner(F, K.LOGDD_T)

    @impl
    def decompose(x):
        """(k, f) with x = 2**k * (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), for x > 0."""
        sub = x < MIN_NORMAL
        ix = iadd(as_int(select(sub, x * SUBNORMAL_SCALE, x)), OFFSET)
        k = small_int_to_float(isub(isar(ix, MANT), BIAS), x) - select(sub, F_MANT, ZERO)
        m = as_float(iadd(iand(ix, MANT_MASK), SQRT_HALF_BITS), x)
        return k, m - ONE

    if K.F is np.float32:
        log_poly = horner(F, K.LOG_P)

        @impl
        def log1p_reduced(f):
            """y with log1p(f) = f + y, |f| <= sqrt(2) - 1."""
            z = f * f
            return fma(z * f, log_poly(f), -HALF * z)

    else:
        log_q = horner(F, K.LOG_Q)

        @impl
        def log1p_reduced(f):
            """y with log1p(f) = f + y, |f| <= sqrt(2) - 1."""
            s = f / (TWO + f)
            z = s * s
            hfsq = HALF * f * f
            return s * fma(z, log_q(z), hfsq) - hfsq

    @impl
    def assemble(k, f, y):
        """k*ln2 + f + y with the large parts added last."""
        return fma(k, LN2_HI, f + fma(k, LN2_LO, y))

    @impl
    def log(x):
        x = F(x)
        k, f = decompose(x)
        res = assemble(k, f, log1p_reduced(f))
        res = select(x == INF, x, res)
        res = select(x == ZERO, -INF, res)
        return select(x >= ZERO, res, select(x != x, x, NAN))

    @impl
    def log1p_core(x):
        """log1p for finite x > -1 (no special cases)."""
        u = ONE + x
        k, f = decompose(u)
        # u = 1 + x rounded; c = (1 + x) - u exactly, added back as log(1 + c/u) ~ c/u.
        c = select(k > ZERO, ONE - (u - x), x - (u - ONE))
        return assemble(k, f, log1p_reduced(f) + c / u)

    @impl
    def log1p(x):
        x = F(x)
        res = log1p_core(x)
        res = select(x == INF, x, res)
        res = select(x == -ONE, -INF, res)
        res = select(fabs(x) < TINY, x, res)
        return select(x >= -ONE, res, select(x != x, x, NAN))

    @impl
    def log_dd(x):
        """(hi, lo) with hi + lo = log(x), relative error < 2**-(p+8) for p-bit floats
        (measured 2**-32.8 float32, 2**-61.5 float64), for x > 0 finite.

        log1p(f) = 2*atanh(s), s = f/(2+f) = 2s + (2/3)s**3 + s**5*T(s*s); s, s*s, s**3 and
        (2/3)s**3 are carried as double words, only the s**5 tail in working precision.
        """
        k, f = decompose(x)
        d = TWO + f
        d_lo = (TWO - d) + f
        inv_d = ONE / d
        s = f * inv_d
        s_lo = (fma(-s, d, f) - s * d_lo) * inv_d  # exact residual: s + s_lo = f/d
        z = s * s
        z_lo = fma(s, s, -z) + TWO * s * s_lo
        c = s * z
        c_lo = fma(s, z, -c) + fma(s, z_lo, s_lo * z)
        t = c * TT_HI
        t_lo = fma(c, TT_HI, -t) + fma(c, TT_LO, c_lo * TT_HI)
        a = TWO * s
        u = a + t
        lo = ((a - u) + t) + (TWO * s_lo + t_lo + c * z * logdd_tail(z))
        kh = k * LN2_HI
        hi = kh + u
        bb = hi - kh
        lo = ((kh - (hi - bb)) + (u - bb)) + fma(k, LN2_LO, lo)
        res = hi + lo
        return res, lo - (res - hi)

    return {"log": log, "log1p": log1p, "log1p_core": log1p_core, "log_dd": log_dd}
