"""What a CUDA training step asks of the host: reads of device memory (each a wait for the
GPU), copies and launches. In the simulator a read of device memory is a conversion of a
device array to a Python value or a host array, which these tests count:

* a compiled step reads the device once (the cross-entropy's target check), where the NumPy
  formulation read it eight times (target masks, the output gradient as a float, the
  learning rate as each optimizer kernel's by-value argument);
* an optimizer's update is stored into the parameter by its fused kernel (no copy-back),
  whether a destination overlaps another operand asked once for the same arrays;
* an eager op reads a one-element device operand in the kernel, not on the host;
* cross-entropy and NLL on CUDA (``jitgrad/cuda/nll.py``) agree with the CPU, the compiled
  chain has the four eager kernels' bits, and a bad target raises before anything changes.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from helpers import cross_entropy_step

import jitgrad as torch
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.cuda import runtime

pytestmark = pytest.mark.skipif(not torch.cuda.is_simulated(),
                                reason="counts the simulator's device arrays")


class HostReads:
    """Counts conversions of device arrays to host values while active."""

    METHODS = ("__bool__", "__float__", "__int__", "__index__", "item", "tolist")

    def __init__(self, monkeypatch) -> None:
        self.n = 0
        self.on = False
        for m in self.METHODS:
            monkeypatch.setattr(runtime.SimArray, m, self._counted(getattr(np.ndarray, m)),
                                raising=False)
        to_host = runtime.to_host

        def counted_to_host(a):
            if self.on and runtime.is_device_array(a):
                self.n += 1
            return to_host(a)
        monkeypatch.setattr(runtime, "to_host", counted_to_host)

    def _counted(self, method):
        def read(arr, *args, **kwargs):
            if self.on:
                self.n += 1
            return method(arr, *args, **kwargs)
        return read

    def __enter__(self):
        self.n, self.on = 0, True
        return self

    def __exit__(self, *exc) -> None:
        self.on = False


def _copies_from(monkeypatch, module_file: str) -> list:
    """The destinations of ``np.copyto`` calls made by code in ``module_file`` (a list that
    fills while the test runs)."""
    copies = []
    real_copyto = np.copyto

    def copyto(*a, **k):
        if sys._getframe(1).f_code.co_filename.endswith(module_file):
            copies.append(a[0])
        return real_copyto(*a, **k)
    monkeypatch.setattr(np, "copyto", copyto)
    return copies


def _mlp_step(dev, opt_name="sgd", seed=0):
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 5)).to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.05) if opt_name == "sgd" else \
        torch.optim.Adam(m.parameters(), lr=0.01)
    return m, opt, cross_entropy_step(m, opt)


def _data(dev, bad=False):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((6, 12)).astype(np.float32)
    Y = rng.integers(0, 5, 6)
    if bad:
        Y[4] = 9
    return torch.tensor(X, device=dev), torch.tensor(Y, device=dev)


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_a_compiled_cuda_step_reads_the_device_once_and_updates_parameters_in_place(
        monkeypatch, opt_name):
    m, opt, step = _mlp_step("cuda", opt_name)
    f = torch.compile(step)
    x, y = _data("cuda")
    f(x, y)
    f(x, y)  # traced (the first step creates optimizer state): now the plan runs
    arrays = [p._data for p in m.parameters()]
    copies = _copies_from(monkeypatch, "interpreter.py")  # the plan's copy-backs
    before = [a.copy() for a in arrays]
    with HostReads(monkeypatch) as reads:
        f(x, y)
    assert reads.n == 1  # the cross-entropy's target check
    assert [p._data for p in m.parameters()] == arrays  # the same memory, updated
    assert all(not np.array_equal(a, b) for a, b in zip(arrays, before))
    if opt_name == "sgd":
        assert copies == []  # the fused kernels stored p - lr * g into p


def test_a_changed_learning_rate_reaches_the_compiled_cuda_step():
    """The learning rate stays on the host (the kernels take it by value): read afresh at
    every call, so the compiled step follows each change as eager mode does."""
    results = {}
    for compiled in (False, True):
        m, opt, step = _mlp_step("cuda")
        f = torch.compile(step) if compiled else step
        x, y = _data("cuda")
        losses = []
        for lr in (0.05, 0.5, 0.0, 0.2):
            opt.param_groups[0]["lr"] = lr
            losses.append(f(x, y).item())
        results[compiled] = losses, [p.detach().cpu().numpy() for p in m.parameters()]
    assert results[True][0] == results[False][0]
    for a, b in zip(results[True][1], results[False][1]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("compiled", [False, True])
def test_a_bad_target_raises_before_any_parameter_changes(compiled):
    m, opt, step = _mlp_step("cuda")
    f = torch.compile(step) if compiled else step
    x, y = _data("cuda")
    f(x, y)
    f(x, y)
    state = [p.detach().cpu().numpy().copy() for p in m.parameters()]
    versions = [p._version for p in m.parameters()]
    xb, yb = _data("cuda", bad=True)
    with pytest.raises(IndexError, match="Target 9 is out of bounds."):
        f(xb, yb)
    for p, s, v in zip(m.parameters(), state, versions):
        np.testing.assert_array_equal(p.detach().cpu().numpy(), s)
        assert p._version == v


def test_an_eager_op_reads_a_one_element_device_operand_in_the_kernel(monkeypatch):
    x = torch.arange(6.0, device="cuda").reshape(2, 3)
    s = torch.tensor(2.5, device="cuda")
    x * s  # the op's launch, remembered
    with HostReads(monkeypatch) as reads:
        r = x * s
        s2 = torch.tensor([[-1.0]], device="cuda")
        r2 = x + s2
    assert reads.n == 0
    np.testing.assert_array_equal(r.cpu().numpy(), np.arange(6.0).reshape(2, 3) * 2.5)
    np.testing.assert_array_equal(r2.cpu().numpy(), np.arange(6.0).reshape(2, 3) - 1.0)
    s.data.fill_(4.0)  # a new value through the same launch
    np.testing.assert_array_equal((x * s).cpu().numpy(), np.arange(6.0).reshape(2, 3) * 4.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("targets", [[0, 4, 2, 1, 3, 2, 4], [0, -100, 2, 1, -100, 2, 4],
                                     [-100] * 7, [7, 0, 1, 2, 3, 4, 0]])
def test_cross_entropy_on_cuda_agrees_with_the_cpu(dtype, reduction, targets):
    """``ignore_index`` rows, every row ignored (a mean of nothing: NaN), and a target
    equal to ``ignore_index`` outside [0, C) counting as ignored."""
    rng = np.random.default_rng(len(targets))
    X = (rng.standard_normal((7, 5)) * 3).astype(dtype)
    ignore = 7 if targets[0] == 7 else -100
    got = {}
    for dev in ("cpu", "cuda"):
        x = torch.tensor(X, device=dev, requires_grad=True)
        t = torch.tensor(targets, device=dev)
        loss = F.cross_entropy(x, t, reduction=reduction, ignore_index=ignore)
        loss.backward()
        got[dev] = loss.item(), x.grad.cpu().numpy()
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(got["cuda"][0], got["cpu"][0], rtol=tol)
    np.testing.assert_allclose(got["cuda"][1], got["cpu"][1], rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("targets", [[0, 4, 2, 1, 3, 2, 4], [0, -100, 2, 1, -100, 2, 4],
                                     [-100] * 7])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_the_cuda_chain_has_the_four_eager_kernels_bits(dtype, targets, reduction):
    from jitgrad.ops.nnops import nll
    from jitgrad.ops.softmax_ops import _log_softmax_bwd_eager, _log_softmax_eager

    rng = np.random.default_rng(5)
    x = runtime.to_device((rng.standard_normal((7, 300)) * 4).astype(dtype))
    t = runtime.to_device(np.array(targets))
    g = runtime.to_device(np.array(0.75, dtype))
    loss, gx = nll._cross_entropy_chain(x, t, g, reduction, -100)
    y = _log_softmax_eager(x, 1)
    loss4 = nll._nll_fwd(y, t, None, reduction, -100)
    gy = nll._nll_grad_fwd(g, t, None, reduction, -100, x.shape)
    gx4 = _log_softmax_bwd_eager(gy, y, 1)
    assert all(runtime.is_device_array(a) for a in (loss, gx, loss4, gx4))
    np.testing.assert_array_equal(runtime.to_host(loss), runtime.to_host(loss4))
    np.testing.assert_array_equal(runtime.to_host(gx), runtime.to_host(gx4))


def test_nll_loss_on_cuda_checks_its_targets_once_and_names_the_bad_one(monkeypatch):
    logp = F.log_softmax(torch.randn(4, 3, device="cuda"), 1)
    t = torch.tensor([0, 2, 1, 0], device="cuda")
    F.nll_loss(logp, t)
    with HostReads(monkeypatch) as reads:
        F.nll_loss(logp, t)
    assert reads.n == 1
    with pytest.raises(IndexError, match="Target -3 is out of bounds."):
        F.nll_loss(logp, torch.tensor([0, -3, 5, 0], device="cuda"))


def test_a_compiled_loss_backward_on_cuda_reads_nothing_from_the_device(monkeypatch):
    """``f(x).backward()`` through a compiled ``f``: the speculated joint plan's gradients
    are used when the seed is backward()'s own ones -- known without reading it."""
    def w2(x, w):
        return (torch.tanh(x * w) ** 2).sum()

    f = torch.compile(w2)
    X, W = np.linspace(-1, 1, 40, dtype=np.float32), np.linspace(0.5, 2, 40, dtype=np.float32)
    x = torch.tensor(X, device="cuda", requires_grad=True)
    w = torch.tensor(W, device="cuda", requires_grad=True)
    for _ in range(3):
        x.grad = None
        f(x, w).backward()
    expect = x.grad.cpu().numpy()
    with HostReads(monkeypatch) as reads:
        x.grad = None
        f(x, w).backward()
    assert reads.n == 0
    np.testing.assert_array_equal(x.grad.cpu().numpy(), expect)
    x.grad = None  # another output gradient: not what was speculated, recomputed
    f(x, w).backward(torch.tensor(2.0, device="cuda"))
    np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * expect, rtol=1e-6)


