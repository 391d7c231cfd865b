"""The profiler on CUDA tensors (Numba's simulator in CI): eager ops, backward nodes and a
compiled CUDA plan's kernels are events, and results equal an unprofiled run's."""

from __future__ import annotations

import numpy as np

import jitgrad
from jitgrad.profiler import profile


def test_profiling_cuda_work_records_ops_nodes_and_plan_kernels():
    rng = np.random.default_rng(0)
    x = jitgrad.tensor(rng.standard_normal((8, 4)), device="cuda", requires_grad=True)
    w = jitgrad.tensor(rng.standard_normal((4, 3)), device="cuda", requires_grad=True)
    f = jitgrad.compile(lambda x, w: jitgrad.tanh(x @ w).sum())
    f(x, w).backward()
    before = (x.grad.cpu().numpy().copy(), w.grad.cpu().numpy().copy())
    x.grad = w.grad = None
    with profile() as prof:
        (x.exp() * 2).sum().backward()
        f(x, w).backward()
    names = {e.key for e in prof.key_averages()}
    assert {"aten::exp", "aten::mul", "aten::sum", "Compiled Region: <lambda>"} <= names
    assert "autograd::engine::evaluate_function: ExpBackward0" in names
    assert any(n.startswith("jitgrad::kernel(") and "tanh" in n for n in names), names
    np.testing.assert_allclose(w.grad.cpu().numpy(), before[1], rtol=1e-14)
    np.testing.assert_allclose(x.grad.cpu().numpy(),
                               before[0] + 2 * np.exp(x.detach().cpu().numpy()), rtol=1e-13)
