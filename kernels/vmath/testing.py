"""Measuring the functions: array loops, high-precision references, ulp errors, samples.

Used by the tests, by ``python -m jitgrad.kernels.vmath.testing`` (prints the accuracy
table of docs/kernel_math.md) and by the benchmarks. Not imported by the package itself.

References: float32 results are compared with NumPy's float64 functions (error ~2**-29 of
a float32 ulp); float64 results with NumPy's 80-bit ``longdouble`` functions where the
platform has them (glibc ``expl``, ``logl``, ... accurate to ~2**-10 of a float64 ulp) and
with mpmath at 40 digits otherwise and for erf. The error of y against the unrounded
reference r is |y - r| / ulp(r) in the result type, so a correctly rounded result scores
<= 0.5; inf counts as 2**(emax) so overflow one ulp early or late costs about one ulp.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable

import numpy as np
from numba import njit

from .. import vmath
from . import FUNCTIONS, KERNEL_FASTMATH

#: name -> the public dtype-dispatching function (``vmath.exp``, ...)
_PUBLIC = {name: getattr(vmath, name) for name in FUNCTIONS}

_HP = np.longdouble if np.finfo(np.longdouble).nmant >= 63 else None
_LAYOUT = {np.dtype(np.float32): (24, -126, 128), np.dtype(np.float64): (53, -1022, 1024)}


@functools.cache
def array_kernel(name: str) -> Callable:
    """Jitted ``loop(x, out)`` (``loop(x, y, out)`` for pow) applying vmath ``name``.

    Compiled with ``KERNEL_FASTMATH`` through the public dtype-dispatching function, as
    generated kernels call it.
    """
    return _loop_kernel(_PUBLIC[name], binary=name == "pow")


def _loop_kernel(fn: Callable, binary: bool) -> Callable:
    """``loop(x, out)``: ``out[i] = fn(x[i])`` (``loop(x, y, out)`` with ``fn(x[i], y[i])``
    when ``binary``), jitted with ``KERNEL_FASTMATH`` as generated kernels are."""
    if binary:

        def loop2(x, y, out):
            for i in range(x.size):
                out[i] = fn(x[i], y[i])

        return njit(fastmath=KERNEL_FASTMATH)(loop2)

    def loop(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])

    return njit(fastmath=KERNEL_FASTMATH)(loop)


def evaluate(name: str, *args: np.ndarray) -> np.ndarray:
    """vmath ``name`` applied elementwise to contiguous arrays of one dtype."""
    args = tuple(np.ascontiguousarray(a) for a in args)
    out = np.empty_like(args[0])
    array_kernel(name)(*args, out)
    return out


def ulp_error(y: np.ndarray, ref: np.ndarray, dtype) -> np.ndarray:
    """|y - ref| in ulps of ``dtype`` at ``ref``; 0 where both are NaN, inf where one is."""
    p, emin, emax = _LAYOUT[np.dtype(dtype)]
    hp = ref.dtype.type
    big = np.ldexp(hp(1), emax)
    with np.errstate(invalid="ignore", over="ignore"):  # signalling NaNs warn when cast
        yh = y.astype(hp)
        yc = np.where(np.isinf(yh), np.copysign(big, yh), yh)
        rc = np.clip(ref, -big, big)  # a true value beyond 2**emax rounds to inf
        _, e = np.frexp(np.abs(rc))
        e = np.where(rc == 0, emin + 1, e)
        ulp = np.ldexp(hp(1), np.maximum(e, emin + 1) - p)
        err = np.abs(yc - rc) / ulp
    same = (yc == rc) | (np.isnan(yh) & np.isnan(ref))
    err = np.where(same, 0.0, err)
    return np.where(np.isnan(yh) != np.isnan(ref), np.inf, err).astype(np.float64)


def _mp_map(name: str, *cols: np.ndarray) -> np.ndarray:
    """mpmath at 40 digits, stored in longdouble (float64 if that is all there is); where
    mpmath has no real answer (log(-1), 0**-1) NumPy's float64 value stands in."""
    import mpmath

    mpmath.mp.dps = 40
    fn = _mp_fn(name)
    with np.errstate(invalid="ignore"):
        fallback = _np_reference(name, *(c.astype(np.float64) for c in cols))
    texts = []
    for vals, fb in zip(zip(*cols), fallback):
        try:
            v = fn(*(mpmath.mpf(float(a)) for a in vals))
        except (ZeroDivisionError, ValueError):
            v = None
        texts.append(mpmath.nstr(v, 25) if isinstance(v, mpmath.mpf) else repr(float(fb)))
    return np.array(texts, dtype=_HP or np.float64)