def test_eager_in_place_updates_on_cuda_run_one_kernel_into_the_tensor(monkeypatch):
    """``p.add_(g, alpha=-lr)`` (an optimizer's update), ``addcdiv_`` and ``addcmul_``:
    computed into ``p``'s memory (no result array, no copy back), the out-of-place op's
    values; an
    overlapping operand takes the general path, with the same values."""
    from jitgrad.cuda import launch

    P = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    G = np.linspace(2, 3, 12, dtype=np.float32).reshape(3, 4)
    p, g = torch.tensor(P, device="cuda"), torch.tensor(G, device="cuda")
    before, version = p._data, p._version
    into = []
    real_into = launch.elementwise_into
    monkeypatch.setattr(launch, "elementwise_into",
                        lambda *a: into.append(a[0].name) or real_into(*a))
    copies = _copies_from(monkeypatch, "inplace.py")  # apply_inplace's copy-backs
    with torch.no_grad():
        p.add_(g, alpha=-0.1)
        p.addcdiv_(g, g + 1.0, value=0.5)
        p.mul_(p)
        p.addcmul_(g, g, value=0.25)  # Adam's second moment: the product, then into p
    assert into == ["add_scaled", "addcdiv", "mul", "mul", "add"] and p._data is before
    assert p._version == version + 4 and copies == []
    cpu = torch.tensor(P)
    with torch.no_grad():
        cpu.add_(torch.tensor(G), alpha=-0.1)
        cpu.addcdiv_(torch.tensor(G), torch.tensor(G) + 1.0, value=0.5)
        cpu.mul_(cpu)
        cpu.addcmul_(torch.tensor(G), torch.tensor(G), value=0.25)
    np.testing.assert_array_equal(p.cpu().numpy(), cpu.numpy())
    q = torch.tensor(P, device="cuda")
    with torch.no_grad():
        q[:, 1:].add_(q[:, :3])  # overlapping: the general path
    expect = P.copy()
    expect[:, 1:] = expect[:, 1:] + P[:, :3]
    np.testing.assert_array_equal(q.cpu().numpy(), expect)


