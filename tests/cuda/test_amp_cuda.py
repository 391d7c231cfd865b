"""CUDA autocast and GradScaler (in the simulator in CI): the CUDA policy (float16 products,
float32 exponentials/sums/softmax/losses, promotion, the banned binary_cross_entropy), CPU
tensors untouched by CUDA autocast, and the AMP training recipe on CUDA tensors against the
same explicit casts on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F

F16, F32 = jitgrad.float16, jitgrad.float32


def _x(*shape, seed=0):
    return jitgrad.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32),
                          device="cuda")


def test_cuda_policy_dtypes():
    x, w = _x(4, 6), _x(3, 6, seed=1)
    with jitgrad.autocast("cuda"):
        assert jitgrad.is_autocast_enabled() and jitgrad.get_autocast_dtype("cuda") is F16
        h = F.linear(x, w)
        assert h.dtype == F16 and h.is_cuda
        assert (x @ w.t()).dtype == F16 and jitgrad.mv(x, x[0]).dtype == F16
        # float32 functions of a float16 input
        for y in (F.softmax(h, 1), F.log_softmax(h, 1), h.sum(), h.exp(), h ** 2,
                  h.cumsum(0), F.layer_norm(h, (3,)), h.logsumexp(1), h.norm(),
                  F.mse_loss(h, h.detach())):
            assert y.dtype == F32
        # unlisted functions keep their input's dtype
        for y in (h.mean(), h.relu(), h.tanh(), h.max(), F.gelu(h)):
            assert y.dtype == F16
        assert jitgrad.addcmul(h, x[:, :3], x[:, :3]).dtype == F32  # promote
        assert F.cross_entropy(h, jitgrad.tensor([0, 1, 2, 0], device="cuda")).dtype == F32
        # CPU tensors are not CUDA autocast's
        a = jitgrad.ones(2, 2)
        assert (a @ a).dtype == F32


def test_binary_cross_entropy_is_banned_under_cuda_autocast():
    p = _x(4).sigmoid()
    with jitgrad.autocast("cuda"):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, p.detach())
        assert F.binary_cross_entropy_with_logits(p, p.detach()).dtype == F32


def test_cuda_autocast_values_are_the_explicit_casts():
    """Under CUDA autocast a layer computes what the explicit float16 casts compute on the
    CPU (float16 products accumulate in float32 on both)."""
    x, w, b = _x(5, 8), _x(4, 8, seed=1), _x(4, seed=2)
    with jitgrad.autocast("cuda"):
        got = F.log_softmax(F.linear(x, w, b), 1)
    xc, wc, bc = x.cpu().half(), w.cpu().half(), b.cpu().half()
    want = F.log_softmax(F.linear(xc, wc, bc).float(), 1)
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-3, atol=1e-3)


def test_amp_training_step_on_cuda_matches_cpu_casts():
    """The AMP recipe on CUDA tensors (GradScaler("cuda")) and the same float16 casts written
    out on the CPU give the same losses and parameters."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = rng.integers(0, 3, 8)
    w0 = (rng.standard_normal((3, 6)) * 0.3).astype(np.float32)

    def run_cuda():
        w = jitgrad.tensor(w0, device="cuda", requires_grad=True)
        opt = jitgrad.optim.SGD([w], lr=0.5)
        scaler = jitgrad.amp.GradScaler("cuda", init_scale=64.0, growth_interval=2)
        xs, ys = jitgrad.tensor(x, device="cuda"), jitgrad.tensor(y, device="cuda")
        losses = []
        for _ in range(4):
            with jitgrad.autocast("cuda"):
                loss = F.cross_entropy(xs @ w.t(), ys)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(loss.item())
        return losses, w.detach().cpu().numpy(), scaler.get_scale()

    def run_cpu():
        w = jitgrad.tensor(w0, requires_grad=True)
        opt = jitgrad.optim.SGD([w], lr=0.5)
        xs, ys = jitgrad.tensor(x), jitgrad.tensor(y)
        losses = []
        for _ in range(4):
            loss = F.cross_entropy((xs.half() @ w.half().t()).float(), ys)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, w.detach().numpy()

    cl, cw, scale = run_cuda()
    hl, hw = run_cpu()
    np.testing.assert_allclose(cl, hl, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(cw, hw, rtol=1e-3, atol=1e-4)
    assert scale == 256.0  # grew twice (interval 2, four clean steps)


def test_grad_scaler_on_cuda_finds_infs_and_keeps_devices():
    w = _x(3).requires_grad_()
    opt = jitgrad.optim.SGD([w], lr=0.1)
    scaler = jitgrad.amp.GradScaler("cuda", init_scale=4.0)
    scaled = scaler.scale(w.sum())
    assert scaled.is_cuda
    scaled.backward()
    w.grad[0] = float("inf")
    before = w.detach().cpu().numpy().copy()
    scaler.step(opt)
    scaler.update()
    np.testing.assert_array_equal(w.detach().cpu().numpy(), before)
    assert scaler.get_scale() == 2.0 and scaler._scale.is_cuda


def test_deprecated_cuda_spellings():
    with pytest.warns(FutureWarning, match="torch.cuda.amp.autocast"):
        ctx = jitgrad.cuda.amp.autocast()
    with ctx:
        assert (_x(2, 2) @ _x(2, 2)).dtype == F16
    with pytest.warns(FutureWarning, match="torch.cuda.amp.GradScaler"):
        scaler = jitgrad.cuda.amp.GradScaler(init_scale=8.0)
    assert scaler.get_scale() == 8.0 and scaler.is_enabled()
