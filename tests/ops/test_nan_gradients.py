"""Gradients at NaN and edge inputs follow PyTorch's conventions (its derivative formulas),
in eager mode and in compiled plans (which derive from the same VJP rules, bit for bit).

The expected values are PyTorch 2.13's, written out so the tests hold without PyTorch; when
PyTorch is installed the same cases are also compared live."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jitgrad as jg

NAN, INF = math.nan, math.inf


def _other(M, x):
    return M.tensor([NAN, 1.0, 2.0], dtype=x.dtype)


#: (id, function of a 1-D tensor, input, PyTorch's gradient of sum(f(x)) w.r.t. x)
CASES = [
    ("max-one-nan", lambda M, x: x.max(), [1.0, NAN, 3.0], [0.0, 1.0, 0.0]),
    ("max-two-nans", lambda M, x: x.max(), [NAN, NAN, 3.0], [0.5, 0.5, 0.0]),
    ("min-two-nans", lambda M, x: x.min(), [1.0, NAN, NAN, 1.0], [0.0, 0.5, 0.5, 0.0]),
    ("max-ties", lambda M, x: x.max(), [3.0, 1.0, 3.0], [0.5, 0.0, 0.5]),
    ("max-minus-inf", lambda M, x: x.max(), [-INF, -INF], [0.5, 0.5]),
    ("amax-nan", lambda M, x: x.amax(), [1.0, NAN, 3.0], [NAN, NAN, NAN]),
    ("amax-rows", lambda M, x: x.reshape(2, 2).amax(1), [1.0, NAN, 3.0, 2.0],
     [NAN, NAN, 1.0, 0.0]),
    ("amin-cols", lambda M, x: x.reshape(2, 2).amin(0, keepdim=True), [1.0, NAN, 3.0, 2.0],
     [1.0, NAN, 0.0, NAN]),
    ("amax-ties", lambda M, x: x.reshape(2, 2).amax(1), [3.0, 3.0, 1.0, 2.0],
     [0.5, 0.5, 0.0, 1.0]),
    ("max-dim-nan", lambda M, x: x.reshape(1, 3).max(1).values, [1.0, NAN, 3.0],
     [0.0, 1.0, 0.0]),
    ("maximum-nan", lambda M, x: M.maximum(x, _other(M, x)), [1.0, NAN, 3.0], [1.0, 1.0, 1.0]),
    ("minimum-nan", lambda M, x: M.minimum(x, _other(M, x)), [1.0, NAN, 0.0], [1.0, 1.0, 1.0]),
    ("maximum-tie", lambda M, x: M.maximum(x, M.zeros(2, dtype=x.dtype)), [0.0, NAN],
     [0.5, 1.0]),
    ("relu", lambda M, x: M.relu(x), [NAN, 0.0, -1.0, 1.0], [1.0, 0.0, 0.0, 1.0]),
    ("F.relu", lambda M, x: M.nn.functional.relu(x), [NAN, -0.0], [1.0, 0.0]),
    ("abs", lambda M, x: M.abs(x), [NAN, 0.0, -0.0, -1.0, 1.0], [0.0, 0.0, 0.0, -1.0, 1.0]),
    ("sign", lambda M, x: M.sign(x), [NAN, 0.0], [0.0, 0.0]),
    ("x**x", lambda M, x: x ** x, [0.0, 1.0, 2.0], [0.0, 1.0, 4.0 + 4.0 * math.log(2.0)]),
    ("nan**0", lambda M, x: x ** M.zeros_like(x), [NAN, 0.0], [0.0, 0.0]),
    ("x**0", lambda M, x: x ** 0, [0.0, NAN], [0.0, 0.0]),
    ("x**0.5", lambda M, x: x ** 0.5, [0.0, NAN], [INF, NAN]),
    ("clamp", lambda M, x: x.clamp(0.0, 1.0), [NAN, 0.0, 1.0, 0.5], [0.0, 1.0, 1.0, 1.0]),
    ("sqrt", lambda M, x: M.sqrt(x), [0.0, NAN], [INF, NAN]),
    ("0**x", lambda M, x: 0.0 ** x, [0.0, 1.0, -1.0], [0.0, 0.0, -INF]),
]
IDS = [c[0] for c in CASES]


def _grad(M, fn, xs, dtype):
    x = M.tensor(xs, dtype=dtype, requires_grad=True)
    y = fn(M, x)
    (gx,) = M.autograd.grad(y, x, M.ones_like(y))
    return gx


def _bits(t) -> np.ndarray:
    return t.detach().numpy()


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_eager_gradient_is_pytorchs(case, dt):
    _, fn, xs, expected = case
    g = _bits(_grad(jg, fn, xs, getattr(jg, dt)))
    np.testing.assert_allclose(g, np.asarray(expected, dtype=dt), rtol=1e-6)
    # +0.0, never -0.0, where PyTorch gives 0 (abs'(-0.0), relu'(-0.0))
    zeros = np.asarray(expected) == 0.0
    assert not np.signbit(g[zeros]).any()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_compiled_gradient_equals_eager(case):
    """The compiled forward+backward (first call and a cached one) gives eager's bits."""
    _, fn, xs, _ = case
    eager = _bits(_grad(jg, fn, xs, jg.float64))

    @jg.compile(fullgraph=True)
    def step(x):
        y = fn(jg, x)
        return jg.autograd.grad(y.sum(), x)[0]

    @jg.compile(fullgraph=True)
    def forward(x):
        return fn(jg, x)

    for _ in range(2):
        x = jg.tensor(xs, dtype=jg.float64, requires_grad=True)
        np.testing.assert_array_equal(_bits(step(x)), eager)
        y = forward(x)
        (g,) = jg.autograd.grad(y, x, jg.ones_like(y))
        np.testing.assert_array_equal(_bits(g), eager)


def test_pow_tensor_exponent_gradients():
    """PyTorch's pow_backward_self / _exponent: 0 where the exponent is 0 (for the base) and
    where the base is 0 with a non-negative exponent (for the exponent)."""
    x = jg.tensor([0.0, 0.0, 0.0, NAN], dtype=jg.float64, requires_grad=True)
    e = jg.tensor([-1.0, 0.0, 2.0, 0.0], dtype=jg.float64, requires_grad=True)
    (x ** e).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [-INF, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(e.grad.numpy(), [-INF, 0.0, 0.0, NAN])


def test_sign_forward_is_pytorchs():
    s = jg.sign(jg.tensor([NAN, -0.0, 0.0, -2.0, 3.0])).numpy()
    np.testing.assert_array_equal(s, [0.0, 0.0, 0.0, -1.0, 1.0])
    assert not np.signbit(s[:3]).any()


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradient_matches_torch(case, dt):
    torch = pytest.importorskip("torch")
    _, fn, xs, _ = case
    ours = _bits(_grad(jg, fn, xs, getattr(jg, dt)))
    theirs = _grad(torch, fn, xs, getattr(torch, dt)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))