def test_a_kernel_is_never_given_a_host_array():
    """On a GPU numba-cuda copies a host array given to a kernel to the device and back at
    every launch (the host waiting each time); the simulator refuses one outright."""
    with pytest.raises(TypeError, match="host array .* passed to a CUDA kernel"):
        runtime.kernel_arg(np.zeros(3))
    assert runtime.kernel_arg(np.float32(2.5)) == np.float32(2.5)  # numbers go by value
    d = runtime.to_device(np.arange(3.0))
    assert type(runtime.kernel_arg(d)) is np.ndarray  # the simulator's view of it


def test_a_cuda_plan_computes_host_values_on_the_host_and_reads_them_afresh():
    """A captured 0-d CPU tensor (an optimizer's step counter) updated and used by a
    compiled CUDA function: its arithmetic runs as a CPU kernel, the CUDA kernel takes the
    result by value, and every call sees the counter's new value, as in eager mode."""
    from helpers import newest_plan

    from jitgrad.compiler.group_runner import GroupRunner
    from jitgrad.cuda.plan_runner import CudaGroupRunner

    results = {}
    for compiled in (False, True):
        count = torch.zeros((), dtype=torch.float32)  # on the CPU
        w = torch.arange(5.0, device="cuda")

        def f(x, count=count, w=w):
            count.add_(1)
            return x * w * (count * 0.5 + 1)
        g = torch.compile(f) if compiled else f
        x = torch.ones(5, device="cuda")
        results[compiled] = [g(x).cpu().numpy() for _ in range(4)], count.item()
        if compiled:
            runners = newest_plan(g).group_runners
            on_host = [r for r in runners if type(r) is GroupRunner]
            on_device = [r for r in runners if isinstance(r, CudaGroupRunner)]
            assert on_host and on_device
            assert all(r.group.host for r in on_host)
            assert {op.pattern for r in on_device for op in r.desc.operands
                    if op.dtype == "float32" and op.pattern in ("scalar", "item")} == {"scalar"}
            assert "fused loop over [] on the host: " in str(g.lower(x))
    assert results[True][1] == results[False][1] == 4.0
    for a, b in zip(results[True][0], results[False][0]):
        np.testing.assert_array_equal(a, b)


