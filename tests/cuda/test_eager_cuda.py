"""Eager CUDA ops and their gradients equal the CPU's; sums of every kind over edge sizes.

Arithmetic, comparisons, selections and every sum have the CPU's bits (the CUDA renderer keeps
the CPU kernels' order of a sum); transcendentals differ by libdevice's (in the simulator:
NumPy's) rounding against jitgrad's vmath, within a few ulp.
"""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as torch
from jitgrad.ops import REGISTRY

SIZES = [0, 1, 31, 33, 100]          # empty, one, around a 32-thread block
SHAPES_2D = [(1, 1), (3, 33), (33, 3), (5, 0), (2, 3, 5)]
EXACT = {"add", "sub", "mul", "neg", "abs", "relu", "maximum", "minimum", "where", "clamp",
         "square", "threshold_backward", "sign", "reciprocal", "div"}


def _both(fn, *arrays, grad=True):
    """fn on CPU and CUDA tensors made from ``arrays``: (cpu out, cuda out, grads...)."""
    outs = []
    for dev in ("cpu", "cuda"):
        ts = [torch.tensor(a, device=dev, requires_grad=grad and a.dtype.kind == "f")
              for a in arrays]
        y = fn(*ts)
        assert y.device.type == dev
        g = None
        if grad and y.requires_grad:
            (y * torch.ones_like(y)).sum().backward()
            g = [t.grad.cpu().numpy() if t.grad is not None else None for t in ts]
            assert all(t.grad is None or t.grad.device == t.device for t in ts)
        outs.append((y.detach().cpu().numpy(), g))
    return outs


def _close(a, b, exact, dtype):
    if exact:
        np.testing.assert_array_equal(a, b)
    else:
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


UNARY = ["neg", "abs", "exp", "log", "tanh", "sigmoid", "relu", "sqrt", "sin", "cos",
         "reciprocal", "square", "expm1", "log1p", "rsqrt", "sign"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_ops_and_gradients_equal_the_cpu(name, dtype):
    rng = np.random.default_rng(0)
    a = rng.uniform(0.1, 2.0, 33).astype(dtype) * rng.choice([-1, 1], 33).astype(dtype)
    if name in ("log", "sqrt"):
        a = np.abs(a)
    fn = getattr(torch, name)
    (c, gc), (d, gd) = _both(fn, a)
    _close(c, d, name in EXACT, dtype)
    if gc is not None:
        _close(gc[0], gd[0], name in EXACT, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum", "pow"])
@pytest.mark.parametrize("shapes", [((7,), (7,)), ((3, 4), (4,)), ((3, 1), (1, 4)),
                                    ((2, 3, 4), (3, 1)), ((3, 4), ())])
def test_binary_ops_broadcast_and_gradients_equal_the_cpu(name, dtype, shapes):
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 2.0, shapes[0]).astype(dtype)
    b = rng.uniform(0.5, 2.0, shapes[1]).astype(dtype)
    (c, gc), (d, gd) = _both(getattr(torch, name), a, b)
    exact = name != "pow"
    _close(c, d, exact, dtype)
    for x, y in zip(gc, gd):
        _close(x, y, exact, dtype)


def test_tensor_with_python_numbers_and_int_ops():
    for dev in ("cpu", "cuda"):
        x = torch.arange(5, device=dev)
        assert (x * 2 + 1).tolist() == [1, 3, 5, 7, 9]
        assert (x > 2).tolist() == [False, False, False, True, True]
        f = torch.tensor([1.5, -2.0], device=dev)
        assert (f * 2.0 - 1).tolist() == [2.0, -5.0]
        assert (2.0 / f).device.type == dev


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_edge_sizes(n, dtype):
    a = np.linspace(-1, 1, n).astype(dtype)
    (c, gc), (d, gd) = _both(lambda x: x * x - x, a)
    np.testing.assert_array_equal(c, d)
    np.testing.assert_array_equal(gc[0], gd[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES_2D)
def test_sums_and_means_of_every_kind_have_the_cpus_bits(shape, dtype):
    rng = np.random.default_rng(2)
    a = rng.standard_normal(shape).astype(dtype)
    dims_list = [None] + [(d,) for d in range(len(shape))] + ([(0, 2)] if len(shape) == 3
                                                               else [])
    for dims in dims_list:
        for keep in (False, True) if dims is not None else (False,):  # (a full sum: no dim)
            for red in ("sum", "mean"):
                def fn(x, red=red, dims=dims, keep=keep):
                    f = getattr(x, red)
                    return f() if dims is None else f(dims, keepdim=keep)
                (c, gc), (d, gd) = _both(fn, a)
                np.testing.assert_array_equal(c, d, err_msg=f"{red} {dims} {keep}")
                np.testing.assert_array_equal(gc[0], gd[0])


def test_a_sum_over_two_chunks_keeps_the_cpus_order():
    a = np.random.default_rng(3).standard_normal(16384 + 77).astype(np.float32)
    c = torch.tensor(a).sum()
    d = torch.tensor(a, device="cuda").sum()
    assert d.device == "cuda:0"
    assert c.item() == d.item()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_family_and_losses_equal_the_cpu(dtype):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 5)).astype(dtype)
    t = np.array([0, 4, 2, 1])
    F = torch.nn.functional
    for fn in (lambda x: F.layer_norm(x, (5,)),
               lambda x: F.cross_entropy(x, torch.tensor(t, device=x.device)),
               lambda x: x.t() @ x, lambda x: torch.cat([x, x * 2], 1)):
        (c, gc), (d, gd) = _both(fn, a)
        _close(c, d, False, dtype)
        _close(gc[0], gd[0], False, dtype)


