"""Indexing with integer tensors on CUDA tensors (``ops/tensor_index.py``): values and
gradients equal the CPU's, compiled too; a bad index raises PyTorch's error where CuPy would
wrap it around."""

import numpy as np
import pytest

import jitgrad

X = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)


def step(x, i):
    h = x * 1.0
    h[i.flip(0)] = x[i] * 2
    return h[:, i % 5].square().sum()


def _grad(fn, device):
    x = jitgrad.tensor(X, device=device, requires_grad=True)
    i = jitgrad.tensor([0, 2, 2, 5], device=device)
    out = fn(x, i)
    out.backward()
    return out.item(), x.grad.cpu().numpy()


def test_equals_the_cpu_eager_and_compiled():
    want = _grad(step, "cpu")
    for fn in (step, jitgrad.compile(step)):
        got = _grad(fn, "cuda")
        assert got[0] == pytest.approx(want[0], rel=1e-6)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-6)


def test_bad_index_raises_pytorchs_error():
    x = jitgrad.tensor(X, device="cuda", requires_grad=True)
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 6"):
        x[jitgrad.tensor([0, 9], device="cuda")]
