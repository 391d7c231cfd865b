"""Regenerate ``_coeffs.py``: near-minimax polynomial coefficients fitted with mpmath.

Offline tool, never imported by the library::

    python tools/fit_vmath_coeffs.py > kernels/vmath/_coeffs.py

Each polynomial is fitted by Lawson's iteratively reweighted least squares (it converges to
the weighted minimax polynomial) at 50 significant digits, on Chebyshev-distributed points.
The weight turns the polynomial's absolute error into the error it causes in the final
result (relative error, or absolute error for ``erf`` near 1), so the comment on each table
is that error in units of 2**-24 (float32) or 2**-53 (float64) *before* coefficient
rounding; the tests measure the real, end-to-end error.
"""

from __future__ import annotations

import numpy as np

try:
    import mpmath as mp
except ImportError as exc:  # pragma: no cover - offline tool
    raise SystemExit("fit_vmath_coeffs.py needs mpmath: pip install mpmath") from exc

mp.mp.dps = 50

SQRT_HALF = mp.sqrt(mp.mpf(0.5))
LOG_Z_MAX = ((mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)) ** 2  # s**2 for s = f/(2+f) at the ends
PIO4_SQ = (mp.pi / 4) ** 2
ERF_SPLIT = mp.mpf(1)  # erf: x + x*R(x*x) below, 1 - exp(-x*x)*G(x) above
ERF_ONE = {"float32": mp.mpf(3.92), "float64": mp.mpf(5.93)}  # erf(x) rounds to 1 beyond
ERF_PIECES_F64 = (1.0, 1.6, 2.5, 3.7, 5.93)


def minimax(g, a, b, deg, weight, iters=40):
    """Coefficients c0..c_deg minimising max |weight(t) * (sum c_k t**k - g(t))| on [a, b]."""
    a, b = mp.mpf(a), mp.mpf(b)
    m = 30 * (deg + 1)
    ts = [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (k + mp.mpf(0.5)) / m) for k in range(m)]
    gs = [g(t) for t in ts]
    ws = [weight(t) for t in ts]
    u = [mp.mpf(1) / m] * m
    n = deg + 1
    for _ in range(iters):
        ata, atb = mp.matrix(n, n), mp.matrix(n, 1)
        for t, gv, w, ui in zip(ts, gs, ws, u):
            row = [w * t**j for j in range(n)]
            for j in range(n):
                atb[j] += ui * row[j] * w * gv
                for k in range(j, n):
                    ata[j, k] += ui * row[j] * row[k]
        for j in range(n):
            for k in range(j):
                ata[j, k] = ata[k, j]
        c = mp.lu_solve(ata, atb)
        coeffs = [c[j] for j in range(n)]
        errs = [abs(w * (mp.polyval(coeffs[::-1], t) - gv)) for t, gv, w in zip(ts, gs, ws)]
        total = sum(ui * e for ui, e in zip(u, errs))
        u = [ui * e / total for ui, e in zip(u, errs)]
    return coeffs, max(errs)


def _series_safe(f, at_zero):
    return lambda t: mp.mpf(at_zero) if t == 0 else f(t)


# Target functions (their removable singularities at 0 given explicitly).
EXP_P = _series_safe(lambda r: (mp.exp(r) - 1 - r) / r**2, 0.5)  # expm1(r) = r + r*r*P(r)
LOG_P = _series_safe(lambda f: (mp.log1p(f) - f + f * f / 2) / f**3, mp.mpf(1) / 3)
LOG_Q = _series_safe(lambda z: (2 * mp.atanh(mp.sqrt(z)) / mp.sqrt(z) - 2) / z, mp.mpf(2) / 3)
LOG_T = _series_safe(
    lambda z: (2 * mp.atanh(mp.sqrt(z)) - 2 * mp.sqrt(z) - 2 * mp.sqrt(z) ** 3 / 3)
    / mp.sqrt(z) ** 5, mp.mpf(2) / 5)