def test_every_fusable_unary_op_has_a_cuda_rendering():
    """Every op with a kernel expression runs as a CUDA kernel (not a fallback)."""
    from jitgrad.compiler import kernels
    from jitgrad.compiler.describe import describe_op

    f32 = np.dtype(np.float32)
    done = 0
    for op in REGISTRY.values():
        if op.expr is None or op.nin != 1 or op.dtype_rule == "bool":
            continue
        src = kernels.load(describe_op(op, f32, ("full",), "flat", f32), target="cuda")
        assert "@cuda.jit" in src.source and "def kernel(n, a0" in src.source
        done += 1
    assert done >= 20


@pytest.mark.parametrize("threads", [1, 3, 16])
def test_finishing_a_sum_adds_the_partials_in_order_at_any_block_size(threads):
    from jitgrad.cuda import launch, runtime

    rng = np.random.default_rng(5)
    # more partials than one shared-memory segment, of very different sizes
    parts = rng.standard_normal(launch.FINISH_SEGMENT * 2 + 37) * 10.0 ** rng.integers(-8, 9,
                                                                                     2085)
    ref = np.float64(0.0)
    for p in parts:
        ref += p
    out = runtime.empty(1, np.float32)
    launch.finish_all[1, threads](runtime.kernel_arg(runtime.to_device(parts), True),
                                  np.float64(0.5), runtime.kernel_arg(out))
    assert runtime.to_host(out)[0] == np.float32(ref * 0.5)


def test_a_reused_launch_takes_each_calls_numbers_and_params():
    from jitgrad.cuda import launch

    x = torch.arange(6.0, device="cuda")
    launch._plans.clear()  # (a full table is cleared: earlier tests must not decide the count)
    assert torch.clamp(x, 0, 1).tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    n = len(launch._plans)
    assert torch.clamp(x, 0, 2).tolist() == [0.0, 1.0, 2.0, 2.0, 2.0, 2.0]  # same launch
    assert len(launch._plans) == n
    assert (x * 2).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert (x * 3).tolist() == [0.0, 3.0, 6.0, 9.0, 12.0, 15.0]
    n = len(launch._plans)
    assert (x[1:] - x[:-1]).tolist() == [1.0] * 5   # views: another layout
    assert len(launch._plans) > n
    y = torch.ones(3, 1, device="cuda")
    assert (x.reshape(2, 3) + y[:2, 0].reshape(2, 1)).tolist() == [[1.0, 2.0, 3.0],
                                                                 [4.0, 5.0, 6.0]]


