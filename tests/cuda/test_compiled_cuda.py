"""Compiled plans on CUDA tensors: the same fusion as on the CPU, rendered as CUDA kernels;
compiled == eager on CUDA, and == CPU within the transcendentals' rounding."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import jitgrad as torch
import jitgrad.nn as nn
import jitgrad.nn.functional as F


def w2(x, w, b):
    return (torch.tanh(x * w + b) ** 2 * torch.sigmoid(x)).sum()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 33, 300, 1000])
def test_w2_compiled_on_cuda_equals_eager_cuda_and_the_cpu(n, dtype):
    rng = np.random.default_rng(n)
    X, W, B = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    got = {}
    for dev, compiled in (("cpu", False), ("cuda", False), ("cuda", True)):
        x = torch.tensor(X, device=dev, requires_grad=True)
        w = torch.tensor(W, device=dev, requires_grad=True)
        b = torch.tensor(B, device=dev)
        f = torch.compile(w2) if compiled else w2
        for _ in range(2):  # the first call and a cached one
            x.grad = w.grad = None
            loss = f(x, w, b)
            loss.backward()
        assert loss.device.type == dev and x.grad.device.type == dev
        got[(dev, compiled)] = [loss.item(), x.grad.cpu().numpy(), w.grad.cpu().numpy()]
    eager, comp, cpu = got[("cuda", False)], got[("cuda", True)], got[("cpu", False)]
    assert eager[0] == comp[0]  # the simulator computes without FMA: bit for bit
    for a, b in zip(eager[1:], comp[1:]):
        np.testing.assert_array_equal(a, b)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(eager[0], cpu[0], rtol=tol)
    for a, b in zip(eager[1:], cpu[1:]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("n", [191, 1000, 16384 + 900])
def test_fused_kernels_loading_four_elements_at_a_time_have_the_cpus_bits(n):
    """CUDA kernels load UNROLL elements per thread before computing them (the grid-stride
    loop and a sum's lanes), then finish the rest one by one; exact arithmetic and the
    sum's order stay the CPU's at sizes that leave any remainder (the simulator's grid is
    64 threads: 191 elements take only the one-by-one loop)."""
    rng = np.random.default_rng(n)
    X, W, B = (rng.standard_normal(n).astype(np.float32) for _ in range(3))

    def f(x, w, b):
        y = x * w + b
        return y * x, (y * y).sum(), (y - x).sum()
    got = {}
    for dev in ("cpu", "cuda"):
        outs = torch.compile(f)(*(torch.tensor(a, device=dev) for a in (X, W, B)))
        got[dev] = [o.cpu().numpy() for o in outs]
    for a, b in zip(got["cpu"], got["cuda"]):
        np.testing.assert_array_equal(a, b)


def test_lowered_cuda_plan_shows_cuda_kernels_and_they_are_cached_on_disk(tmp_path):
    x = torch.randn(40, device="cuda", requires_grad=True)
    w = torch.randn(40, device="cuda", requires_grad=True)
    b = torch.randn(40, device="cuda")
    f = torch.compile(w2)
    low = f.lower(x, w, b)
    text = str(low)
    assert "@cuda.jit" in text and "cuda.shared.array" in text and "cuda.grid(1)" not in \
        text.split("@cuda.jit")[0]
    cache = torch.compile(w2)  # a second function: the same kernels, from the table
    cache(x, w, b).backward()
    root = os.environ.get("JITGRAD_CACHE_DIR")
    if root:
        sources = [p for p in glob.glob(os.path.join(root, "**", "jg_*.py"), recursive=True)
                   if "@cuda.jit" in open(p).read()]
        assert sources


def test_a_cpu_plan_is_not_reused_for_cuda_tensors():
    f = torch.compile(lambda x: (x * 2.0).sum())
    a = f(torch.ones(5))
    b = f(torch.ones(5, device="cuda"))
    assert a.device == "cpu" and b.device == "cuda:0" and a.item() == b.item() == 10.0
    assert f.stats["traces"] == 2
    assert "device changed cpu -> cuda:0" in f.last_retrace_reason


def _mlp(device, dtype):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device, dtype)


@pytest.mark.parametrize("how", ["whole step", "model, backward outside"])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_compiled_training_step_on_cuda_equals_the_cpu(how, opt_name):
    X = np.random.default_rng(0).standard_normal((6, 8))
    Y = np.array([0, 1, 2, 3, 1, 0])
    params = {}
    losses = {}
    for run in ("eager", "cpu", "cuda"):  # eager: the reference the compiled runs must meet
        dev = "cpu" if run == "eager" else run
        m = _mlp(dev, torch.float64)
        opt = (torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) if opt_name == "SGD"
               else torch.optim.Adam(m.parameters(), lr=0.01))
        x, y = torch.tensor(X, device=dev), torch.tensor(Y, device=dev)
        model = torch.compile(m) if how != "whole step" and run != "eager" else m

        def step(x, y, model=model, opt=opt):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        f = torch.compile(step) if how == "whole step" and run != "eager" else step
        losses[run] = [f(x, y).item() for _ in range(3)]
        assert all(p.device.type == dev and p.grad.device.type == dev for p in m.parameters())
        params[run] = [p.detach().cpu().numpy() for p in m.parameters()]
    for run in ("cpu", "cuda"):  # (the defaults are guarded: momentum buffers retrace)
        np.testing.assert_allclose(losses[run], losses["eager"], rtol=1e-12)
        for a, b in zip(params[run], params["eager"]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def _sgd_step(m, opt):
    def step(x, y):
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
    return step


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_state_the_first_compiled_step_creates_holds_the_plans_values(dev, monkeypatch):
    """Optimizer state made by a first compiled step (SGD's momentum buffers: clones of the
    first gradients) gets the plan's values, not the trace's: the trace runs the ops'
    references, made different here so that keeping the trace's values cannot pass."""
    from jitgrad.ops import softmax_ops

    real = softmax_ops._log_softmax_bwd_ref
    monkeypatch.setattr(softmax_ops, "_log_softmax_bwd_ref",
                        lambda g, y, dim: real(g, y, dim) + 1)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((6, 5)).astype(np.float32), rng.integers(0, 3, 6)
    bufs = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        m = nn.Linear(5, 3).to(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        step = _sgd_step(m, opt)
        (torch.compile(step) if compiled else step)(torch.tensor(X, device=dev),
                                                    torch.tensor(Y, device=dev))
        bufs[compiled] = [opt.state[p]["momentum_buffer"].cpu().numpy()
                          for p in m.parameters()]
    for a, b in zip(bufs[True], bufs[False]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (31, 5), (33, 2), (100, 40), (257, 3)])
def test_column_sums_over_row_segments_have_the_cpus_bits(shape, dtype):
    """A fused ``cols`` sum runs a thread per (segment of RBLOCK rows, column) and adds each
    column's segment partials in row order afterwards (``launch.finish_segments``): the CPU's
    order, so its bits, with the fused element-wise output computed by the same threads."""
    rng = np.random.default_rng(sum(shape))
    X = rng.standard_normal(shape).astype(dtype)
    W = rng.standard_normal(shape[1]).astype(dtype)

    def f(x, w):
        y = torch.relu(x * w)
        return y, y.sum(0), (y * x).mean(0, keepdim=True)
    got = {}
    for dev in ("cpu", "cuda"):
        outs = torch.compile(f)(torch.tensor(X, device=dev), torch.tensor(W, device=dev))
        got[dev] = [o.cpu().numpy() for o in outs]
    for a, b in zip(got["cpu"], got["cuda"]):
        np.testing.assert_array_equal(a, b)
    if shape[0]:  # the eager sum: one kernel of the same renderer
        x = torch.tensor(X, device="cuda")
        np.testing.assert_array_equal(x.sum(0).cpu().numpy(), torch.tensor(X).sum(0).numpy())


@pytest.mark.parametrize("shape", [(3, 0), (5, 7), (2, 2 * 16384 + 5)])
def test_row_sums_over_column_segments_have_the_cpus_bits(shape):
    """A ``rows`` sum runs a block per (segment of CHUNK columns, row) and adds each row's
    segment partials in order afterwards (``launch.finish_segments``): the CPU's order
    (float64 inputs and three segments a row: another order would show; the CPU
    kernel adds each segment's lanes into the segment's partial as CUDA does)."""
    rng = np.random.default_rng(shape[1])
    X = rng.standard_normal(shape) * np.exp(rng.uniform(-20, 20, shape))

    def f(x):  # (no product feeding an addition: a CPU kernel may contract it to an FMA)
        y = torch.abs(x * x)
        return y.sum(1), (y * 0.5).mean(1, keepdim=True)
    got = {}
    for dev in ("cpu", "cuda"):
        got[dev] = [o.cpu().numpy() for o in torch.compile(f)(torch.tensor(X, device=dev))]
        got[dev + " eager"] = torch.tensor(X, device=dev).sum(1).cpu().numpy()
    for a, b in zip(got["cpu"], got["cuda"]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got["cpu eager"], got["cuda eager"])


def test_the_partials_of_a_sum_are_added_in_order_on_both_devices():
    """An ``all`` sum's per-chunk partials are added first to last on the CPU
    (``kernels.finish_sum``) and on CUDA (``launch.finish_all``): the same bits for any
    number of chunks (NumPy's ``add.reduce`` adds more than eight pairwise)."""
    from jitgrad.compiler import kernels
    from jitgrad.cuda import launch, runtime

    p = np.array([1e16] + [1.0] * 36)  # in order each 1 rounds away; pairwise they add up
    in_order = 0.0
    for v in p:
        in_order += v
    assert in_order != np.add.reduce(p)  # the partials tell the two orders apart
    cpu = kernels.finish_sum(p, "all", 1.0, np.float64, ())
    cuda = launch.finish_sum(runtime.to_device(p), "all", 1.0, np.float64, ())
    assert cpu == in_order == runtime.to_host(cuda)


def test_fill_factories_inside_a_compiled_cuda_function_equal_eager():
    """Factories filled on the device (``creation._filled``) inside a compiled function:
    the plan's values are device arrays, the same at every call as eager."""
    def fn(x):
        y = x * torch.full_like(x, 0.5) + torch.ones(x.shape, device=x.device)
        return y + torch.zeros_like(x) + torch.full((4,), 2.0, device=x.device)
    f = torch.compile(fn)
    for k in range(3):
        x = torch.arange(4.0, device="cuda") + k
        got = f(x)
        assert got.device.type == "cuda" and got.tolist() == fn(x).tolist()