SIN_P = _series_safe(lambda z: (mp.sin(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3, -mp.mpf(1) / 6)
COS_P = _series_safe(lambda z: (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z**2, mp.mpf(1) / 24)
ERF_R = _series_safe(lambda z: mp.erf(mp.sqrt(z)) / mp.sqrt(z) - 1, 2 / mp.sqrt(mp.pi) - 1)


def erfc_scaled(a):
    return mp.erfc(a) * mp.exp(a * a)


def _specs(dtype):
    """(name, g, a, b, degree, weight) for every fitted table of one dtype."""
    f32 = dtype == "float32"
    ln2h = mp.log(2) / 2
    specs = [
        ("EXP", EXP_P, -ln2h, ln2h, 5 if f32 else 10,
         _series_safe(lambda r: r * r / abs(mp.expm1(r)), 0)),
        ("LOGDD_T", LOG_T, 0, LOG_Z_MAX, 3 if f32 else 7, lambda z: z * z / 2),
        ("SIN", SIN_P, 0, PIO4_SQ, 3 if f32 else 6, lambda z: z),
        ("COS", COS_P, 0, PIO4_SQ, 3 if f32 else 6, lambda z: z * z / mp.cos(mp.sqrt(z))),
        ("ERF_R", ERF_R, 0, ERF_SPLIT**2, 6 if f32 else 11,
         _series_safe(lambda z: mp.sqrt(z) / mp.erf(mp.sqrt(z)), mp.sqrt(mp.pi) / 2)),
    ]
    if f32:  # log(1+f) = f - f*f/2 + f**3 * P(f): no division
        specs.append(("LOG_P", LOG_P, SQRT_HALF - 1, mp.sqrt(2) - 1, 8,
                      _series_safe(lambda f: f**3 / abs(mp.log1p(f)), 0)))
    else:  # log(1+f) = 2s + s*z*Q(z), s = f/(2+f), z = s*s
        specs.append(("LOG_Q", LOG_Q, 0, LOG_Z_MAX, 6, lambda z: z / 2))
    return specs


def _fmt(value, dtype):
    if dtype == "float32":
        return np.format_float_scientific(np.float32(value), unique=True)
    return repr(float(value))


def _emit(name, coeffs, err, dtype, unit):
    print(f"# max weighted error {float(err / unit):.3g} ulp before rounding")
    print(f"{name} = (")
    for c in coeffs:
        print(f"    {_fmt(c, dtype)},")
    print(")")


def main() -> None:
    print('"""Polynomial coefficients, ascending powers. '
          'Made by tools/fit_vmath_coeffs.py: do not edit."""')
    print()
    for dtype in ("float32", "float64"):
        unit = mp.mpf(2) ** (-24 if dtype == "float32" else -53)
        suffix = "_F32" if dtype == "float32" else "_F64"
        for name, g, a, b, deg, weight in _specs(dtype):
            coeffs, err = minimax(g, a, b, deg, weight)
            _emit(name + suffix, coeffs, err, dtype, unit)
        # erf above ERF_SPLIT: 1 - exp(-x*x) * G(x), G(x) = erfc(x)*exp(x*x), a polynomial in
        # x - mid per piece; the weight exp(-x*x) measures the absolute error of erf.
        edges = (1.0, float(ERF_ONE[dtype])) if dtype == "float32" else ERF_PIECES_F64
        pieces = []
        for lo, hi in zip(edges, edges[1:]):
            mid = mp.mpf((lo + hi) / 2)
            coeffs, err = minimax(lambda u, m=mid: erfc_scaled(u + m), lo - mid, hi - mid,
                                  8 if dtype == "float32" else 12,
                                  lambda u, m=mid: mp.exp(-((u + m) ** 2)))
            pieces.append((float(mid), coeffs, err))
        print(f"ERF_EDGES{suffix} = {tuple(edges)!r}")
        print(f"ERF_MIDS{suffix} = {tuple(p[0] for p in pieces)!r}")
        for k, (_, coeffs, err) in enumerate(pieces):
            _emit(f"ERF_G{k}{suffix}", coeffs, err, dtype, unit)
        print()


if __name__ == "__main__":
    main()