def _momentum_update(p, s):
    """An optimizer-like update stored into ``p`` and ``s`` (both read by the kernel)."""
    with torch.no_grad():
        s.mul_(0.9).add_(p, alpha=0.1)
        p.sub_(s, alpha=0.5)
    return p


def test_a_plan_asks_whether_destinations_overlap_once_for_the_same_arrays(monkeypatch):
    import warnings

    asked = []
    real = np.may_share_memory
    monkeypatch.setattr(runtime.SIM_NP, "may_share_memory",
                        lambda a, b: asked.append(1) or real(a, b), raising=False)
    f = torch.compile(_momentum_update)
    rng = np.random.default_rng(0)
    P, S = rng.standard_normal(6), rng.standard_normal(6)

    def both(make):
        """(eager, compiled) values of p and s after two updates of tensors ``make`` gives."""
        out = []
        for fn in (_momentum_update, f):
            p, s = make()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (overlapping arguments retrace)
                fn(p, s)
                fn(p, s)
            out.append((p.cpu().numpy(), s.cpu().numpy()))
        return out

    def separate():
        return torch.tensor(P, device="cuda"), torch.tensor(S, device="cuda")

    def overlapping():  # one tensor as both: a kernel cannot store into it for the other
        t = torch.tensor(P, device="cuda")
        return t, t

    for make in (separate, overlapping, separate):
        (pe, se), (pc, sc) = both(make)
        np.testing.assert_array_equal(pc, pe)
        np.testing.assert_array_equal(sc, se)
    p, s = separate()
    f(p, s)
    n = len(asked)
    for _ in range(3):  # the same arrays: the last call's answer
        f(p, s)
    assert len(asked) == n
    f(*separate())  # other arrays: asked again
    assert len(asked) > n


def test_fill_factories_and_backwards_seed_copy_nothing_from_the_host(monkeypatch):
    """zeros/ones/empty/full (and their ``_like`` forms) fill CUDA memory on the device
    instead of copying a host array over (host work per call, a PCIe transfer of the whole
    tensor): ``backward()``'s seed (``ones_like`` of the loss) included. Integer ``arange``
    (position ids) and the gradient of ``max`` along a dim make their index ranges on the
    device too."""
    copied = []
    real = runtime.to_device
    monkeypatch.setattr(runtime, "to_device",
                        lambda a: copied.append(a.shape) or real(a) if isinstance(a, np.ndarray)
                        and not runtime.is_device_array(a) else real(a))
    x = torch.ones(3, device="cuda", requires_grad=True)
    copied.clear()
    made = [torch.zeros(2, 3, device="cuda"), torch.ones(4, device="cuda", dtype=torch.int32),
            torch.empty(2, device="cuda"), torch.full((2, 2), 0.1, device="cuda"),
            torch.zeros_like(x), torch.ones_like(x), torch.empty_like(x),
            torch.full_like(x, -0.0), torch.arange(5, device="cuda"),
            torch.arange(-4, 11, 3, device="cuda", dtype=torch.int32)]
    (x * 2).sum().backward()
    torch.autograd.grad((x * x).sum(), x)
    assert copied == []
    m = torch.tensor([[1.0, 3.0, 2.0], [5.0, 4.0, 6.0]], device="cuda", requires_grad=True)
    copied.clear()
    (g,) = torch.autograd.grad(m.max(dim=1).values.sum(), m)
    assert g.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    assert copied == []
    assert all(t.device.type == "cuda" for t in made)
    assert made[-2].tolist() == list(range(5)) and made[-2].dtype == torch.int64
    assert made[-1].tolist() == list(range(-4, 11, 3)) and made[-1].dtype == torch.int32


