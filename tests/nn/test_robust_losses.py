"""``F.smooth_l1_loss`` / ``nn.SmoothL1Loss`` and ``F.huber_loss`` / ``nn.HuberLoss``: the
API around the registered ops (values, gradients and nodes of every sample: tests/ops),
``beta=0``, Huber's ``weight``, the legacy reduction flags, errors and PyTorch conformance."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F

X = np.array([[0.2, -3.0, 1.0], [0.5, 2.5, -0.7]])
Y = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])


def _pair(dtype=jitgrad.float64):
    return jitgrad.tensor(X, dtype=dtype, requires_grad=True), jitgrad.tensor(Y, dtype=dtype)


def test_values_and_nodes():
    x, y = _pair()
    d = np.abs(X - Y)
    sl1 = F.smooth_l1_loss(x, y, beta=0.5)
    np.testing.assert_allclose(sl1.item(), np.where(d < 0.5, d * d, d - 0.25).mean())
    assert type(sl1.grad_fn).__name__ == "SmoothL1LossBackward0"
    hub = F.huber_loss(x, y, reduction="sum", delta=2.0)
    np.testing.assert_allclose(hub.item(), np.where(d < 2.0, 0.5 * d * d, 2.0 * (d - 1.0)).sum())
    assert type(hub.grad_fn).__name__ == "HuberLossBackward0"
    (g,) = jitgrad.autograd.grad(hub, x, create_graph=True)
    assert type(g.grad_fn).__name__ == "HuberLossBackwardBackward0"
    np.testing.assert_allclose(g.detach().numpy(), np.clip(X - Y, -2.0, 2.0))


def test_beta_zero_is_l1_and_legacy_flags():
    x, y = _pair()
    r = F.smooth_l1_loss(x, y, beta=0.0)
    assert type(r.grad_fn).__name__ == "MeanBackward0"
    np.testing.assert_allclose(r.item(), np.abs(X - Y).mean())
    assert F.smooth_l1_loss(x, y, reduce=False).shape == (2, 3)
    np.testing.assert_allclose(F.smooth_l1_loss(x, y, size_average=False).item(),
                               F.smooth_l1_loss(x, y, reduction="sum").item())


def test_huber_weight():
    x, y = _pair()
    w = jitgrad.tensor(np.arange(6.0).reshape(2, 3))
    d = np.abs(X - Y)
    elem = np.where(d < 1.0, 0.5 * d * d, d - 0.5)
    np.testing.assert_allclose(F.huber_loss(x, y, weight=w).item(), (elem * w.numpy()).mean())
    np.testing.assert_allclose(F.huber_loss(x, y, reduction="none", weight=w).detach().numpy(),
                               elem * w.numpy())
    with pytest.raises(ValueError, match="Weights and input must have the same size."):
        F.huber_loss(x, y, weight=jitgrad.ones(3))


def test_errors():
    x, y = _pair()
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values "
                       "for beta."):
        F.smooth_l1_loss(x, y, beta=-1.0)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values "
                       "for delta."):
        F.huber_loss(x, y, delta=0.0)
    with pytest.raises(ValueError, match="x is not a valid value for reduction"):
        F.smooth_l1_loss(x, y, reduction="x")
    with pytest.raises(ValueError, match="x is not a valid value for reduction"):
        F.huber_loss(x, y, reduction="x")
    with pytest.raises(NotImplementedError, match="\"smooth_l1_cpu\" not implemented for 'Long'"):
        F.smooth_l1_loss(jitgrad.tensor([1, 2]), jitgrad.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match="\"huber_cpu\" not implemented for 'Long'"):
        F.huber_loss(jitgrad.tensor([1, 2]), jitgrad.tensor([1, 2]))
    with pytest.warns(UserWarning, match="different to the input size"):
        F.smooth_l1_loss(x, jitgrad.zeros(3, dtype=jitgrad.float64))


def test_modules():
    x, y = _pair()
    assert nn.SmoothL1Loss(beta=0.5).beta == 0.5
    assert nn.HuberLoss(delta=2.0).delta == 2.0
    assert repr(nn.HuberLoss()) == "HuberLoss()"
    np.testing.assert_array_equal(nn.SmoothL1Loss(reduction="sum", beta=0.5)(x, y).item(),
                                  F.smooth_l1_loss(x, y, reduction="sum", beta=0.5).item())
    np.testing.assert_array_equal(nn.HuberLoss(reduction="none", delta=0.3)(x, y).detach()
                                  .numpy(), F.huber_loss(x, y, reduction="none", delta=0.3)
                                  .detach().numpy())


def test_match_torch():
    torch = pytest.importorskip("torch")
    for red in ("mean", "sum", "none"):
        for mod, kw in ((nn.SmoothL1Loss, {"beta": 0.7}), (nn.SmoothL1Loss, {"beta": 0.0}),
                        (nn.HuberLoss, {"delta": 0.8})):
            j = jitgrad.tensor(X, requires_grad=True)
            t = torch.tensor(X, requires_grad=True)
            jl = mod(reduction=red, **kw)(j, jitgrad.tensor(Y))
            tl = getattr(torch.nn, mod.__name__)(reduction=red, **kw)(t, torch.tensor(Y))
            np.testing.assert_allclose(jl.detach().numpy(), tl.detach().numpy(), rtol=1e-12)
            jl.sum().backward()
            tl.sum().backward()
            np.testing.assert_allclose(j.grad.numpy(), t.grad.numpy(), rtol=1e-12)
            assert type(jl.grad_fn).__name__ == type(tl.grad_fn).__name__
    w = np.arange(6.0).reshape(2, 3)
    jl = F.huber_loss(jitgrad.tensor(X), jitgrad.tensor(Y), weight=jitgrad.tensor(w))
    tl = torch.nn.functional.huber_loss(torch.tensor(X), torch.tensor(Y), weight=torch.tensor(w))
    np.testing.assert_allclose(jl.item(), tl.item(), rtol=1e-12)
