"""Documented accuracy: the one place the tests, the docstrings and docs/kernel_math.md read.

``ULP_BOUNDS[(name, dtype)]`` bounds the error in ulps of the result type against the exact
value (see docs/kernel_math.md for the method): the largest error measured on the heavy
sweeps, rounded up to a half ulp, plus half an ulp of margin for inputs no sweep visited.
It holds on the whole domain except where ``ACCURATE_DOMAIN`` restricts |x|.
"""

from __future__ import annotations

from ..mathtable import FUNCTIONS  # noqa: F401 - the table's one home; re-exported here

ULP_BOUNDS: dict[tuple[str, str], float] = {
    ("exp", "float32"): 1.5, ("exp", "float64"): 1.5,
    ("expm1", "float32"): 2, ("expm1", "float64"): 2.5,
    ("log", "float32"): 1.5, ("log", "float64"): 1.5,
    ("log1p", "float32"): 3, ("log1p", "float64"): 2.5,
    ("tanh", "float32"): 3, ("tanh", "float64"): 3,
    ("sigmoid", "float32"): 3, ("sigmoid", "float64"): 3,
    ("softplus", "float32"): 3.5, ("softplus", "float64"): 3,
    ("erf", "float32"): 2, ("erf", "float64"): 1.5,
    ("sin", "float32"): 3, ("sin", "float64"): 2,
    ("cos", "float32"): 3, ("cos", "float64"): 2,
    ("pow", "float32"): 2, ("pow", "float64"): 2,
    ("sqrt", "float32"): 0.5, ("sqrt", "float64"): 0.5,
    ("rsqrt", "float32"): 2, ("rsqrt", "float64"): 2,
}

# |x| below which the bound holds, where it does not hold on the whole domain: sin and cos
# reduce their argument exactly only while rint(x*2/pi) fits the magic-number rounding.
ACCURATE_DOMAIN: dict[tuple[str, str], float] = {
    ("sin", "float32"): 2.0**22 * 1.5707963267948966,
    ("cos", "float32"): 2.0**22 * 1.5707963267948966,
    ("sin", "float64"): 2.0**51 * 1.5707963267948966,
    ("cos", "float64"): 2.0**51 * 1.5707963267948966,
}


def _bound_text(name: str, dtype: str) -> str:
    text = f"{dtype} <= {ULP_BOUNDS[(name, dtype)]:g} ulp"
    if (name, dtype) in ACCURATE_DOMAIN:
        text += f" for |x| < {ACCURATE_DOMAIN[(name, dtype)]:.3g}"
    return text


def describe(name: str, dtype: str | None = None) -> str:
    """One line for a docstring: the bounds of ``name`` (for one dtype, or both)."""
    dtypes = (dtype,) if dtype else ("float32", "float64")
    return "Max error: " + ", ".join(_bound_text(name, d) for d in dtypes) + "."
