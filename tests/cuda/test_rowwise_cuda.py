"""The softmax family on CUDA tensors runs one row kernel per op (jitgrad/cuda/rowwise.py):
values and gradients within a few ulp of the CPU's, NaN/inf rows as PyTorch, rows longer
than the lanes, every dim, the same bits compiled as eager, and the same bits whatever the
launch configuration."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as torch
import jitgrad.nn.functional as F
from jitgrad.cuda import rowwise as cuda_rowwise

F32, F64 = np.float32, np.float64
OPS = {
    "softmax": lambda x, d: torch.softmax(x, d),
    "log_softmax": lambda x, d: torch.log_softmax(x, d),
    "logsumexp": lambda x, d: torch.logsumexp(x, d),
}


def _ulps(dtype) -> float:
    return 8 * np.finfo(dtype).eps


def _both(fn, a, dim, dtype):
    """(value, gradient) on the CPU and on CUDA, as host arrays."""
    w = np.random.default_rng(9).standard_normal(
        np.asarray(fn(torch.tensor(a), dim).shape)).astype(dtype)
    out = []
    for dev in ("cpu", "cuda"):
        x = torch.tensor(a, device=dev, requires_grad=True)
        y = fn(x, dim)
        assert y.device.type == dev
        (y * torch.tensor(w, device=dev)).sum().backward()
        out.append((y.detach().cpu().numpy(), x.grad.cpu().numpy()))
    return out


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name,shape,dim", [  # (tests/cuda/test_rows_cuda.py: short rows)
    ("logsumexp", (1, 1), 1), ("logsumexp", (3, 5), 0), ("logsumexp", (2, 3, 4), 1),
    ("softmax", (2, 300), -1), ("log_softmax", (2, 300), -1), ("logsumexp", (2, 300), -1)])
def test_values_and_gradients_match_the_cpu(name, shape, dim, dtype):
    a = (np.random.default_rng(len(shape) + shape[-1]).standard_normal(shape) * 3).astype(dtype)
    (cpu_y, cpu_g), (cuda_y, cuda_g) = _both(OPS[name], a, dim, dtype)
    assert cuda_y.dtype == cpu_y.dtype and cuda_y.shape == cpu_y.shape
    tol = _ulps(dtype)
    np.testing.assert_allclose(cuda_y, cpu_y, rtol=tol, atol=tol)
    np.testing.assert_allclose(cuda_g, cpu_g, rtol=tol * 4, atol=tol * 4)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_special_rows_as_pytorch(dtype):
    inf, nan = np.inf, np.nan
    a = np.array([[1.0, inf, 0.0], [-inf, -inf, -inf], [0.0, -inf, 2.0], [1.0, nan, 0.0],
                  [-inf, 0.0, 1.0]], dtype)
    for name, fn in OPS.items():
        want = fn(torch.tensor(a), 1).numpy()
        got = fn(torch.tensor(a, device="cuda"), 1).cpu().numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)],
                                   rtol=_ulps(dtype), err_msg=name)


def test_one_kernel_per_op_with_the_same_bits_compiled_and_at_any_block_size(monkeypatch):
    a = np.random.default_rng(3).standard_normal((4, 200)).astype(F32)
    x = torch.tensor(a, device="cuda")
    launched = []
    real = cuda_rowwise.kernels

    def counting(dtype):
        mod = real(dtype)
        launched.append(dtype)
        return mod

    monkeypatch.setattr(cuda_rowwise, "kernels", counting)
    eager = [OPS[n](x, 1).cpu().numpy() for n in sorted(OPS)]
    assert len(launched) == 3  # one row kernel per op
    compiled = torch.compile(lambda t: (torch.softmax(t, 1), torch.log_softmax(t, 1),
                                        torch.logsumexp(t, 1)))
    got = dict(zip(("softmax", "log_softmax", "logsumexp"), compiled(x)))
    for n, e in zip(sorted(OPS), eager):
        np.testing.assert_array_equal(got[n].cpu().numpy(), e)
    monkeypatch.setattr(cuda_rowwise, "SIM_THREADS", 8)
    monkeypatch.setattr(cuda_rowwise.runtime, "THREADS", {"sim": 8, "gpu": 8})
    for n, e in zip(sorted(OPS), eager):
        np.testing.assert_array_equal(OPS[n](x, 1).cpu().numpy(), e)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("affine", [(True, True), (True, False)])  # (none: test_rows_cuda)
@pytest.mark.parametrize("shape,norm", [((3, 5), (5,)), ((2, 150), (150,)), ((2, 4, 6), (4, 6))])
def test_layer_norm_values_and_gradients_match_the_cpu(shape, norm, affine, dtype):
    import jitgrad.nn as nn

    rng = np.random.default_rng(shape[-1])
    a = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    w = rng.standard_normal(norm).astype(dtype) if affine[0] else None
    b = rng.standard_normal(norm).astype(dtype) if affine[1] else None
    cot = rng.standard_normal(shape).astype(dtype)
    res = {}
    for dev in ("cpu", "cuda"):
        x = torch.tensor(a, device=dev, requires_grad=True)
        wt = None if w is None else torch.tensor(w, device=dev, requires_grad=True)
        bt = None if b is None else torch.tensor(b, device=dev, requires_grad=True)
        y = F.layer_norm(x, norm, wt, bt, 1e-5)
        assert y.device.type == dev
        (y * torch.tensor(cot, device=dev)).sum().backward()
        res[dev] = [y.detach().cpu().numpy(), x.grad.cpu().numpy()] + \
            [t.grad.cpu().numpy() for t in (wt, bt) if t is not None]
    tol = 64 * np.finfo(dtype).eps
    for c, g in zip(res["cuda"], res["cpu"]):
        assert c.dtype == g.dtype
        np.testing.assert_allclose(c, g, rtol=tol, atol=tol)
    assert nn.LayerNorm(norm).to("cuda")(torch.tensor(a, device="cuda")).device.type == "cuda"


def test_layer_norm_runs_the_row_kernel_with_the_same_bits_compiled(monkeypatch):
    a = np.random.default_rng(1).standard_normal((4, 40)).astype(F32)
    x = torch.tensor(a, device="cuda", requires_grad=True)
    w = torch.tensor(np.linspace(0.5, 1.5, 40, dtype=F32), device="cuda", requires_grad=True)
    calls = []
    real = cuda_rowwise.layer_norm_cuda

    def counting(name, *args):
        calls.append(name)
        return real(name, *args)

    monkeypatch.setattr(cuda_rowwise, "layer_norm_cuda", counting)

    def f(x, w):
        return (F.layer_norm(x, (40,), w, None) ** 2).sum()

    loss = f(x, w)
    gx, gw = torch.autograd.grad(loss, (x, w))
    # the weight's gradient reads x normalised by the forward's kernel (no weight, no bias)
    assert sorted(calls) == ["layer_norm", "layer_norm", "layer_norm_backward"]
    cf = torch.compile(f)
    loss_c = cf(x, w)
    gx_c, gw_c = torch.autograd.grad(cf(x, w), (x, w))
    assert loss_c.item() == loss.item()
    np.testing.assert_array_equal(gx_c.cpu().numpy(), gx.cpu().numpy())
    np.testing.assert_array_equal(gw_c.cpu().numpy(), gw.cpu().numpy())