def _no_new_launches(monkeypatch):
    """Make describing a new eager launch (element-wise or sum) an error."""
    from jitgrad.cuda import launch

    def refuse(*args, **kwargs):
        raise AssertionError("a launch was described again instead of reused")

    monkeypatch.setattr(launch, "_elementwise_first", refuse)
    monkeypatch.setattr(launch, "_sum_first", refuse)


LAYOUTS = {  # operands a launch cannot take as they are: broadcast views, a transpose
    "number expanded": lambda x, y: x * y[0, 0].expand(5, 7),
    "row expanded": lambda x, y: x + y[:1].expand(5, 7),
    "column expanded": lambda x, y: x - y[:, :1].expand(5, 7),
    "both expanded": lambda x, y: x[:1].expand(5, 7) * y[:, 2:3].expand(5, 7),
    "numbers expanded": lambda x, y: x[1, 2].expand(5, 7) + y[3, 4].expand(5, 7),
    "transposed": lambda x, y: x.t().t() * y.t().contiguous().t(),
    "sum's backward": lambda x, y: torch.autograd.grad((x * y).sum(), x)[0] * y,
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_broadcast_views_and_transposes_reuse_their_launch_with_the_cpus_bits(
        name, monkeypatch):
    rng = np.random.default_rng(3)
    xs, ys = rng.standard_normal((5, 7)), rng.standard_normal((5, 7))
    fn = LAYOUTS[name]

    def on(dev):
        x = torch.tensor(xs, device=dev, requires_grad=True)
        return fn(x, torch.tensor(ys, device=dev)).detach().cpu().numpy()

    ref = on("cpu")
    np.testing.assert_array_equal(on("cuda"), ref)
    _no_new_launches(monkeypatch)
    np.testing.assert_array_equal(on("cuda"), ref)


def test_the_hot_path_reuses_the_general_paths_launch(monkeypatch):
    from jitgrad.ops import dispatch

    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(33).astype(np.float32), rng.standard_normal(33).astype(np.float32)
    ops = [lambda x, y: x + y, lambda x, y: x * 2.5, lambda x, y: torch.relu(-x),
           lambda x, y: x < y, lambda x, y: torch.clamp(x, -0.5, 0.5) - y]

    def run(dev):
        x = torch.tensor(a, device=dev, requires_grad=True)
        y = torch.tensor(b, device=dev)
        outs = [f(x, y) for f in ops]
        sum(o for o in outs if o.dtype == torch.float32).sum().backward()
        return [o.detach().cpu().numpy() for o in outs] + [x.grad.cpu().numpy()]

    ref = run("cpu")
    for got, want in zip(run("cuda"), ref):
        np.testing.assert_array_equal(got, want)
    _no_new_launches(monkeypatch)

    def general(*args):
        raise AssertionError("the general path ran")

    monkeypatch.setattr(dispatch, "_binary_general", general)
    for got, want in zip(run("cuda"), ref):  # the same bits through the hot path
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_the_hot_path_leaves_mixed_devices_to_the_general_paths_error():
    x = torch.ones(4, device="cuda")
    assert (x * 2.0).tolist() == [2.0] * 4   # a launch of (array, number) exists now
    for other in (torch.ones(4), torch.ones(4, device="cuda")[None].expand(2, 4)[0]):
        if other.device.type == "cpu":
            with pytest.raises(RuntimeError, match="Expected all tensors to be on the same"):
                x * other
        else:
            assert (x * other).tolist() == [1.0] * 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sums_reuse_their_launch_with_the_cpus_bits(dtype, monkeypatch):
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((6, 35)) * 10.0 ** rng.integers(-4, 5, (6, 35))).astype(dtype)
    calls = [lambda t: t.sum(), lambda t: t.sum(1), lambda t: t.sum(0, keepdim=True),
             lambda t: t.mean(1), lambda t: t.mean(), lambda t: t[:, 1:].sum(0)]

    def run(dev):
        t = torch.tensor(a, device=dev)
        return [f(t).cpu().numpy() for f in calls]

    ref = run("cpu")
    for got, want in zip(run("cuda"), ref):
        np.testing.assert_array_equal(got, want)
    from jitgrad.cuda import launch

    monkeypatch.setattr(launch, "_elementwise_first", lambda *a: 1 / 0)
    reused = calls[:5]   # the last sums a sliced (non-contiguous) array: described again
    t = torch.tensor(a, device="cuda")
    monkeypatch.setattr(launch, "_sum_first", lambda *a: 1 / 0)
    for f, want in zip(reused, ref):
        np.testing.assert_array_equal(f(t).cpu().numpy(), want)


