"""``norm`` / ``linalg.vector_norm``, ``tril`` / ``triu`` and the ``out=`` argument: the
API around the registered ops (whose values and gradients the registry-driven tests check
on every sample), PyTorch's dispatch rules, gradient conventions and error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jitgrad
from jitgrad.autograd import gradcheck

F64 = jitgrad.float64


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _x():
    return jitgrad.tensor([[1.0, 2.0, 3.0], [-1.0, 1.0, 4.0]])


# ------------------------------------------------------------------------------- norm
def test_norm_dispatch_and_values():
    x = _x()
    assert x.norm().item() == pytest.approx(math.sqrt(32.0))
    assert jitgrad.norm(x, p="fro").item() == pytest.approx(math.sqrt(32.0))
    np.testing.assert_allclose(x.norm(dim=1).numpy(), [math.sqrt(14), math.sqrt(18)],
                               rtol=1e-6)
    np.testing.assert_allclose(jitgrad.norm(x, p=1, dim=1).numpy(), [6.0, 6.0])
    np.testing.assert_allclose(x.norm(p=float("inf"), dim=0).numpy(), [1.0, 2.0, 4.0])
    np.testing.assert_allclose(x.norm(p=-math.inf, dim=0).numpy(), [1.0, 1.0, 3.0])
    assert x.norm(p=None).item() == pytest.approx(math.sqrt(32.0))
    assert x.norm(p=0).item() == 6.0
    assert x.norm(dim=1, keepdim=True).shape == (2, 1)
    assert jitgrad.norm(x, p="fro", dim=(0, 1), keepdim=True).shape == (1, 1)
    assert x.norm(dtype=F64).dtype == F64
    assert type(x.requires_grad_().norm().grad_fn).__name__ == "LinalgVectorNormBackward0"
    assert jitgrad.linalg.vector_norm(x, dim=[]).item() == pytest.approx(math.sqrt(32.0))


def test_norm_errors():
    with pytest.raises(RuntimeError, match="linalg.vector_norm: Expected a floating point or "
                       "complex tensor as input. Got Long"):
        jitgrad.norm(jitgrad.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="cannot compute the inf norm on an empty tensor"):
        jitgrad.linalg.vector_norm(jitgrad.ones(0), float("inf"))
    with pytest.raises(RuntimeError, match="on the dimension 0because this dimension is empty"):
        jitgrad.linalg.vector_norm(jitgrad.ones(0, 3), float("inf"), dim=0)
    assert jitgrad.linalg.vector_norm(jitgrad.ones(0, 3), float("inf"), dim=1).shape == (0,)
    assert jitgrad.linalg.vector_norm(jitgrad.ones(0)).item() == 0.0
    with pytest.raises(RuntimeError, match="linalg.matrix_norm: dim must be a 2-tuple. Got 0 1 2"):
        jitgrad.norm(jitgrad.ones(2, 3, 4), p="fro", dim=(0, 1, 2))
    with pytest.raises(RuntimeError, match="linalg.matrix_norm: Order abc not supported."):
        jitgrad.norm(jitgrad.ones(2, 3), p="abc")
    with pytest.raises(RuntimeError, match="linalg.matrix_norm: dim must be a 2-tuple. Got 0 1 2"):
        jitgrad.norm(jitgrad.ones(2, 3, 4), p="nuc")
    with pytest.raises(TypeError, match="'ord' must be Number, not str"):
        jitgrad.linalg.vector_norm(jitgrad.ones(2), "fro")


def test_norm_gradient_conventions():
    # 2-norm at 0: gradient 0, not NaN (PyTorch's masked division)
    x = jitgrad.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=F64, requires_grad=True)
    x.norm(dim=1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0.0, 0.0], [0.6, 0.8]])
    # inf norm: ties share the gradient
    y = jitgrad.tensor([1.0, -1.0, 1.0, 0.5], dtype=F64, requires_grad=True)
    y.norm(float("inf")).backward()
    np.testing.assert_allclose(y.grad.numpy(), [1 / 3, -1 / 3, 1 / 3, 0.0])
    # ord 0: no gradient at all (the grad stays None)
    z = jitgrad.tensor([1.0, 0.0], requires_grad=True)
    z.norm(p=0).backward()
    assert z.grad is None
    # gradcheck through Tensor.norm with p='fro' and dims
    w = jitgrad.tensor(np.random.default_rng(0).uniform(0.5, 2.0, (2, 3, 4)), dtype=F64,
                       requires_grad=True)
    assert gradcheck(lambda t: jitgrad.norm(t, p="fro", dim=(0, 2)), (w,))


def test_norm_matches_torch(torch):
    a = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 1e-3], [2.0, 2.0, -2.0]])
    for p in (2, 1, float("inf"), -float("inf"), 0, 3, 0.5, "fro", None):
        for dim in (None, 1, (0, 1)):
            j = jitgrad.tensor(a, requires_grad=True)
            t = torch.tensor(a, requires_grad=True)
            jn, tn = jitgrad.norm(j, p=p, dim=dim), torch.norm(t, p=p, dim=dim)
            np.testing.assert_allclose(jn.detach().numpy(), tn.detach().numpy(), rtol=1e-12)
            if p == 0:
                continue
            jn.sum().backward()
            tn.sum().backward()
            np.testing.assert_allclose(j.grad.numpy(), t.grad.numpy(), rtol=1e-12,
                                       err_msg=f"p={p} dim={dim}")


def test_norm_compiles():
    x = jitgrad.tensor(np.random.default_rng(1).normal(size=(3, 4)), requires_grad=True)
    f = jitgrad.compile(lambda t: t.norm(dim=1).sum() + t.norm(p=1), fullgraph=True)
    out = f(x)
    eager = x.norm(dim=1).sum() + x.norm(p=1)
    np.testing.assert_array_equal(f(x).detach().numpy(), eager.detach().numpy())
    (g1,) = jitgrad.autograd.grad(out, x)
    (g2,) = jitgrad.autograd.grad(eager, x)
    np.testing.assert_array_equal(g1.numpy(), g2.numpy())


# --------------------------------------------------------------------------- tril/triu
def test_tril_triu_values_and_methods():
    a = np.arange(12.0).reshape(3, 4)
    x = jitgrad.tensor(a)
    for k in (-2, -1, 0, 1, 3):
        np.testing.assert_array_equal(jitgrad.tril(x, k).numpy(), np.tril(a, k))
        np.testing.assert_array_equal(x.triu(diagonal=k).numpy(), np.triu(a, k))
    ints = jitgrad.ones(2, 3, 3, dtype=jitgrad.int64)
    assert jitgrad.tril(ints).dtype == jitgrad.int64
    np.testing.assert_array_equal(jitgrad.tril(ints).numpy()[1], np.tril(np.ones((3, 3))))


def test_tril_inplace_bumps_the_version():
    x = jitgrad.ones(3, 3)
    v = x._version
    assert x.tril_(-1) is x
    assert x._version == v + 1
    np.testing.assert_array_equal(x.numpy(), np.tril(np.ones((3, 3)), -1))
    y = jitgrad.ones(2, 2)
    y.triu_()
    np.testing.assert_array_equal(y.numpy(), [[1.0, 1.0], [0.0, 1.0]])


def test_tril_gradient_and_node():
    x = jitgrad.tensor(np.ones((3, 3)), dtype=F64, requires_grad=True)
    y = x.tril()
    assert type(y.grad_fn).__name__ == "TrilBackward0"
    assert type(x.triu(1).grad_fn).__name__ == "TriuBackward0"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.tril(np.ones((3, 3))))


def test_tril_errors_leave_input_unchanged():
    v = jitgrad.ones(3)
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        jitgrad.tril(v)
    with pytest.raises(RuntimeError, match="triu: input tensor must have at least 2 dimensions"):
        v.triu_()
    np.testing.assert_array_equal(v.numpy(), np.ones(3))
    with pytest.raises(TypeError, match="argument 'diagonal' must be int, not float"):
        jitgrad.ones(2, 2).tril(0.5)


def test_tril_causal_mask_compiles():
    """nanoGPT's causal mask: ``masked_fill(tril(ones) == 0, -inf)`` then softmax."""
    att = jitgrad.tensor(np.random.default_rng(2).normal(size=(2, 4, 4)), requires_grad=True)

    def f(a):
        mask = jitgrad.tril(jitgrad.ones(4, 4)).view(1, 4, 4)
        return a.masked_fill(mask == 0, float("-inf")).softmax(dim=-1)

    cf = jitgrad.compile(f, fullgraph=True)
    cf(att)
    np.testing.assert_array_equal(cf(att).detach().numpy(), f(att).detach().numpy())
    assert np.all(np.triu(f(att).detach().numpy()[0], 1) == 0.0)


