"""Per-dtype constants: IEEE layout, range-reduction splits, thresholds, coefficient tables.

The algorithms in the family modules are written once; ``F32`` and ``F64`` carry what
differs. Every float is already of the target type (a Python float literal inside a jitted
function would be float64 and drag float32 maths into double precision).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from . import _coeffs as C


def _hex(ftype, text):
    return ftype(float.fromhex(text))


def _bits(value):
    return int(value.view(np.int32 if value.dtype == np.float32 else np.int64))


def _make(ftype, mant, bias, *, extra):
    f = ftype
    ns = SimpleNamespace(
        F=f, MANT=mant, BIAS=bias, BITS=8 * np.dtype(f).itemsize,
        ZERO=f(0.0), HALF=f(0.5), ONE=f(1.0), TWO=f(2.0),
        INF=f(np.inf), NAN=f(np.nan),
        MANT_MASK=(1 << mant) - 1,
        # t = x*c + MAGIC rounds x*c to an integer n held in the low bits of t.
        MAGIC=f(1.5 * 2.0**mant),
        MIN_NORMAL=f(2.0 ** (1 - bias)),
        SUBNORMAL_SCALE=f(2.0**mant),  # lifts every subnormal into the normal range
        ONE_BITS=_bits(f(1.0)),
        SQRT_HALF_BITS=_bits(f(np.sqrt(0.5))),
        TWO_OVER_PI=f(2 / np.pi),
        LOG2E=f(1 / np.log(2.0)),
    )
    ns.MAGIC_BITS = _bits(ns.MAGIC)
    for key, value in extra.items():
        setattr(ns, key, value)
    return ns


F32 = _make(np.float32, 23, 127, extra=dict(
    # Cody-Waite ln2: the high part has 16 significant bits so k*LN2_HI is exact for |k|<=256.
    LN2_HI=_hex(np.float32, "0x1.62e4p-1"), LN2_LO=_hex(np.float32, "0x1.7f7d1cp-20"),
    # pi/2 = PIO2[0] + PIO2[1] + ... to 96 bits; applied with FMAs.
    PIO2=tuple(_hex(np.float32, h) for h in
               ("0x1.921fb6p+0", "-0x1.777a5cp-25", "-0x1.ee59dap-50", "0x1.98a2e0p-77")),
    TWO_OVER_PI_LO=_hex(np.float32, "0x1.b9391p-26"),  # 2/pi - TWO_OVER_PI
    TWO_THIRDS_HI=_hex(np.float32, "0x1.555556p-1"),
    TWO_THIRDS_LO=_hex(np.float32, "-0x1.555556p-26"),
    # exp(x) overflows above 88.72 and is 0 below -103.97: the clamps only keep n in range.
    EXP_LO=np.float32(-104.0), EXP_HI=np.float32(89.0),
    EXPM1_LO=np.float32(-18.0),  # expm1(x) rounds to -1 below -17.33
    TINY=np.float32(2.0**-30),  # below this expm1, log1p, tanh return x (keeps -0, subnormals)
    SIN_TINY=np.float32(2.0**-12),  # sin(x) rounds to x below
    TANH_ONE=np.float32(9.1),  # tanh(x) rounds to 1 above 9.01
    ERF_ONE=np.float32(3.92),  # erf(x) rounds to 1 above 3.9192
    EXP_P=C.EXP_F32, LOG_P=C.LOG_P_F32, LOGDD_T=C.LOGDD_T_F32,
    SIN_P=C.SIN_F32, COS_P=C.COS_F32, ERF_R=C.ERF_R_F32,
    ERF_EDGES=C.ERF_EDGES_F32, ERF_MIDS=C.ERF_MIDS_F32, ERF_G=(C.ERF_G0_F32,),
))

F64 = _make(np.float64, 52, 1023, extra=dict(
    # The high part has 32 significant bits so k*LN2_HI is exact for |k| < 2**21.
    LN2_HI=_hex(np.float64, "0x1.62e42ffp-1"),
    LN2_LO=_hex(np.float64, "-0x1.718432a1b0e26p-35"),
    PIO2=tuple(_hex(np.float64, h) for h in
               ("0x1.921fb54442d18p+0", "0x1.1a62633145c07p-54", "-0x1.f1976b7ed8fbcp-110",
                "0x1.4cf98e804177dp-164")),
    TWO_OVER_PI_LO=_hex(np.float64, "-0x1.6b01ec5417056p-55"),
    TWO_THIRDS_HI=_hex(np.float64, "0x1.5555555555555p-1"),
    TWO_THIRDS_LO=_hex(np.float64, "0x1.5555555555555p-55"),
    # exp(x) overflows above 709.78 and is 0 below -745.13.
    EXP_LO=np.float64(-746.0), EXP_HI=np.float64(710.0),
    EXPM1_LO=np.float64(-38.0),  # expm1(x) rounds to -1 below -37.43
    TINY=np.float64(2.0**-60),
    SIN_TINY=np.float64(2.0**-27),
    TANH_ONE=np.float64(19.1),  # tanh(x) rounds to 1 above 19.06
    ERF_ONE=np.float64(5.93),  # erf(x) rounds to 1 above 5.9215
    EXP_P=C.EXP_F64, LOG_Q=C.LOG_Q_F64, LOGDD_T=C.LOGDD_T_F64,
    SIN_P=C.SIN_F64, COS_P=C.COS_F64, ERF_R=C.ERF_R_F64,
    ERF_EDGES=C.ERF_EDGES_F64, ERF_MIDS=C.ERF_MIDS_F64,
    ERF_G=(C.ERF_G0_F64, C.ERF_G1_F64, C.ERF_G2_F64, C.ERF_G3_F64),
))
