"""Optimizer steps and gradient clipping on CUDA parameters equal the CPU's.

The same parameters (on the CPU, and moved with ``.cuda()``) take a few steps of each
optimizer on the gradients of one arithmetic loss (its gradients have the CPU's bits on
CUDA); the parameters, the optimizer state and ``clip_grad_norm_``'s clipped gradients stay
on the parameters' device and equal the CPU's.
"""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as torch
from jitgrad import optim
from jitgrad.nn.utils import clip_grad_norm_

SHAPES = [(3, 4), (4,), ()]

OPTIMIZERS = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.1),
    "sgd-momentum-nesterov-wd": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                                     weight_decay=0.01),
    "adam": lambda ps: optim.Adam(ps, lr=0.01),
    "adam-amsgrad-wd": lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True, weight_decay=0.1),
    "adamw": lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.05),
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01),
    "rmsprop-centered-momentum": lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5,
                                                          centered=True, weight_decay=0.01),
    "adamax-wd": lambda ps: optim.Adamax(ps, lr=0.01, weight_decay=0.05),
    "nadamw": lambda ps: optim.NAdam(ps, lr=0.01, weight_decay=0.05,
                                     decoupled_weight_decay=True),
    "radam-capturable": lambda ps: optim.RAdam(ps, lr=0.01, capturable=True),
    # fused=True: the update as one compiled plan (CUDA kernels on CUDA parameters)
    "sgd-momentum-fused": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, fused=True),
    "adamw-fused": lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.05, fused=True),
}


def _params(dev: str, dtype) -> list:
    rng = np.random.default_rng(11)
    out = []
    for s in SHAPES:
        t = torch.tensor(rng.uniform(-1.0, 1.0, s).astype(dtype))
        out.append((t.cuda() if dev == "cuda" else t).requires_grad_())
    return out


def _loss(ps: list, k: int):
    """An arithmetic loss whose gradients are exact on both devices (different each step)."""
    total = None
    for i, p in enumerate(ps):
        term = (p * p * (0.5 + 0.25 * (i + k)) - p * (0.125 * k)).sum()
        total = term if total is None else total + term
    return total


def _host(x) -> np.ndarray:
    return x.detach().cpu().numpy()


def _state_arrays(opt) -> list:
    """The optimizer's state tensors (momentum buffers, moments), in a fixed order."""
    out = []
    for group in opt.param_groups:
        for p in group["params"]:
            for key, v in sorted(opt.state[p].items()):
                # 0-d "step" and NAdam's "mu_product" live on the CPU (unless capturable), as
                # PyTorch keeps them
                if isinstance(v, torch.Tensor) and key not in ("step", "mu_product"):
                    out.append((key, v))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_on_cuda_equal_the_cpu(name, dtype):
    runs = {}
    for dev in ("cpu", "cuda"):
        ps = _params(dev, dtype)
        opt = OPTIMIZERS[name](ps)
        for k in range(3):
            opt.zero_grad()
            _loss(ps, k).backward()
            assert all(p.grad.device.type == dev for p in ps)
            opt.step()
        assert all(p.device.type == dev for p in ps)
        state = _state_arrays(opt)
        assert state or name == "sgd"
        assert all(v.device.type == dev for _, v in state), [(k, v.device) for k, v in state]
        runs[dev] = ([_host(p) for p in ps], [(k, _host(v)) for k, v in state])
    (p_cpu, s_cpu), (p_cuda, s_cuda) = runs["cpu"], runs["cuda"]
    for a, b in zip(p_cpu, p_cuda):
        np.testing.assert_array_equal(b, a)
    assert [k for k, _ in s_cpu] == [k for k, _ in s_cuda]
    for (k, a), (_, b) in zip(s_cpu, s_cuda):
        np.testing.assert_array_equal(b, a, err_msg=k)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_on_cuda_equals_the_cpu(norm_type, max_norm):
    res = {}
    for dev in ("cpu", "cuda"):
        ps = _params(dev, np.float64)
        _loss(ps, 2).backward()
        total = clip_grad_norm_(ps, max_norm, norm_type=norm_type)
        assert total.device.type == dev
        assert all(p.grad.device.type == dev for p in ps)
        res[dev] = (_host(total), [_host(p.grad) for p in ps])
    (t_cpu, g_cpu), (t_cuda, g_cuda) = res["cpu"], res["cuda"]
    # the norm of the norms: sqrt / sums in NumPy's order on CUDA, jitgrad's on the CPU
    np.testing.assert_allclose(t_cuda, t_cpu, rtol=1e-14)
    for a, b in zip(g_cpu, g_cuda):
        np.testing.assert_allclose(b, a, rtol=1e-14, atol=0)
    if max_norm < 1.0:  # the gradients were scaled down to the norm asked for
        assert abs(float(np.linalg.norm(np.concatenate([g.ravel() for g in g_cuda]),
                                        ord=norm_type)) - max_norm) < 1e-5
