"""ASGD, Rprop and Adafactor steps on CUDA parameters equal the CPU's (the helpers and the
check of ``test_optim_cuda.py``): parameters and state stay on the parameters' device."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from jitgrad import optim


def _optim_cuda_module():
    """``test_optim_cuda.py`` loaded by path (pytest's importlib mode: test modules do not
    import each other by name), for its parameters, loss and host copies."""
    spec = importlib.util.spec_from_file_location(
        "_jitgrad_optim_cuda_helpers", Path(__file__).with_name("test_optim_cuda.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_H = _optim_cuda_module()
_host, _loss, _params = _H._host, _H._loss, _H._params

OPTIMIZERS = {
    # (t0=-1: mu = 1/2 after the first step, so the second averages); ASGD's step, eta
    # and mu live on the parameter's device, as PyTorch's
    "asgd": lambda ps: optim.ASGD(ps, lr=0.05, lambd=0.01, t0=-1, weight_decay=0.01),
    "asgd-capturable": lambda ps: optim.ASGD(ps, lr=0.05, t0=-1, capturable=True),
    "rprop": lambda ps: optim.Rprop(ps, lr=0.05, maximize=True),
    "adafactor": lambda ps: optim.Adafactor(ps, lr=0.05, weight_decay=0.01),
}
#: state entries PyTorch keeps on the CPU (unless capturable)
CPU_STATE = {"asgd": (), "asgd-capturable": (), "rprop": ("step",), "adafactor": ("step",)}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_steps_on_cuda_equal_the_cpu(name):
    runs = {}
    for dev in ("cpu", "cuda"):
        ps = _params(dev, np.float64)
        opt = OPTIMIZERS[name](ps)
        for k in range(2):
            opt.zero_grad()
            _loss(ps, k).backward()
            opt.step()
        state = [(key, v) for p in ps for key, v in sorted(opt.state[p].items())]
        for key, v in state:
            assert v.device.type == ("cpu" if key in CPU_STATE[name] else dev), key
        runs[dev] = ([_host(p) for p in ps], [(k, _host(v)) for k, v in state])
    (p_cpu, s_cpu), (p_cuda, s_cuda) = runs["cpu"], runs["cuda"]
    # (Adafactor's norms: NumPy's summation order on CUDA, jitgrad's on the CPU)
    tol = 1e-13 if name == "adafactor" else 0
    for a, b in zip(p_cpu, p_cuda):
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)
    for (k, a), (_, b) in zip(s_cpu, s_cuda):
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol, err_msg=k)