def _mp_fn(name: str) -> Callable:
    import mpmath as mp

    def sigmoid(x):
        return 1 / (1 + mp.exp(-x))

    def softplus(x):
        return mp.log1p(mp.exp(x)) if x < 0 else x + mp.log1p(mp.exp(-x))

    def rsqrt(x):
        return 1 / mp.sqrt(x) if x > 0 else (mp.inf if x == 0 else mp.nan)

    table = {"exp": mp.exp, "expm1": mp.expm1, "log": mp.log, "log1p": mp.log1p,
             "tanh": mp.tanh, "sigmoid": sigmoid, "softplus": softplus, "erf": mp.erf,
             "sin": mp.sin, "cos": mp.cos, "sqrt": mp.sqrt, "rsqrt": rsqrt,
             "pow": lambda x, y: mp.power(x, y)}
    return table[name]


def _np_reference(name: str, *cols: np.ndarray) -> np.ndarray:
    x = cols[0]
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            e = np.exp(-np.abs(x))
            return np.where(x >= 0, 1, e) / (1 + e)
        if name == "softplus":
            return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))
        if name == "rsqrt":
            return 1 / np.sqrt(x)
        if name == "pow":
            return np.power(x, cols[1])
        if name == "erf":
            return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)
        return getattr(np, name)(x)


def reference(name: str, *cols: np.ndarray) -> np.ndarray:
    """The exact value of vmath ``name`` at float32/float64 ``cols``, in a wider type."""
    if _HP is None or (name == "erf" and cols[0].dtype == np.float64):
        return _mp_map(name, *cols)
    with np.errstate(invalid="ignore"):  # signalling NaNs warn when cast
        wide = tuple(c.astype(np.float64 if c.dtype == np.float32 else _HP) for c in cols)
    return _np_reference(name, *wide)


def special_values(dtype) -> np.ndarray:
    """Zeros, infinities, NaN, subnormals, extremes and a few ordinary values."""
    f = np.finfo(dtype)
    base = [0.0, np.inf, np.nan, f.smallest_subnormal, 2 * f.smallest_subnormal,
            f.smallest_normal, np.nextafter(f.smallest_normal, dtype(0)), f.tiny * 3, f.max,
            f.eps, 0.5, 1.0, 2.0, 3.0, 10.0, 100.0, 1000.0, 1e10, 1e30]
    arr = np.array(base, dtype=dtype)
    return np.concatenate([arr, -arr])


def float32_sweep(stride: int, offset: int = 0) -> np.ndarray:
    """Every ``stride``-th float32 bit pattern (both signs), plus the special values."""
    bits = np.arange(offset, 2**32, stride, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits.view(np.float32), special_values(np.float32)])


# Where each function does something other than saturate, for the random float64 samples
# (and the dense float32 ones): (low, high) of a uniform draw.
INTERESTING = {
    "exp": (-746.0, 710.0), "expm1": (-40.0, 710.0), "log": (0.0, 10.0),
    "log1p": (-1.0, 10.0), "tanh": (-20.0, 20.0), "sigmoid": (-750.0, 40.0),
    "softplus": (-750.0, 40.0), "erf": (-6.0, 6.0), "sin": (-100.0, 100.0),
    "cos": (-100.0, 100.0), "sqrt": (0.0, 10.0), "rsqrt": (0.0, 10.0),
}


