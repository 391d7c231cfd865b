"""Convolution and pooling on CUDA tensors (jitgrad/cuda/conv.py): forward and backward equal
to the CPU's, a compiled CNN training step, and the errors.

Pooling, the bias gradient and the data movement have the CPU's bits. The convolutions' GEMMs
add in the BLAS library's order, so their values and gradients are checked against the bound
of two dot products' rounding: ``|cuda - cpu| <= 2 * K * eps * (the same sum of |terms|)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import cross_entropy_step

import jitgrad as torch
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.ops import conv as conv_ops

F32, F64 = np.float32, np.float64


def _t(a, dev, grad=True):
    t = torch.tensor(a, device=dev)
    return t.requires_grad_() if grad else t


def _run(fn, arrays, dev, cot_seed=5):
    """(output, [input gradients]) of ``fn`` on ``dev`` for the cotangent of seed
    ``cot_seed``, as host arrays."""
    ts = [None if a is None else _t(a, dev) for a in arrays]
    y = fn(*ts)
    assert y.device.type == dev
    w = np.random.default_rng(cot_seed).standard_normal(tuple(y.shape)).astype(arrays[0].dtype)
    (y * _t(w, dev, False)).sum().backward()
    grads = []
    for t in ts:
        if t is not None:
            assert t.grad.device == t.device
            grads.append(t.grad.cpu().numpy())
    return y.detach().cpu().numpy(), grads, w


def _within(cuda, cpu, bound, K, dtype, what):
    eps = np.finfo(dtype).eps
    err = np.abs(cuda.astype(F64) - cpu.astype(F64))
    allowed = 2 * K * eps * bound + np.finfo(dtype).tiny
    assert cuda.dtype == cpu.dtype and cuda.shape == cpu.shape, what
    assert (err <= allowed).all(), (what, float((err - allowed).max()))


CONVS = [
    dict(),
    dict(stride=2, padding=1),
    dict(padding="same", dilation=(2, 1)),
    dict(stride=(1, 2), padding=(0, 1), groups=3),
]


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("kw", CONVS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items())
                         or "plain")
def test_conv2d_forward_and_gradients_equal_the_cpu(dtype, kw):
    rng = np.random.default_rng(0)
    g = kw.get("groups", 1)
    x = rng.standard_normal((2, 3, 6, 5)).astype(dtype)
    w = rng.standard_normal((6, 3 // g, 3, 2)).astype(dtype)
    b = rng.standard_normal(6).astype(dtype)

    def fn(x, w, b):
        return F.conv2d(x, w, b, **kw)
    y_cpu, g_cpu, cot = _run(fn, (x, w, b), "cpu")
    y_cuda, g_cuda, _ = _run(fn, (x, w, b), "cuda")
    ax, aw, ag = torch.tensor(np.abs(x), dtype=torch.float64), torch.tensor(
        np.abs(w), dtype=torch.float64), torch.tensor(np.abs(cot), dtype=torch.float64)
    fwd_bound = F.conv2d(ax, aw, torch.tensor(np.abs(b), dtype=torch.float64), **kw).numpy()
    y0 = F.conv2d(ax.requires_grad_(), aw.requires_grad_(), **kw)
    (y0 * ag).sum().backward()
    _within(y_cuda, y_cpu, fwd_bound, w[0].size, dtype, "forward")
    _within(g_cuda[0], g_cpu[0], ax.grad.numpy(), w.shape[0] // g * w[0, 0].size, dtype,
            "input grad")
    _within(g_cuda[1], g_cpu[1], aw.grad.numpy(), x.shape[0] * y_cpu[0, 0].size, dtype,
            "weight grad")
    np.testing.assert_array_equal(g_cuda[2], g_cpu[2], err_msg="bias grad")


@pytest.mark.parametrize("batch", [0, 3, 9, 70])
def test_the_bias_gradient_adds_segments_of_samples_in_the_cpus_order(batch):
    """A thread per (segment of BIAS_SEGMENT samples, channel pixel), then the segments in
    order (four loads ahead), then the pixels: the CPU's ``bias_grad`` order, bit for bit
    (float64 inputs, 70 samples in three segments: another order would show)."""
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, 2, 5, 4))
    w = rng.standard_normal((3, 2, 2, 2))
    b = rng.standard_normal(3)
    _, g_cpu, _ = _run(lambda x, w, b: F.conv2d(x, w, b), (x, w, b), "cpu")
    _, g_cuda, _ = _run(lambda x, w, b: F.conv2d(x, w, b), (x, w, b), "cuda")
    np.testing.assert_array_equal(g_cuda[2], g_cpu[2])


def test_conv2d_in_chunks_of_samples_equals_one_chunk(monkeypatch):
    """A batch lowered in several chunks (a patch matrix per chunk, weight gradients added in
    order) gives the one-chunk values."""
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((5, 2, 4, 4)), rng.standard_normal((3, 2, 3, 3))
    whole = _run(lambda x, w: F.conv2d(x, w, padding=1), (x, w), "cuda")
    monkeypatch.setattr(conv_ops, "COLS_CHUNK", 2 * 2 * 9 * 16)  # two samples a chunk
    assert len(conv_ops._chunks(5, 2 * 9 * 16)) == 3
    chunked = _run(lambda x, w: F.conv2d(x, w, padding=1), (x, w), "cuda")
    np.testing.assert_array_equal(chunked[0], whole[0])
    np.testing.assert_array_equal(chunked[1][0], whole[1][0])
    np.testing.assert_allclose(chunked[1][1], whole[1][1], rtol=1e-14, atol=1e-14)


def test_conv2d_of_an_empty_batch_and_an_unbatched_input():
    rng = np.random.default_rng(2)
    w, b = rng.standard_normal((2, 1, 2, 2)), rng.standard_normal(2)
    for x in (np.zeros((0, 1, 3, 3)), rng.standard_normal((1, 3, 3))):
        cpu = _run(lambda x, w, b: F.conv2d(x, w, b), (x, w, b), "cpu")
        cuda = _run(lambda x, w, b: F.conv2d(x, w, b), (x, w, b), "cuda")
        np.testing.assert_allclose(cuda[0], cpu[0], rtol=1e-14, atol=1e-15)
        for a, c in zip(cuda[1], cpu[1]):
            np.testing.assert_allclose(a, c, rtol=1e-14, atol=1e-15)


POOLS = [
    ("max", dict(kernel_size=2)),
    ("max", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("max", dict(kernel_size=(2, 3), stride=1, dilation=(1, 2))),
    ("avg", dict(kernel_size=2)),
    ("avg", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    ("avg", dict(kernel_size=(3, 2), stride=1, padding=1, divisor_override=4)),
]


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("kind,kw", POOLS, ids=[f"{k}{i}" for i, (k, _) in enumerate(POOLS)])
def test_pooling_and_its_gradient_have_the_cpus_bits(dtype, kind, kw):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 5, 6)).astype(dtype)
    x[0, 0, 1, 1] = x[0, 0, 1, 2]  # a tie: the first maximum wins
    x[1, 1, 2, 3] = np.nan         # NaN counts as the maximum
    x[1, 0, 0, :] = -np.inf
    pool = F.max_pool2d if kind == "max" else F.avg_pool2d
    cpu = _run(lambda t: pool(t, **kw), (x,), "cpu")
    cuda = _run(lambda t: pool(t, **kw), (x,), "cuda")
    np.testing.assert_array_equal(cuda[0], cpu[0])
    np.testing.assert_array_equal(cuda[1][0], cpu[1][0])
    if kind == "max":
        idx = [F.max_pool2d(_t(x, dev, False), **kw, return_indices=True)[1] for dev in
               ("cpu", "cuda")]
        assert idx[1].device == "cuda:0" and idx[1].dtype == torch.int64
        np.testing.assert_array_equal(idx[1].cpu().numpy(), idx[0].numpy())


def test_max_pool_double_backward_on_cuda():
    """The gradient of max pooling's gradient w.r.t. the output gradient is a gather by the
    argmax positions, on the device."""
    xa = np.random.default_rng(4).standard_normal((1, 2, 4, 4))
    out = {}
    for dev in ("cpu", "cuda"):
        x = _t(xa, dev)
        y = F.max_pool2d(x, 2)
        go = torch.ones_like(y).requires_grad_()
        (gx,) = torch.autograd.grad(y, x, go, create_graph=True)
        gg = torch.tensor(np.arange(32.0).reshape(1, 2, 4, 4), device=dev)
        (ggo,) = torch.autograd.grad(gx, go, gg)
        assert ggo.device.type == dev
        out[dev] = ggo.cpu().numpy()
    np.testing.assert_array_equal(out["cuda"], out["cpu"])


def _cnn(dev, dtype):
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(3, 2, 2), nn.Flatten(), nn.Linear(2 * 3 * 3, 4)).to(dev, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_cnn_training_step_on_cuda_equals_eager_cuda_and_the_cpu(dtype):
    """conv -> relu -> max pool -> conv -> linear -> cross entropy with SGD: the compiled
    step on CUDA has eager CUDA's bits, and the CPU's values within the GEMMs' rounding."""
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((4, 1, 8, 8)), np.array([0, 3, 1, 2])
    params, losses = {}, {}
    for dev, compiled in (("cpu", True), ("cuda", False), ("cuda", True)):
        m = _cnn(dev, dtype)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        x, y = torch.tensor(X, dtype=dtype, device=dev), torch.tensor(Y, device=dev)

        step = cross_entropy_step(m, opt)  # (model and optimizer in its closure)
        f = torch.compile(step) if compiled else step
        losses[dev, compiled] = [f(x, y).item() for _ in range(3)]
        if compiled:  # the first step creates the momentum buffers: a second trace
            assert f.stats["traces"] == 2
        assert all(p.device.type == dev and p.grad.device.type == dev for p in m.parameters())
        params[dev, compiled] = [p.detach().cpu().numpy() for p in m.parameters()]
    assert losses["cuda", True] == losses["cuda", False]
    for a, b in zip(params["cuda", True], params["cuda", False]):
        np.testing.assert_array_equal(a, b)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    np.testing.assert_allclose(losses["cuda", True], losses["cpu", True], rtol=tol)
    for a, b in zip(params["cuda", True], params["cpu", True]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("moved", ["weight", "bias", "input"])
def test_conv2d_on_two_devices_raises_and_changes_nothing(moved):
    rng = np.random.default_rng(5)
    arrs = {"input": rng.standard_normal((1, 2, 4, 4)), "weight": rng.standard_normal(
        (3, 2, 2, 2)), "bias": rng.standard_normal(3)}
    ts = {k: _t(a, "cpu" if k == moved else "cuda") for k, a in arrs.items()}
    versions = {k: t._version for k, t in ts.items()}
    with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device, "
                                           r"but found at least two devices, cuda:0 and cpu!"):
        F.conv2d(ts["input"], ts["weight"], ts["bias"])
    for k, t in ts.items():
        assert t.grad is None and t.grad_fn is None and t._version == versions[k]
        np.testing.assert_array_equal(t.detach().cpu().numpy(), arrs[k])


