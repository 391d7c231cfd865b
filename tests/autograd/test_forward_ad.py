"""jitgrad.autograd.forward_ad (torch.autograd.forward_ad): dual tensors, tangents by the
double-backward trick, PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as torch
import jitgrad.autograd.forward_ad as fwAD


def _f(x, w):
    return torch.tanh(x @ w).sin() * x.sum()


def test_tangents_are_jacobian_vector_products():
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal(3))
    w = torch.tensor(rng.standard_normal((3, 4)))
    tx, tw = torch.tensor(rng.standard_normal(3)), torch.tensor(rng.standard_normal((3, 4)))
    with fwAD.dual_level():
        out = _f(fwAD.make_dual(x, tx), fwAD.make_dual(w, tw))
        primal, tangent = fwAD.unpack_dual(out)
    jx, jw = torch.autograd.functional.jacobian(_f, (x, w))
    expected = jx.numpy() @ tx.numpy() + np.einsum("oij,ij->o", jw.numpy(), tw.numpy())
    np.testing.assert_allclose(tangent.numpy(), expected, rtol=1e-12)
    np.testing.assert_array_equal(primal.numpy(), _f(x, w).numpy())
    assert not primal.requires_grad


def test_unpack_of_duals_and_of_independent_tensors():
    x = torch.tensor([1.0, 2.0])
    t = torch.tensor([1.0, 0.5])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        assert torch.equal(fwAD.unpack_dual(d).tangent, t)
        assert fwAD.unpack_dual(torch.ones(2)).tangent is None
        assert fwAD.unpack_dual(d * 0 + 1).tangent.tolist() == [0.0, 0.0]
        assert fwAD.unpack_dual(3).primal == 3
    assert fwAD.unpack_dual(d).tangent is None  # the level is closed


def test_forward_over_reverse_keeps_the_primal_graph():
    w = torch.ones(2, requires_grad=True)
    with fwAD.dual_level():
        out = fwAD.unpack_dual(fwAD.make_dual(w, torch.ones(2)) * 3)
    assert out.primal.requires_grad and out.tangent.tolist() == [3.0, 3.0]
    out.primal.sum().backward()
    assert w.grad.tolist() == [3.0, 3.0]


def test_errors_match_pytorch():
    x = torch.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="no level exists"):
        fwAD.make_dual(x, torch.ones(2))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="different size than that of the original"):
            fwAD.make_dual(x, torch.ones(3))
        with pytest.raises(ValueError, match="Expected primal to be floating point"):
            fwAD.make_dual(torch.tensor([1, 2]), torch.ones(2))
        with pytest.raises(RuntimeError, match="Nested forward mode AD"):
            fwAD.enter_dual_level()


def test_an_untracked_op_on_a_dual_raises_instead_of_a_missing_tangent():
    from jitgrad._thread_modes import TRACING

    x = torch.tensor([1.0, 2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torch.ones(2))
        with torch.no_grad():
            z = d.exp()
        with pytest.raises(RuntimeError, match="without grad mode"):
            fwAD.unpack_dual(z)
        with pytest.raises(RuntimeError, match="without grad mode"):
            fwAD.unpack_dual(d * 2)  # (any later unpack: the level cannot tell)
    assert not TRACING  # (the level's slow-path marker is gone)
    with fwAD.dual_level():  # a new level starts clean
        d = fwAD.make_dual(x, torch.ones(2))
        assert fwAD.unpack_dual(d.exp()).tangent is not None


def test_no_grad_work_on_other_tensors_and_backward_passes_are_fine():
    x = torch.tensor([1.0, 2.0, 3.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torch.tensor([1.0, 0.0, 0.5]))
        lin = torch.nn.Linear(3, 2)  # (its initialisation runs under no_grad)
        with torch.no_grad():
            for p in lin.parameters():
                p.copy_(torch.full_like(p, 0.5))
        assert fwAD.unpack_dual(lin(d)).tangent.tolist() == [0.75, 0.75]
        w = torch.ones(3, requires_grad=True)
        (w * d).sum().backward()  # (the engine's rules run without grad mode)
        assert w.grad.tolist() == [1.0, 2.0, 3.0]
        assert fwAD.unpack_dual(d.sin()).tangent is not None


def test_matches_pytorch():
    real = pytest.importorskip("torch")
    import torch.autograd.forward_ad as real_fwad  # noqa: PLC0415

    rng = np.random.default_rng(1)
    a, v = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))

    def run(lib, ad):
        with ad.dual_level():
            d = ad.make_dual(lib.tensor(a), lib.tensor(v))
            y = (d.softmax(-1) * d.exp()).sum(0)
            return ad.unpack_dual(y).tangent.detach().numpy()

    np.testing.assert_allclose(run(torch, fwAD), run(real, real_fwad), rtol=1e-12)
