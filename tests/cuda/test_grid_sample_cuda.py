"""``affine_grid`` + ``grid_sample`` and the special functions on CUDA tensors: the CPU's
values and gradients, results and gradients on the input's device."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_on_cuda_equals_cpu(mode):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 3, 4))
    theta = np.array([[[0.9, 0.2, 0.1], [-0.1, 1.1, 0.05]]])
    results = []
    for dev in ("cpu", "cuda"):
        xt = jitgrad.tensor(x, device=dev, requires_grad=True)
        th = jitgrad.tensor(theta, device=dev, requires_grad=True)
        grid = F.affine_grid(th, (1, 2, 2, 3), align_corners=False)
        y = F.grid_sample(xt, grid, mode=mode, padding_mode="reflection",
                          align_corners=False)
        assert y.device.type == dev
        y.square().sum().backward()
        assert xt.grad.device.type == dev and th.grad.device.type == dev
        results.append((y.detach().cpu().numpy(), xt.grad.cpu().numpy(), th.grad.cpu().numpy()))
    for cpu, cuda in zip(*results):
        np.testing.assert_allclose(cuda, cpu, rtol=1e-13, atol=1e-14)


def test_special_functions_on_cuda_equal_cpu():
    x = np.array([0.3, 1.7, 4.2])
    for fn in (jitgrad.lgamma, jitgrad.digamma, lambda t: jitgrad.polygamma(2, t),
               jitgrad.special.i1e, lambda t: jitgrad.erfinv(t * 0.2)):
        outs = []
        for dev in ("cpu", "cuda"):
            t = jitgrad.tensor(x, device=dev, requires_grad=True)
            y = fn(t)
            y.sum().backward()
            assert y.device.type == dev and t.grad.device.type == dev
            outs.append((y.detach().cpu().numpy(), t.grad.cpu().numpy()))
        np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-14)
        np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-14)
