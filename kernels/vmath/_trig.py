"""sin and cos.

Method: x = q*pi/2 + r with q = rint(x*2/pi) and r from a 4-part pi/2 applied with FMAs
(Cody-Waite; each product is exact inside the FMA, so r keeps its relative accuracy even
when x is close to a multiple of pi/2). sin(r) = r + r**3*S(r*r) and
cos(r) = 1 - r*r/2 + r**4*C(r*r) on |r| <= pi/4; the quadrant q picks one and its sign.
Accurate while q fits the magic-number rounding: |x| < 2**(mantissa bits - 1) * pi/2
(6.6e6 for float32, 3.5e15 for float64). Beyond that a Payne-Hanek reduction would be
needed; it takes a table gather that would stop vectorisation, so larger |x| give a value
in [-1, 1] that is not sin(x) (documented in docs/kernel_math.md).
"""

from __future__ import annotations

from ._common import horner, impl
from ._llvm import as_float, as_int, fabs, fma, iadd, iand, ishl, isub, ixor, select


def build(K) -> dict:
    """sin and cos for the dtype described by the constants namespace ``K``."""
    F, ZERO, HALF, ONE = K.F, K.ZERO, K.HALF, K.ONE
    MAGIC, MAGIC_BITS = K.MAGIC, K.MAGIC_BITS
    TWO_OVER_PI, TWO_OVER_PI_LO = K.TWO_OVER_PI, K.TWO_OVER_PI_LO
    C1, C2, C3, C4 = K.PIO2
    SIGN_SHIFT = K.BITS - 2  # moves bit 1 of q onto the sign bit
    R_MAX = F(0.8)  # a little above pi/4, where the polynomials are still accurate
    TINY = K.SIN_TINY
    sin_poly = horner(F, K.SIN_P)
    cos_poly = horner(F, K.COS_P)

    @impl
    def reduce(x):
        t = fma(x, TWO_OVER_PI, MAGIC)
        qf = t - MAGIC
        # TWO_OVER_PI is off by up to half an ulp, which for large |x| can round x*2/pi to
        # the wrong integer; the exact residual (plus the low part of 2/pi) corrects it.
        frac = fma(x, TWO_OVER_PI, -qf) + x * TWO_OVER_PI_LO
        up, down = frac > HALF, frac < -HALF
        qf = qf + select(up, ONE, ZERO) - select(down, ONE, ZERO)
        q = isub(as_int(qf + MAGIC), MAGIC_BITS)
        r = fma(-qf, C1, x)
        r = fma(-qf, C2, r)
        r = fma(-qf, C3, r)
        r = fma(-qf, C4, r)
        # Only out-of-range |x| can leave |r| well beyond pi/4; keep the result bounded.
        r = select(r > R_MAX, R_MAX, r)
        return q, select(r < -R_MAX, -R_MAX, r)

    @impl
    def sin_cos_reduced(r):
        z = r * r
        s = fma(r * z, sin_poly(z), r)
        c = fma(z * z, cos_poly(z), fma(-HALF, z, ONE))
        return s, c

    @impl
    def flip_sign(v, q):
        """v, negated when bit 1 of q is set."""
        return as_float(ixor(as_int(v), ishl(iand(q, 2), SIGN_SHIFT)), v)

    @impl
    def sin(x):
        x = F(x)
        q, r = reduce(x)
        s, c = sin_cos_reduced(r)
        res = flip_sign(select(iand(q, 1) == 0, s, c), q)
        return select(fabs(x) < TINY, x, res)

    @impl
    def cos(x):
        x = F(x)
        q, r = reduce(x)
        s, c = sin_cos_reduced(r)
        return flip_sign(select(iand(q, 1) == 0, c, s), iadd(q, 1))

    return {"sin": sin, "cos": cos}