# --------------------------------------------------------------------------------- out=
def test_out_writes_and_returns_out():
    out = jitgrad.empty(2)
    v = out._version
    r = jitgrad.norm(_x(), dim=1, out=out)
    assert r is out and out._version == v + 1
    np.testing.assert_allclose(out.numpy(), [math.sqrt(14), math.sqrt(18)], rtol=1e-6)
    t = jitgrad.empty(0)
    assert jitgrad.tril(jitgrad.ones(2, 2), out=t) is t and t.shape == (2, 2)


def test_out_resizes_with_pytorchs_warning():
    out = jitgrad.zeros(3)
    with pytest.warns(UserWarning, match=r"resized since it had shape \[3\], which does not "
                      r"match the required output shape \[\]"):
        jitgrad.norm(_x(), out=out)
    assert out.shape == ()


def test_out_errors_leave_out_unchanged():
    out = jitgrad.zeros(2)
    x = _x().requires_grad_()
    with pytest.raises(RuntimeError, match=r"norm\(\): functions with out=... arguments don't "
                       "support automatic differentiation, but one of the arguments requires "
                       "grad."):
        jitgrad.norm(x, dim=1, out=out)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                       "output type Long"):
        jitgrad.norm(_x(), dim=1, out=jitgrad.zeros(2, dtype=jitgrad.int64))
    with pytest.raises(TypeError, match=r"tril\(\): argument 'out' must be Tensor, not list"):
        jitgrad.tril(jitgrad.ones(2, 2), out=[1])
    with jitgrad.no_grad():
        jitgrad.norm(x, dim=1, out=out)  # allowed without grad mode
    np.testing.assert_allclose(out.numpy(), [math.sqrt(14), math.sqrt(18)], rtol=1e-6)
    leaf = jitgrad.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="functions with out=... arguments"):
        jitgrad.norm(_x(), dim=1, out=leaf)
    np.testing.assert_array_equal(leaf.detach().numpy(), [0.0, 0.0])
