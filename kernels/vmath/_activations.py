"""tanh, sigmoid, softplus, sqrt and rsqrt.

tanh: expm1(2|x|) / (expm1(2|x|) + 2) with the sign of x: no cancellation anywhere, |x|
clamped where tanh rounds to 1. (Eigen's float32 rational, which XLA uses, is 1.8x faster
but measured 4.3 ulp on a float32 sweep, over the 4 ulp target; a refitted rational of the
same shape is no better, the error comes from evaluating P and Q in float32.)
sigmoid: e = exp(-|x|); 1/(1+e) for x >= 0, e/(1+e) below, so it never overflows and
keeps its subnormal tail (float32 sigmoid(-100) = 3.7e-44, not 0).
softplus: max(x, 0) + log1p(exp(-|x|)), the log1p argument in [0, 1].
sqrt: the correctly rounded hardware instruction. rsqrt: 1/sqrt(x), two roundings (<= 1
ulp); the 14-bit vrsqrt estimate plus a Newton step is not faster once made as accurate
and needs fastmath to be emitted.
"""

from __future__ import annotations

from ._common import impl
from ._llvm import copysign, fabs, select, sqrt


def build(K, exp_core, expm1_core, log1p_core) -> dict:
    """The activation functions for the dtype described by ``K``."""
    F, ZERO, ONE, TWO = K.F, K.ZERO, K.ONE, K.TWO
    BIG, TINY, EXP_LO = K.TANH_ONE, K.TINY, K.EXP_LO

    @impl
    def tanh(x):
        x = F(x)
        a = fabs(x)
        # 2*min(|x|, BIG) is inside expm1's clamps and >= TINY wherever the result is used
        # (|x| < TINY returns x): expm1's own range handling would be dead work
        e = expm1_core(TWO * select(a > BIG, BIG, a))
        res = copysign(e / (e + TWO), x)
        return select(a < TINY, x, res)

    @impl
    def sigmoid(x):
        x = F(x)
        m = -fabs(x)  # <= 0: only exp's lower clamp can apply (NaN passes through)
        e = exp_core(select(m < EXP_LO, EXP_LO, m))
        return select(x >= ZERO, ONE, e) / (ONE + e)

    @impl
    def softplus(x):
        x = F(x)
        m = -fabs(x)
        res = select(x > ZERO, x, ZERO) + log1p_core(exp_core(select(m < EXP_LO, EXP_LO, m)))
        return select(x != x, x, res)

    @impl
    def sqrt_(x):
        return sqrt(F(x))

    @impl
    def rsqrt(x):
        x = F(x)
        return ONE / sqrt(x)

    return {"tanh": tanh, "sigmoid": sigmoid, "softplus": softplus, "sqrt": sqrt_,
            "rsqrt": rsqrt}
