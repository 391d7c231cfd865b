"""float16 tensors (``.half()``, ``dtype=jitgrad.float16``): sums and means add in float32
and round once, as PyTorch's do; losses and training steps run; a compiled function on
float16 tensors runs eagerly (its kernels compute in float32 and float64) with a warning,
giving eager's results. These crashed with an internal KeyError / NotImplementedError."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad as torch
import jitgrad.nn.functional as F


def _half(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float16)


@pytest.mark.parametrize("dims", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("fn", ["sum", "mean"])
def test_half_sums_add_in_float32_and_round_once(fn, dims):
    a = _half((37, 300))
    x = torch.tensor(a)
    got = getattr(x, fn)() if dims is None else getattr(x, fn)(dims)
    assert got.dtype == torch.float16
    ref = getattr(a.astype(np.float64), fn)(axis=dims)  # float32 adds: within rounding
    np.testing.assert_allclose(got.numpy().astype(np.float64), ref, rtol=2e-3, atol=2e-3)
    exact = getattr(a.astype(np.float32), fn)(axis=dims).astype(np.float16)
    # one rounding of a float32 total: at most one half-ulp step from NumPy's float32 total
    assert np.all(np.abs(got.numpy().astype(np.float32) - exact.astype(np.float32))
                  <= np.spacing(np.abs(exact)).astype(np.float32) + 1e-7)


def test_half_sums_match_pytorch():
    pt = pytest.importorskip("torch")
    a = _half((64, 513), seed=1)
    for dims in ((), (0,), (1,)):
        ours = torch.tensor(a).sum(dims) if dims else torch.tensor(a).sum()
        theirs = pt.tensor(a).sum(dims) if dims else pt.tensor(a).sum()
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        np.testing.assert_array_equal((torch.tensor(a).mean(dims) if dims else
                                       torch.tensor(a).mean()).numpy(),
                                      (pt.tensor(a).mean(dims) if dims else
                                       pt.tensor(a).mean()).numpy())


def test_half_cross_entropy_and_its_gradient_match_pytorch():
    pt = pytest.importorskip("torch")
    a, t = _half((8, 10), seed=2), np.arange(8) % 10
    x = torch.tensor(a, requires_grad=True)
    loss = F.cross_entropy(x, torch.tensor(t))
    loss.backward()
    xt = pt.tensor(a, requires_grad=True)
    lt = pt.nn.functional.cross_entropy(xt, pt.tensor(t))
    lt.backward()
    assert loss.dtype == torch.float16 and x.grad.dtype == torch.float16
    np.testing.assert_allclose(loss.item(), lt.item(), rtol=1e-3)
    np.testing.assert_allclose(x.grad.numpy().astype(np.float32),
                               xt.grad.numpy().astype(np.float32), atol=2e-3)


def test_a_half_training_step_runs_and_lowers_the_loss():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 3)).half()
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    x = torch.tensor(_half((32, 6), seed=3))
    y = torch.tensor(np.arange(32) % 3)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(p.dtype == torch.float16 and p.grad.dtype == torch.float16
               for p in model.parameters())
    assert losses[-1] < losses[0]


def test_a_compiled_half_function_runs_eagerly_with_eagers_results():
    def f(a, w):
        return (torch.tanh(a @ w) * 2.0).sum()

    a = torch.tensor(_half((5, 4), seed=4), requires_grad=True)
    w = torch.tensor(_half((4, 3), seed=5))
    ref = f(a, w)
    ref.backward()
    g_ref = a.grad.numpy().copy()
    a.grad = None
    cf = torch.compile(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = cf(a, w)
        out2 = cf(a, w)
    msgs = [str(m.message) for m in caught]
    assert len(msgs) == 1 and "running f eagerly" in msgs[0] and "float16" in msgs[0]
    assert "compiled kernels compute in float32 and float64" in msgs[0]
    out2.backward()
    assert out.item() == ref.item() and out2.item() == ref.item()
    np.testing.assert_array_equal(a.grad.numpy(), g_ref)
    f32 = torch.compile(lambda v: (v * 2.0).sum())  # float32 compiles as before
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f32(torch.ones(3)).item() == 6.0


def test_half_sums_on_cuda_equal_the_cpus():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA")
    a = _half((9, 40), seed=6)
    for dims in ((), (0,), (1,)):
        cpu = torch.tensor(a).sum(dims) if dims else torch.tensor(a).sum()
        dev = torch.tensor(a, device="cuda")
        dev = dev.sum(dims) if dims else dev.sum()
        assert dev.device == "cuda:0" and dev.dtype == torch.float16
        np.testing.assert_array_equal(dev.cpu().numpy(), cpu.numpy())