@pytest.mark.gpu
def test_conv2d_on_the_gpu_is_faster_than_on_the_cpu_and_agrees():
    """A convolution layer's forward and backward (batch 64, 32 -> 64 channels, 32x32, 3x3,
    float32): cuBLAS GEMMs and the gather kernels beat the CPU's, with the CPU's values
    within the GEMMs' rounding."""
    import time

    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 32, 32, 32)).astype(F32)
    w = (rng.standard_normal((64, 32, 3, 3)) / 17).astype(F32)
    times, out = {}, {}
    for dev in ("cpu", "cuda"):
        tx, tw = _t(x, dev), _t(w, dev)

        def step(tx=tx, tw=tw):
            tx.grad = tw.grad = None
            (F.conv2d(tx, tw, padding=1) ** 2).sum().backward()
        step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        times[dev] = (time.perf_counter() - t0) / 3
        out[dev] = tw.grad.cpu().numpy()
    assert times["cuda"] * 5 < times["cpu"], times
    np.testing.assert_allclose(out["cuda"], out["cpu"], rtol=1e-3,
                               atol=1e-4 * np.abs(out["cpu"]).max())


def test_conv_and_pooling_of_integer_cuda_tensors_name_the_dtype():
    x = torch.ones(1, 1, 4, 4, dtype=torch.int64, device="cuda")
    with pytest.raises(RuntimeError, match="max_pool2d: jitgrad implements float32 and "
                                           "float64 tensors, got int64"):
        F.max_pool2d(x, 2)
    with pytest.raises(RuntimeError, match="conv2d: jitgrad implements float32"):
        F.conv2d(x, torch.ones(1, 1, 2, 2, dtype=torch.int64, device="cuda"))
