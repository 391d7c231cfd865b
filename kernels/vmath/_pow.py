"""pow(x, y) = exp(y*log|x|) with a double-word logarithm, plus C99/NumPy special cases.

log|x| comes as hi + lo (``log_dd``, relative error < 2**-(p+8)), y*log|x| is formed
exactly with an FMA, and ``exp_dd`` folds the low word into its reduced argument, so the
result is within ~1 ulp even when |y*log x| is near the overflow threshold. Exponents
2, 1, -1 and 1/2 take exact paths (x*x, x, 1/x, sqrt); the sign and NaN rules for a
negative base, and the rules for 0, 1, inf and NaN operands, are applied with selects.
"""

from __future__ import annotations

from ._common import impl
from ._llvm import as_int, fabs, fma, rint, select, sqrt


def build(K, log_dd, exp_dd) -> dict:
    """pow for the dtype described by ``K``."""
    F, ZERO, HALF, ONE, TWO, INF, NAN = K.F, K.ZERO, K.HALF, K.ONE, K.TWO, K.INF, K.NAN

    @impl
    def pow(x, y):  # noqa: A001 - the public name is pow
        x, y = F(x), F(y)
        ax = fabs(x)
        hi, lo = log_dd(ax)
        finite = (ax > ZERO) & (ax < INF)
        hi = select(finite, hi, select(ax == ZERO, -INF, ax))  # log 0 = -inf, inf, NaN
        lo = select(finite, lo, ZERO)
        zh = y * hi
        zl = fma(y, hi, -zh) + y * lo
        res = exp_dd(zh, zl)

        y_int = rint(y) == y  # true for +-inf too: C99 treats them as even integers
        y_odd = y_int & (rint(y * HALF) != y * HALF)
        res = select((as_int(x) < 0) & y_odd, -res, res)
        res = select((x < ZERO) & (x > -INF) & (rint(y) != y), NAN, res)

        res = select(y == TWO, x * x, res)
        res = select(y == ONE, x, res)
        res = select(y == -ONE, ONE / x, res)
        res = select((y == HALF) & (x > -INF), sqrt(x) + ZERO, res)  # pow(-0, .5) = +0
        res = select((ax == ONE) & (fabs(y) == INF), ONE, res)  # pow(-1, +-inf) = 1
        res = select(x == ONE, ONE, res)
        return select(y == ZERO, ONE, res)

    return {"pow": pow}
