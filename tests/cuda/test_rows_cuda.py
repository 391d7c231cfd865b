"""Row ops on CUDA tensors: softmax, log_softmax, layer_norm and cross_entropy run their
NumPy formulations on the device (CuPy on a GPU; the CPU runs Numba row kernels with
jitgrad's vmath), forward and backward, at edge sizes and in float32 too (the registry suite
checks float32 forward only). Values agree with the CPU within the transcendentals' few ulp:
the registry suite's tolerance."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as torch
import jitgrad.nn.functional as F

#: relative / absolute tolerance (as tests/cuda/test_registry_cuda.py's TOL)
TOL = {np.float32: (2e-6, 1e-6), np.float64: (1e-13, 1e-14)}

ROW_OPS = {
    "softmax": lambda x: F.softmax(x, dim=-1),
    "log_softmax": lambda x: F.log_softmax(x, dim=-1),
    "softmax_dim0": lambda x: F.softmax(x, dim=0),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
}


def _run(fn, a, dev):
    x = torch.tensor(a, device=dev, requires_grad=True)
    y = fn(x)
    w = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(a.dtype)
    (y * torch.tensor(w, device=dev)).sum().backward()
    assert y.device.type == dev and x.grad.device.type == dev
    return y.detach().cpu().numpy(), x.grad.cpu().numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (5, 37), (2, 60)])
@pytest.mark.parametrize("name", sorted(ROW_OPS))
def test_row_ops_forward_and_backward_equal_the_cpu(name, shape, dtype):
    a = (np.random.default_rng(0).standard_normal(shape) * 3).astype(dtype)
    cpu = _run(ROW_OPS[name], a, "cpu")
    cuda = _run(ROW_OPS[name], a, "cuda")
    rtol, atol = TOL[dtype]
    for what, c, g in zip(("forward", "gradient"), cpu, cuda):
        assert g.dtype == c.dtype
        np.testing.assert_allclose(g, c, rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_on_cuda_equals_the_cpu(dtype):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((7, 5)).astype(dtype)
    t = np.array([0, 4, 2, 2, 1, 3, 0])
    out = {}
    for dev in ("cpu", "cuda"):
        x = torch.tensor(a, device=dev, requires_grad=True)
        loss = F.cross_entropy(x, torch.tensor(t, device=dev), label_smoothing=0.1)
        loss.backward()
        out[dev] = loss.item(), x.grad.cpu().numpy()
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(out["cuda"][0], out["cpu"][0], rtol=rtol)
    np.testing.assert_allclose(out["cuda"][1], out["cpu"][1], rtol=rtol, atol=atol)