@pytest.mark.parametrize("n", [0, 1, 37])
def test_in_place_updates_reuse_their_launch_with_the_cpus_bits(n, monkeypatch):
    rng = np.random.default_rng(n)
    p0, g0, v0 = (rng.standard_normal(n) for _ in range(3))

    def run(dev, steps=2):
        p, g, v = (torch.tensor(a, device=dev) for a in (p0, g0, v0))
        with torch.no_grad():
            for _ in range(steps):  # an optimizer's updates
                p.add_(g, alpha=-0.1)
                v.mul_(0.9).addcmul_(g, g, value=0.1)
                p.addcdiv_(g, v.abs() + 1e-8, value=-0.01)
        return p.cpu().numpy(), v.cpu().numpy()

    ref = run("cpu")
    for got, want in zip(run("cuda"), ref):
        np.testing.assert_array_equal(got, want)
    import jitgrad.compiler.describe as describe

    def refuse(*args, **kwargs):
        raise AssertionError("an in-place launch was described again")

    monkeypatch.setattr(describe, "describe_op", refuse)
    for got, want in zip(run("cuda"), ref):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int32, np.float16])
def test_broadcast_views_of_dtypes_without_a_kernel_keep_their_shape(dtype):
    a = np.arange(35).reshape(5, 7).astype(dtype)
    want = None
    for dev in ("cpu", "cuda"):
        x = torch.tensor(a, device=dev)
        outs = [x[:1].expand(5, 7) + x, x[0, :1].expand(5, 7) * x[:, 1:2].expand(5, 7),
                x[2, 3].expand(4) - x[1, 1].expand(4)]
        got = [o.cpu().numpy() for o in outs]
        assert [g.shape for g in got] == [(5, 7), (5, 7), (4,)]
        if want is None:
            want = got
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_integer_style_operators_stay_on_the_device():
    # %, //, &, |, ^ ran NumPy's functions and np.asarray on the result: a CUDA operand
    # gave a CPU result in the simulator (and CuPy would refuse np.asarray on a GPU)
    x = torch.tensor([5.5, -3.0, 7.25], device="cuda")
    i = torch.tensor([5, -3, 6], device="cuda")
    for r, want in ((x % 2.0, [1.5, 1.0, 1.25]), (x // 2.0, [2.0, -2.0, 3.0]),
                    (7.0 % x, [1.5, -2.0, 7.0]), (i & 3, [1, 1, 2]), (i | 8, [13, -3, 14]),
                    (i ^ i, [0, 0, 0]), (torch.fmod(x, -2.0), [1.5, -1.0, 1.25])):
        assert r.device == "cuda:0", r
        assert r.cpu().tolist() == want
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        i // torch.tensor([1, 1, 1])