def test_an_embedding_checks_its_indices_with_one_read_of_the_device(monkeypatch):
    emb = nn.Embedding(10, 3).to("cuda")
    idx = torch.tensor([[1, 9], [0, 4]], device="cuda")
    want = emb.weight.detach().cpu().numpy()[idx.cpu().numpy()]
    with HostReads(monkeypatch) as reads:
        out = emb(idx)
    assert reads.n == 1
    np.testing.assert_array_equal(out.detach().cpu().numpy(), want)
    for bad in ([[1, 10]], [[-1, 2]]):
        with pytest.raises(IndexError, match="index out of range in self"):
            emb(torch.tensor(bad, device="cuda"))


def test_a_compiled_embedding_on_cuda_checks_its_indices_at_every_call():
    """The check is the op's own, so the plan makes it (CuPy's take would wrap a bad index
    around where NumPy's raises or, for -1, returns the last row)."""
    emb = nn.Embedding(10, 3).to("cuda")
    idx = torch.tensor([[1, 9], [0, 4]], device="cuda")
    want = emb.weight.detach().cpu().numpy()[idx.cpu().numpy()]
    f = torch.compile(lambda i: emb(i), fullgraph=True)
    for _ in range(2):
        np.testing.assert_array_equal(f(idx).detach().cpu().numpy(), want)
    for bad in ([[1, 10], [0, 4]], [[-1, 2], [0, 4]]):  # idx's shape: the plan runs
        with pytest.raises(IndexError, match="index out of range in self"):
            f(torch.tensor(bad, device="cuda"))
    np.testing.assert_array_equal(f(idx).detach().cpu().numpy(), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64,
                                   torch.bool, torch.float16])
@pytest.mark.parametrize("value", [0.1, -0.0, 3, 1.7, -2.5, True, float("inf")])
def test_full_on_cuda_stores_the_cpus_value(dtype, value):
    if dtype in (torch.int32, torch.int64) and value == float("inf"):
        return  # (NumPy's cast of inf to an integer is undefined)
    cpu = torch.full((3,), value, dtype=dtype)
    cuda = torch.full((3,), value, dtype=dtype, device="cuda")
    like = torch.full_like(torch.zeros(3, dtype=dtype, device="cuda"), value)
    for t in (cuda, like):
        assert t.dtype == cpu.dtype and t.device.type == "cuda"
        np.testing.assert_array_equal(t.cpu().numpy().view(np.uint8),
                                      cpu.numpy().view(np.uint8))  # the bits, -0.0 too


def test_a_compiled_gather_on_cuda_checks_its_positions_with_one_read(monkeypatch):
    """The range check is gather's own (CuPy's take_along_axis would wrap a bad position
    around): one read of the device per call, a second only to name a bad position."""
    x = torch.tensor([[3.0, 1.0, 4.0, 2.0], [0.0, 5.0, 6.0, -1.0]], device="cuda")
    f = torch.compile(lambda x, i: torch.gather(x, 1, i), fullgraph=True)
    good = torch.tensor([[0, 3], [1, 2]], device="cuda")
    for _ in range(2):
        assert f(x, good).tolist() == [[3.0, 2.0], [5.0, 6.0]]
    with HostReads(monkeypatch) as reads:
        f(x, good)
    assert reads.n == 1
    for bad, v in (([[0, 4], [1, 2]], 4), ([[0, 3], [-1, 2]], -1)):
        with pytest.raises(RuntimeError, match=f"index {v} is out of bounds for dimension 1"):
            f(x, torch.tensor(bad, device="cuda"))