def random_inputs(name: str, dtype, n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """n inputs: a third uniform on the interesting range, a third random bit patterns,
    a third log-uniform magnitudes with random sign (pow: pairs aimed at |y*log x| up to
    the overflow threshold, plus negative bases with integer exponents)."""
    rng = np.random.default_rng(seed)
    ibits = np.int32 if np.dtype(dtype) == np.float32 else np.int64
    info = np.finfo(dtype)
    k = n // 3
    if name == "pow":
        lim = 88.0 if np.dtype(dtype) == np.float32 else 709.0
        x = np.exp(rng.uniform(-1, 1, n) * np.log(float(info.max)) * 0.9)
        t = rng.uniform(-lim * 1.05, lim * 1.05, n)
        y = t / np.log(x)
        x[:k] = rng.uniform(0, 3, k)
        y[:k] = rng.uniform(-30, 30, k)
        neg = slice(k, k + k // 2)
        x[neg] = -rng.uniform(0, 10, k // 2)
        y[neg] = rng.integers(-40, 40, k // 2)
        return x.astype(dtype), y.astype(dtype)
    lo, hi = INTERESTING[name]
    a = rng.uniform(lo, hi, k)
    if name in ("sin", "cos"):  # near multiples of pi/2, where reduction cancels most
        a[: k // 2] = np.round(rng.uniform(-1, 1, k // 2) * 2.0**20) * (np.pi / 2)
    b = rng.integers(np.iinfo(ibits).min, np.iinfo(ibits).max, k, dtype=ibits).view(dtype)
    c = np.exp(rng.uniform(np.log(float(info.smallest_subnormal)), np.log(float(info.max)),
                           n - 2 * k)) * rng.choice([-1.0, 1.0], n - 2 * k)
    with np.errstate(over="ignore"):
        return (np.concatenate([a.astype(dtype), b, c.astype(dtype)]),)


def max_error(name: str, *cols: np.ndarray, limit: float | None = None):
    """(max ulp error, the inputs where it occurs) of vmath ``name`` on ``cols``."""
    if limit is not None:
        keep = ~(np.abs(cols[0]) >= limit)
        cols = tuple(c[keep] for c in cols)
    if cols[0].size == 0:
        return 0.0, ()
    err = ulp_error(evaluate(name, *cols), reference(name, *cols), cols[0].dtype)
    i = int(np.argmax(err))
    return float(err[i]), tuple(c[i] for c in cols)


_LIBM = re.compile(
    r"\bcall\w*\s+\*?\W*(exp|expf|expm1|expm1f|log|logf|log1p|log1pf|tanh|tanhf|erf|erff|sin|"
    r"sinf|cos|cosf|pow|powf|sqrt|sqrtf|__\w+_finite|sincos\w*)\b")
_PACKED = {
    np.dtype(np.float32): re.compile(r"^\s*v(?:[a-z]*(?:add|sub|mul|div|sqrt|fmadd|fmsub|fnmadd)"
                                     r"\w*ps)\s.*%[yz]mm", re.M),
    np.dtype(np.float64): re.compile(r"^\s*v(?:[a-z]*(?:add|sub|mul|div|sqrt|fmadd|fmsub|fnmadd)"
                                     r"\w*pd)\s.*%[yz]mm", re.M),
}


def loop_asm(kernel: Callable, dtype) -> str:
    """Assembly of the jitted ``kernel`` itself (not its wrappers), compiled for 1-d C
    arrays of ``dtype`` (it is called once on small arrays to compile it)."""
    nargs = kernel.py_func.__code__.co_argcount
    kernel(*(np.ones(4, dtype) for _ in range(nargs)))
    sig = next(s for s in kernel.signatures if str(s[0].dtype) == np.dtype(dtype).name)
    symbol = kernel.overloads[sig].fndesc.mangled_name
    sections = re.split(r"^\s*\.type\s+", kernel.inspect_asm(sig), flags=re.M)
    return "\n".join(s for s in sections if s.startswith(symbol + ","))


def vectorisation_problems(kernel: Callable, dtype) -> list[str]:
    """Why the loop of ``kernel`` (e.g. ``array_kernel(name)``) is not packed, call-free SIMD
    code on ``dtype`` ([] if it is)."""
    asm = loop_asm(kernel, dtype)
    problems = []
    if not asm:
        problems.append("loop function not found in the assembly")
    calls = re.findall(r"^\s*call\w*\s+(\S+)", asm, re.M)
    if calls:
        problems.append(f"calls in the loop function: {sorted(set(calls))}")
    if _LIBM.search(asm):
        problems.append("calls libm")
    packed = _PACKED[np.dtype(dtype)].findall(asm)
    if not packed:
        problems.append("no packed ymm/zmm arithmetic")
    return problems


# Benchmark inputs: ranges where the function does real work (not saturated).
_BENCH_RANGES = {"log": (1e-3, 10.0), "sqrt": (1e-3, 10.0), "rsqrt": (1e-3, 10.0),
                 "log1p": (-0.9, 10.0)}


def bench_inputs(name: str, dtype, n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Arguments for timing vmath ``name`` on n elements (pow: x in (0, 10], y in [-3, 3])."""
    rng = np.random.default_rng(seed)
    if name == "pow":
        return (rng.uniform(1e-3, 10.0, n).astype(dtype), rng.uniform(-3, 3, n).astype(dtype))
    lo, hi = _BENCH_RANGES.get(name, (-5.0, 5.0))
    return (rng.uniform(lo, hi, n).astype(dtype),)


def numpy_equivalent(name: str) -> Callable | None:
    """The NumPy way to compute vmath ``name`` on arrays (``out=`` keyword), or None."""
    if name == "erf":
        try:
            from scipy.special import erf as sp_erf
        except ImportError:
            return None
        return lambda x, out: sp_erf(x, out=out)
    if name == "sigmoid":
        def np_sigmoid(x, out):
            np.negative(x, out=out)
            np.exp(out, out=out)
            out += 1
            return np.reciprocal(out, out=out)

        return np_sigmoid
    if name == "softplus":
        return lambda x, out: np.logaddexp(x.dtype.type(0), x, out=out)
    if name == "rsqrt":
        return lambda x, out: np.reciprocal(np.sqrt(x, out=out), out=out)
    if name == "pow":
        return lambda x, y, out: np.power(x, y, out=out)
    ufunc = getattr(np, name)
    return lambda x, out: ufunc(x, out=out)


@functools.cache
def madd_kernel(dtype) -> Callable:
    """``out[i] = x[i] * a + b`` on ``dtype``: the memory-bound vectorisation yardstick."""
    a, b = np.dtype(dtype).type(1.5), np.dtype(dtype).type(0.25)

    def madd(x, out):
        for i in range(x.size):
            out[i] = x[i] * a + b

    return njit(fastmath=KERNEL_FASTMATH)(madd)


@functools.cache
def libm_kernel(name: str) -> Callable:
    """The same loop as ``array_kernel(name)`` written with NumPy/math calls, which Numba
    lowers to scalar libm calls (what generated kernels would do without vmath)."""
    fns = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "softplus": lambda v: np.log1p(np.exp(v)),
           "erf": lambda v: math.erf(v), "rsqrt": lambda v: 1 / np.sqrt(v),
           "pow": lambda v, w: np.power(v, w)}
    ufunc = getattr(np, name, None)
    return _loop_kernel(njit(fns.get(name) or (lambda v: ufunc(v))), binary=name == "pow")


def _table() -> None:  # pragma: no cover - documentation tool
    from .bounds import ACCURATE_DOMAIN

    print("| function | float32 max ulp | float64 max ulp |")
    print("|---|---|---|")
    for name in FUNCTIONS:
        cells = []
        for dtype in (np.float32, np.float64):
            limit = ACCURATE_DOMAIN.get((name, np.dtype(dtype).name))
            if dtype == np.float32 and name != "pow":
                cols = (float32_sweep(97),)
            else:
                cols = random_inputs(name, dtype, 30_000 if name == "erf" else 600_000)
            cells.append(f"{max_error(name, *cols, limit=limit)[0]:.2f}")
        print(f"| {name} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":  # pragma: no cover
    _table()
