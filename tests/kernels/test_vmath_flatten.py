"""The generated (flattened) kernel math computes exactly what the helper implementations do."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from jitgrad.kernels.vmath import FUNCTIONS, f32, f64
from jitgrad.kernels.vmath._build import build_all
from jitgrad.kernels.vmath._consts import F32, F64
from jitgrad.kernels.vmath._flatten import source_of

_BUILT: dict = {}


def _helpers(dtype):
    if dtype not in _BUILT:
        _BUILT[dtype] = build_all(F32 if dtype == np.float32 else F64)
    return _BUILT[dtype]


def _inputs(dtype, n=300):
    rng = np.random.default_rng(7)
    info = np.finfo(dtype)
    special = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan, info.tiny,
                        info.tiny / 4, info.max, -info.max, 1e-30, 88.0, 710.0, -104.0],
                       dtype=dtype)
    mags = np.exp(rng.uniform(np.log(1e-6), np.log(1e3), n)).astype(dtype)
    signs = np.where(rng.random(n) < 0.5, -1, 1).astype(dtype)
    return np.concatenate([special, mags * signs])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_flattened_equals_helper_implementation(name, dtype):
    suffix = "f32" if dtype == np.float32 else "f64"
    flat = getattr(f32 if dtype == np.float32 else f64, f"{name}_{suffix}")
    helper = _helpers(dtype)[name]
    xs = _inputs(dtype)
    if name == "pow":
        ys = np.concatenate([np.array([2.0, 0.5, -1.0, 0.0, 3.0, np.inf], dtype=dtype),
                             xs[::7][:40]])
        pairs = [(x, y) for x in xs[::3] for y in ys[:12]]
    else:
        pairs = [(x,) for x in xs]
    got = np.array([flat(*p) for p in pairs], dtype=dtype)
    want = np.array([helper(*p) for p in pairs], dtype=dtype)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("module", [f32, f64], ids=["f32", "f64"])
def test_flattened_functions_call_only_intrinsics(module):
    """One Numba function each: the generated bodies call no other jitted function."""
    from jitgrad.kernels.vmath import _llvm

    allowed = {k for k in vars(_llvm) if not k.startswith("_")} | {"F"}
    for name in FUNCTIONS:
        fn = getattr(module, f"{name}_{module.__name__[-3:]}")
        body = ast.parse(source_of(fn.py_func)).body[0].body  # without the decorator
        called = {n.func.id for stmt in body for n in ast.walk(stmt)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert called <= allowed, (name, called - allowed)
