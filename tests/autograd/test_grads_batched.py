"""autograd.grad(..., is_grads_batched=True): one gradient per batch item of grad_outputs,
with PyTorch's values and errors."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as torch


def test_batched_vjps_are_the_jacobian_rows():
    rng = np.random.default_rng(0)
    w = torch.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    x = torch.tensor(rng.standard_normal(3), requires_grad=True)
    y = torch.tanh(w @ x)
    jx, jw = torch.autograd.grad(y, (x, w), torch.eye(4, dtype=torch.float64),
                                 is_grads_batched=True)
    assert jx.shape == (4, 3) and jw.shape == (4, 4, 3)
    full = torch.autograd.functional.jacobian(lambda x_, w_: torch.tanh(w_ @ x_), (x, w))
    np.testing.assert_allclose(jx.numpy(), full[0].numpy(), rtol=1e-14)
    np.testing.assert_allclose(jw.numpy(), full[1].numpy(), rtol=1e-14)
    with pytest.raises(RuntimeError):  # the graph was freed by the last item's backward
        torch.autograd.grad(y, x, torch.ones(4, dtype=torch.float64))


def test_create_graph_gives_differentiable_batched_gradients():
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(x ** 3, x, torch.eye(3, dtype=torch.float64),
                               is_grads_batched=True, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.diag(3 * x.detach().numpy() ** 2))
    (gg,) = torch.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * x.detach().numpy())


def test_unused_inputs_and_errors():
    x = torch.randn(3, requires_grad=True)
    u = torch.randn(3, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        torch.autograd.grad(y, (x, u), torch.eye(3), is_grads_batched=True, retain_graph=True)
    gx, gu = torch.autograd.grad(y, (x, u), torch.eye(3), is_grads_batched=True,
                                 allow_unused=True, retain_graph=True)
    assert gu is None and gx.shape == (3, 3)
    _, zu = torch.autograd.grad(y, (x, u), torch.eye(3), is_grads_batched=True,
                                materialize_grads=True, retain_graph=True)
    np.testing.assert_array_equal(zu.numpy(), np.zeros(3))  # PyTorch's: u's own shape
    with pytest.raises(RuntimeError, match="first dimension of each grad_output as the batch"):
        torch.autograd.grad(y, x, torch.ones(2, 2), is_grads_batched=True, retain_graph=True)
    with pytest.raises(RuntimeError, match="implicitly created only for scalar"):
        torch.autograd.grad(y, x, None, is_grads_batched=True, retain_graph=True)
    w = torch.randn(3, requires_grad=True)
    with pytest.raises(ValueError, match=r"got sizes \[2, 4\]"):
        torch.autograd.grad((x * 2, w * 3), (x, w), (torch.ones(2, 3), torch.ones(4, 3)),
                            is_grads_batched=True, retain_graph=True)
    (g,) = torch.autograd.grad(y, x, torch.ones(0, 3), is_grads_batched=True)
    assert g.shape == (0, 3)


def test_matches_pytorch():
    real = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a, v = rng.standard_normal((5, 4)), rng.standard_normal((2, 5))

    def run(lib):
        x = lib.tensor(a, requires_grad=True)
        y = (x.sin() * x).sum(1)
        (g,) = lib.autograd.grad(y, x, lib.tensor(v), is_grads_batched=True)
        return g.detach().numpy()

    np.testing.assert_allclose(run(torch), run(real), rtol=1e-14)
