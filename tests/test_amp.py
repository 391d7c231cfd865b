"""Automatic mixed precision: ``jitgrad.autocast`` (policy, state, cache, backward, compiled
functions) and ``jitgrad.amp.GradScaler``, with PyTorch's CPU autocast and GradScaler as the
oracle where torch is installed."""

from __future__ import annotations

import pickle
import threading
import warnings

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F
from jitgrad.amp import policy
from jitgrad.amp.autocast_mode import STATE

F16 = jitgrad.float16


def _cases(m):
    """name -> fn(x) for module ``m`` (torch or jitgrad): one call of a function autocast may
    change, on a 4x6 floating ``x``."""
    nnf = m.nn.functional
    return {
        "mm": lambda x: m.mm(x, x.t()),
        "matmul": lambda x: x @ x.t(),
        "linear": lambda x: nnf.linear(x, m.ones(5, 6), m.ones(5)),
        "bmm": lambda x: m.bmm(x[None], x.t()[None]),
        "addmm": lambda x: m.addmm(x[:, :4], x, x.t()),
        "baddbmm": lambda x: m.baddbmm(x[None, :, :4], x[None], x.t()[None]),
        "mv": lambda x: m.mv(x, x[0]),
        "addmv": lambda x: m.addmv(x[:, 0], x, x[0]),
        "conv2d": lambda x: nnf.conv2d(x.reshape(1, 1, 4, 6), x[:2, :3].reshape(2, 1, 1, 3)),
        "conv1d": lambda x: nnf.conv1d(x[None], x[:, :3].reshape(2, 2, 3)[:, :1].repeat(1, 4, 1)),
        "conv3d": lambda x: nnf.conv3d(x.reshape(1, 1, 2, 2, 6), x[:2, :3].reshape(2, 1, 1, 1, 3)),
        "conv_transpose3d": lambda x: nnf.conv_transpose3d(x.reshape(1, 1, 2, 2, 6),
                                                           x[:1, :4].reshape(1, 1, 1, 2, 2)),
        "conv_transpose2d": lambda x: nnf.conv_transpose2d(x.reshape(1, 1, 4, 6),
                                                           x[:1, :4].reshape(1, 1, 2, 2)),
        "prelu": lambda x: nnf.prelu(x, x[0, :1]),
        "einsum": lambda x: m.einsum("ij,kj->ik", x, x),
        "sdpa": lambda x: nnf.scaled_dot_product_attention(x[None], x[None], x[None]),
        "softmax": lambda x: nnf.softmax(x, 1),
        "log_softmax": lambda x: nnf.log_softmax(x, 1),
        "cross_entropy": lambda x: nnf.cross_entropy(x, m.tensor([0, 1, 2, 3])),
        "nll_loss": lambda x: nnf.nll_loss(x, m.tensor([0, 1, 2, 3])),
        "mse_loss": lambda x: nnf.mse_loss(x, x * 2),
        "l1_loss": lambda x: nnf.l1_loss(x, x * 2),
        "smooth_l1_loss": lambda x: nnf.smooth_l1_loss(x, x * 2),
        "huber_loss": lambda x: nnf.huber_loss(x, x * 2),
        "bce": lambda x: nnf.binary_cross_entropy(x.sigmoid(), x.sigmoid().detach() * 0.5),
        "bce_logits": lambda x: nnf.binary_cross_entropy_with_logits(x, x.detach() * 0),
        "kl_div": lambda x: nnf.kl_div(x, x.exp(), reduction="batchmean"),
        "layer_norm": lambda x: nnf.layer_norm(x, (6,)),
        "group_norm": lambda x: nnf.group_norm(x[..., None], 2),
        "sum": lambda x: x.sum(),
        "mean": lambda x: x.mean(),
        "prod": lambda x: x.prod(),
        "cumsum": lambda x: x.cumsum(0),
        "exp": lambda x: x.exp(),
        "log": lambda x: x.abs().log(),
        "pow": lambda x: x ** 2,
        "cdist": lambda x: m.cdist(x, x),
        "trace": lambda x: m.trace(x),
        "norm": lambda x: x.norm(),
        "normalize": lambda x: nnf.normalize(x),
        "cosine_similarity": lambda x: nnf.cosine_similarity(x, x + 1),
        "logsumexp": lambda x: x.logsumexp(1),
        "softplus": lambda x: nnf.softplus(x),
        "softmin": lambda x: nnf.softmin(x, 1),
        "tanh": lambda x: x.tanh(),
        "relu": lambda x: nnf.relu(x),
        "gelu": lambda x: nnf.gelu(x),
        "max_pool2d": lambda x: nnf.max_pool2d(x.reshape(1, 1, 4, 6), 2),
        "avg_pool2d": lambda x: nnf.avg_pool2d(x.reshape(1, 1, 4, 6), 2),
        "batch_norm": lambda x: nnf.batch_norm(x, None, None, training=True),
        "cat": lambda x: m.cat([x, x.float()]),
        "stack": lambda x: m.stack([x, x.float()]),
        "add_mixed": lambda x: x + x.float(),
        "addcmul": lambda x: m.addcmul(x, x.float(), x.float()),
        "atan2": lambda x: m.atan2(x, x.float()),
        "var": lambda x: x.var(),
        "soft_margin_loss": lambda x: nnf.soft_margin_loss(x, x.detach().sign()),
        "poisson_nll_loss": lambda x: nnf.poisson_nll_loss(x, x.detach().abs()),
        "triplet_margin_loss": lambda x: nnf.triplet_margin_loss(x, x.flip(0), x * 2),
        "multi_margin_loss": lambda x: nnf.multi_margin_loss(x, m.tensor([0, 1, 2, 3])),
        "gaussian_nll_loss": lambda x: nnf.gaussian_nll_loss(x, x.flip(0), x.detach().abs()),
    }


CASE_NAMES = sorted(_cases(jitgrad))


def _grads_like(t_out, j_out):
    return t_out.float().sum(), j_out.float().sum()


@pytest.mark.parametrize("input_dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", CASE_NAMES)
def test_cpu_autocast_matches_torch(name, input_dtype):
    """Under CPU float16 autocast every function gives PyTorch's output dtype, values (to
    float16 rounding) and input-gradient dtype, from float32 and from float16 inputs."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(7).standard_normal((4, 6)).astype(input_dtype) + 0.1
    tx = torch.tensor(x, requires_grad=True)
    jx = jitgrad.tensor(x, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.float16):
        t_out = _cases(torch)[name](tx)
    with jitgrad.autocast("cpu", dtype=F16):
        j_out = _cases(jitgrad)[name](jx)
    assert j_out.dtype.name == str(t_out.dtype).replace("torch.", "")
    tol = 3e-3 if t_out.dtype == torch.float16 or input_dtype == "float16" else 1e-5
    np.testing.assert_allclose(j_out.detach().float().numpy(),
                               t_out.detach().float().numpy(), rtol=tol, atol=tol)
    tl, jl = _grads_like(t_out, j_out)
    tl.backward()
    jl.backward()
    assert jx.grad.dtype.name == str(tx.grad.dtype).replace("torch.", "")
    np.testing.assert_allclose(jx.grad.float().numpy(), tx.grad.float().numpy(),
                               rtol=2e-2, atol=2e-2)


def test_policy_names_are_wrapped_public_functions():
    """Every name in a policy list is a public function defined through ``autocast_op``."""
    spaces = (jitgrad, jitgrad.nn.functional, jitgrad.Tensor)
    for table in policy.POLICIES.values():
        for name in table:
            fns = [getattr(s, name) for s in spaces if hasattr(s, name)]
            assert fns, name
            assert any(getattr(f, "__autocast_name__", None) == name for f in fns), name


def test_autocast_op_rejects_unlisted_names():
    from jitgrad.amp.autocast_mode import autocast_op

    with pytest.raises(ValueError, match="in no autocast list"):
        autocast_op(lambda x: x, name="not_an_op")


def test_wrappers_keep_signatures_and_docs():
    import inspect

    from jitgrad.ops.nnops.nll import cross_entropy

    sig = inspect.signature(cross_entropy)
    assert list(sig.parameters)[:3] == ["input", "target", "weight"]
    assert sig.parameters["label_smoothing"].default == 0.0
    assert "cross" in (cross_entropy.__doc__ or "").lower() or cross_entropy.__doc__
    assert jitgrad.Tensor.exp is jitgrad.exp  # the method is the wrapped function
    a = jitgrad.ones(2, 3)
    assert jitgrad.sum(a, 1, keepdim=True).shape == (2, 1)
    assert jitgrad.sum(a, dim=0, dtype=jitgrad.float64).dtype == jitgrad.float64


def test_lower_precision_linear_then_fp32_loss_and_gradients():
    x = jitgrad.randn(8, 5)
    lin = jitgrad.nn.Linear(5, 3)
    with jitgrad.autocast("cpu", dtype=F16):
        y = lin(x)
        assert y.dtype == F16 and type(y.grad_fn).__name__ == "AddmmBackward0"
        loss = F.cross_entropy(y, jitgrad.tensor([0, 1, 2, 0, 1, 2, 0, 1]))
        assert loss.dtype == jitgrad.float32
    loss.backward()
    assert lin.weight.grad.dtype == jitgrad.float32 and lin.bias.grad.dtype == jitgrad.float32
    assert lin.weight.dtype == jitgrad.float32  # parameters are never changed


def test_float64_tensors_and_other_devices_are_not_cast():
    a = jitgrad.randn(3, 3, dtype=jitgrad.float64)
    with jitgrad.autocast("cpu", dtype=F16):
        assert (a @ a).dtype == jitgrad.float64
        assert (jitgrad.ones(2, dtype=jitgrad.int64) @ jitgrad.ones(2, dtype=jitgrad.int64)
                ).dtype == jitgrad.int64


def test_state_functions_and_nesting():
    assert not jitgrad.is_autocast_enabled("cpu")
    assert jitgrad.get_autocast_dtype("cpu") is jitgrad.bfloat16
    assert jitgrad.get_autocast_dtype("cuda") is F16
    a = jitgrad.ones(2, 2)
    with jitgrad.autocast("cpu", dtype=F16):
        assert jitgrad.is_autocast_enabled("cpu") and not jitgrad.is_autocast_enabled()
        assert jitgrad.get_autocast_dtype("cpu") is F16
        with jitgrad.autocast("cpu", enabled=False):
            assert not jitgrad.is_autocast_enabled("cpu")
            assert (a @ a).dtype == jitgrad.float32
        assert (a @ a).dtype == F16
    assert not jitgrad.is_autocast_enabled("cpu")
    assert (a @ a).dtype == jitgrad.float32
    assert STATE.nesting == 0 and STATE.active is None and not STATE.cache
    jitgrad.set_autocast_enabled("cpu", True)
    jitgrad.set_autocast_dtype("cpu", F16)
    try:
        assert (a @ a).dtype == F16
    finally:
        jitgrad.set_autocast_enabled("cpu", False)
        jitgrad.set_autocast_dtype("cpu", jitgrad.bfloat16)
    assert (a @ a).dtype == jitgrad.float32


def test_state_is_restored_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with jitgrad.autocast("cpu", dtype=F16):
            raise ZeroDivisionError("inside the region")
    assert not jitgrad.is_autocast_enabled("cpu") and STATE.active is None


def test_decorator_form_and_errors():
    @jitgrad.autocast("cpu", dtype=F16)
    def f(a):
        return a @ a

    assert f(jitgrad.ones(2, 2)).dtype == F16
    assert not jitgrad.is_autocast_enabled("cpu")
    with pytest.raises(TypeError, match="requires a callable"):
        jitgrad.autocast("cpu", dtype=F16)(3)
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        jitgrad.autocast(jitgrad.device("cpu"))
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'mps'"):
        jitgrad.autocast("mps")
    assert jitgrad.amp.is_autocast_available("cpu")
    assert not jitgrad.amp.is_autocast_available("mps")


def test_bfloat16_warns_and_disables():
    """PyTorch's CPU default is bfloat16, which jitgrad cannot store: autocast warns and
    disables itself (PyTorch's behaviour for an unsupported dtype)."""
    a = jitgrad.ones(2, 2)
    with pytest.warns(UserWarning, match="target dtype is not supported. Disabling autocast"):
        ctx = jitgrad.autocast("cpu")
    with ctx:
        assert (a @ a).dtype == jitgrad.float32
    with pytest.warns(UserWarning, match="not supported"):
        jitgrad.autocast("cpu", dtype=jitgrad.int32)


def test_autocast_is_thread_local():
    a = jitgrad.ones(2, 2)
    seen = []

    def other():
        seen.append((a @ a).dtype)

    with jitgrad.autocast("cpu", dtype=F16):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert (a @ a).dtype == F16
    assert seen == [jitgrad.float32]


def test_weight_cache_reuses_casts_within_the_region():
    w = jitgrad.nn.Parameter(jitgrad.randn(4, 4))
    x = jitgrad.randn(2, 4)
    with jitgrad.autocast("cpu", dtype=F16):
        y1 = F.linear(x, w)
        y2 = F.linear(x, w)
        assert y1.grad_fn.next_functions[1][0] is y2.grad_fn.next_functions[1][0] or \
            len(STATE.cache) == 1
        assert len(STATE.cache) == 1
        with jitgrad.no_grad():
            w.add_(1.0)  # a new version: a new cast
        y3 = F.linear(x, w)
        np.testing.assert_allclose(y3.detach().float().numpy(),
                                   (y1.float() + x.sum(1, keepdim=True)).detach().numpy(),
                                   rtol=1e-2, atol=1e-2)
    assert not STATE.cache
    (y1.float().sum() + y2.float().sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.broadcast_to(
        x.half().float().sum(0).numpy(), (4, 4)), rtol=1e-3, atol=1e-3)


def test_cache_can_be_disabled():
    w = jitgrad.nn.Parameter(jitgrad.randn(4, 4))
    with jitgrad.autocast("cpu", dtype=F16, cache_enabled=False):
        F.linear(jitgrad.ones(1, 4), w)
        assert not STATE.cache
    assert jitgrad.is_autocast_cache_enabled()


def test_cached_cast_made_under_no_grad_is_not_reused_with_grad():
    w = jitgrad.nn.Parameter(jitgrad.randn(3, 3))
    x = jitgrad.ones(1, 3)
    with jitgrad.autocast("cpu", dtype=F16):
        with jitgrad.no_grad():
            F.linear(x, w)
        y = F.linear(x, w)
    y.float().sum().backward()
    assert w.grad is not None


def test_backward_inside_autocast_runs_in_forward_dtypes():
    x = jitgrad.randn(4, 3, requires_grad=True)
    w = jitgrad.randn(3, 3, requires_grad=True)
    with jitgrad.autocast("cpu", dtype=F16):
        y = (x @ w).relu().sum()
        y.backward()
        gx, = jitgrad.autograd.grad((x @ w).float().sum(), x)
    ref_x = x.grad.clone()
    assert x.grad.dtype == jitgrad.float32 and gx.dtype == jitgrad.float32
    x.grad = None
    (x.half() @ w.half()).relu().sum().backward()
    np.testing.assert_array_equal(ref_x.numpy(), x.grad.numpy())


def test_in_place_updates_and_optimizers_outside_the_region():
    model = jitgrad.nn.Sequential(jitgrad.nn.Linear(4, 8), jitgrad.nn.ReLU(),
                                  jitgrad.nn.Linear(8, 2))
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.1)
    x, y = jitgrad.randn(16, 4), jitgrad.randint(0, 2, (16,))
    losses = []
    for _ in range(20):
        with jitgrad.autocast("cpu", dtype=F16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert all(p.dtype == jitgrad.float32 for p in model.parameters())


def test_binary_cross_entropy_is_fp32_on_cpu():
    p = jitgrad.rand(4).clamp(0.1, 0.9)
    with jitgrad.autocast("cpu", dtype=F16):
        assert F.binary_cross_entropy(p.half(), p.half()).dtype == jitgrad.float32


def test_compiled_function_under_autocast_runs_eagerly_and_matches():
    lin = jitgrad.nn.Linear(4, 3)

    def step(x):
        return F.log_softmax(lin(x), 1).sum()

    f = jitgrad.compile(step)
    x = jitgrad.randn(5, 4)
    f(x)  # compiled, float32
    with jitgrad.autocast("cpu", dtype=F16):
        with pytest.warns(UserWarning, match="under autocast and runs eagerly"):
            got = f(x)
        want = step(x)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            again = f(x)  # warned once
    assert got.dtype == want.dtype == F16 == again.dtype
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    assert f.stats["autocast_eager"] == 2
    out = f(x)  # outside again: the compiled float32 entry
    assert out.dtype == jitgrad.float32
    np.testing.assert_allclose(out.detach().numpy(), step(x).detach().numpy(), rtol=1e-6)


def test_autocast_inside_a_compiled_function_matches_eager():
    w = jitgrad.randn(4, 4, requires_grad=True)

    def f(x):
        with jitgrad.autocast("cpu", dtype=F16):
            y = x @ w
        return y.float().tanh().sum()

    cf = jitgrad.compile(f)
    x = jitgrad.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = cf(x)
        got.backward()
    g = w.grad.clone()
    w.grad = None
    want = f(x)
    want.backward()
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(g.numpy(), w.grad.numpy())
    assert not jitgrad.is_autocast_enabled("cpu")


def test_custom_fwd_and_bwd():
    seen = {}

    class Square(jitgrad.autograd.Function):
        @staticmethod
        @jitgrad.amp.custom_fwd(device_type="cpu", cast_inputs=jitgrad.float32)
        def forward(ctx, a):
            seen["fwd"] = (a.dtype, jitgrad.is_autocast_enabled("cpu"))
            ctx.save_for_backward(a)
            return a @ a

        @staticmethod
        @jitgrad.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, = ctx.saved_tensors
            seen["bwd"] = jitgrad.is_autocast_enabled("cpu")
            return g @ a.t() + a.t() @ g

    x = jitgrad.randn(3, 3, requires_grad=True)
    with jitgrad.autocast("cpu", dtype=F16):
        y = Square.apply(x.half())
    assert seen["fwd"] == (jitgrad.float32, False) and y.dtype == jitgrad.float32
    y.sum().backward()
    assert seen["bwd"] is False and x.grad is not None

    class Keep(jitgrad.autograd.Function):
        @staticmethod
        @jitgrad.amp.custom_fwd(device_type="cpu")
        def forward(ctx, a):
            return a @ a

        @staticmethod
        @jitgrad.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd2"] = jitgrad.is_autocast_enabled("cpu")
            return g

    with jitgrad.autocast("cpu", dtype=F16):
        y = Keep.apply(jitgrad.ones(2, 2, requires_grad=True))
    assert y.dtype == F16
    y.float().sum().backward()
    assert seen["bwd2"] is True


def test_deprecated_spellings():
    with pytest.warns(FutureWarning, match=r"torch.cpu.amp.autocast\(args...\)` is deprecated"):
        ctx = jitgrad.cpu.amp.autocast(dtype=F16)
    with ctx:
        assert (jitgrad.ones(2, 2) @ jitgrad.ones(2, 2)).dtype == F16
    assert jitgrad.cpu.is_available() and jitgrad.cpu.device_count() == 1


def test_cuda_autocast_without_cuda_warns_and_disables(monkeypatch):
    monkeypatch.setattr(jitgrad.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="CUDA is not available. Disabling autocast"):
        ctx = jitgrad.autocast("cuda")
    with ctx:
        assert not jitgrad.is_autocast_enabled("cuda")
    with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available"):
        scaler = jitgrad.amp.GradScaler()
    assert not scaler.is_enabled() and scaler.get_scale() == 1.0
    loss = jitgrad.ones(1, requires_grad=True).sum()
    assert scaler.scale(loss) is loss and scaler.state_dict() == {}


def test_float16_products_accumulate_in_float32():
    """A float16 matmul is float32 BLAS over the widened operands, rounded once (PyTorch's
    accumulation), not NumPy's float16 loop rounding every partial sum."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 512)).astype(np.float16)
    b = rng.standard_normal((512, 32)).astype(np.float16)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    got = (jitgrad.tensor(a) @ jitgrad.tensor(b)).numpy()
    np.testing.assert_array_equal(got, want)
    bias = rng.standard_normal(32).astype(np.float16)  # addmm: the bias added in float32 too
    lin = F.linear(jitgrad.tensor(a), jitgrad.tensor(b.T.copy()), jitgrad.tensor(bias))
    np.testing.assert_array_equal(lin.numpy(), (a.astype(np.float32) @ b.astype(np.float32)
                                                + bias.astype(np.float32)).astype(np.float16))
    torch = pytest.importorskip("torch")
    t = (torch.tensor(a) @ torch.tensor(b)).numpy()
    assert np.abs(got.astype(np.float32) - t.astype(np.float32)).max() <= \
        np.abs(t.astype(np.float32)).max() * 2 ** -10


# ------------------------------------------------------------------------- GradScaler
def _scaler_run(m, scaler, steps, bad_steps, clip=False):
    """A tiny model trained ``steps`` times with ``scaler``; at ``bad_steps`` a gradient is
    made inf. Returns (scales, losses, params)."""
    rng = np.random.default_rng(0)
    w = m.tensor(rng.standard_normal((3, 2)).astype(np.float32), requires_grad=True)
    opt = m.optim.SGD([w], lr=0.05, momentum=0.9)
    x = m.tensor(rng.standard_normal((8, 3)).astype(np.float32))
    scales, losses = [], []
    for i in range(steps):
        loss = ((x @ w) ** 2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        if i in bad_steps:
            w.grad[0, 0] = float("inf")
        if clip:
            scaler.unscale_(opt)
            m.nn.utils.clip_grad_norm_([w], 1.0)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        losses.append(loss.item())
    return scales, losses, w.detach().numpy()


@pytest.mark.parametrize("clip", [False, True])
def test_grad_scaler_matches_torch(clip):
    torch = pytest.importorskip("torch")
    kw = dict(init_scale=2.0 ** 10, growth_factor=3.0, backoff_factor=0.25, growth_interval=3)
    bad = {1, 5, 6}
    t = _scaler_run(torch, torch.amp.GradScaler("cpu", **kw), 12, bad, clip)
    j = _scaler_run(jitgrad, jitgrad.amp.GradScaler("cpu", **kw), 12, bad, clip)
    assert j[0] == t[0]
    np.testing.assert_allclose(j[1], t[1], rtol=1e-6)
    np.testing.assert_allclose(j[2], t[2], rtol=1e-6)


def test_grad_scaler_skips_steps_and_backs_off():
    scaler = jitgrad.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    w = jitgrad.ones(2, requires_grad=True)
    opt = jitgrad.optim.SGD([w], lr=1.0)
    scaler.scale((w * 2).sum()).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [16.0, 16.0])
    w.grad[1] = float("nan")
    assert scaler.step(opt) is None  # skipped
    np.testing.assert_array_equal(w.detach().numpy(), [1.0, 1.0])
    scaler.update()
    assert scaler.get_scale() == 4.0 and scaler.state_dict()["_growth_tracker"] == 0
    for expect in (4.0, 8.0):
        opt.zero_grad()
        scaler.scale((w * 2).sum()).backward()
        scaler.step(opt)
        scaler.update()
        assert scaler.get_scale() == expect
    np.testing.assert_allclose(w.detach().numpy(), [-3.0, -3.0])


def test_grad_scaler_errors_and_state():
    scaler = jitgrad.amp.GradScaler("cpu")
    w = jitgrad.ones(2, requires_grad=True)
    opt = jitgrad.optim.SGD([w], lr=0.1)
    with pytest.raises(AssertionError, match="Attempted unscale_ but _scale is None"):
        scaler.unscale_(opt)
    scaler.scale(w.sum()).backward()
    scaler.unscale_(opt)
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0])
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: None)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step"):
        scaler.unscale_(opt)
    with pytest.raises(AssertionError, match="may only be pickled"):
        pickle.dumps(scaler)
    scaler.update(new_scale=128.0)
    assert scaler.get_scale() == 128.0
    with pytest.raises(AssertionError, match="new_scale should be a float"):
        scaler.update(new_scale=jitgrad.ones(2))
    state = scaler.state_dict()
    other = pickle.loads(pickle.dumps(scaler))
    assert other.state_dict() == state
    fresh = jitgrad.amp.GradScaler("cpu")
    fresh.load_state_dict(state)
    assert fresh.get_scale() == 128.0
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        fresh.load_state_dict({})
    with pytest.raises(AssertionError, match="growth factor must be > 1.0"):
        jitgrad.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(ValueError, match="iterable of Tensors"):
        scaler.scale([w.sum(), 3])


def test_grad_scaler_refuses_float16_gradients_and_changes_nothing():
    scaler = jitgrad.amp.GradScaler("cpu", init_scale=4.0)
    a = jitgrad.ones(2, requires_grad=True)
    h = jitgrad.ones(2, dtype=F16, requires_grad=True)
    opt = jitgrad.optim.SGD([a, h], lr=0.1)
    scaler.scale(a.sum() + h.float().sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
        scaler.step(opt)
    np.testing.assert_array_equal(a.grad.numpy(), [4.0, 4.0])


def test_grad_scaler_scales_nested_outputs_and_passes_through_when_disabled():
    scaler = jitgrad.amp.GradScaler("cpu", init_scale=2.0)
    a, b = jitgrad.ones(1), jitgrad.ones(2)
    out = scaler.scale([a, (b, a)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    assert out[1][0].tolist() == [2.0, 2.0]
    off = jitgrad.amp.GradScaler("cpu", enabled=False)
    w = jitgrad.ones(1, requires_grad=True)
    opt = jitgrad.optim.SGD([w], lr=1.0)
    w.sum().backward()
    off.step(opt)
    off.update()
    assert w.tolist() == [0.0] and off.get_scale() == 1.0


def test_training_with_autocast_and_scaler_follows_torch():
    """The AMP recipe (autocast forward, scaled backward, scaler step) on a small MLP: the
    losses follow PyTorch's CPU float16 autocast run from the same weights."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 10)).astype(np.float32)
    y = rng.integers(0, 4, 32)
    w1 = rng.standard_normal((16, 10)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((4, 16)).astype(np.float32) * 0.3

    def run(m):
        p1 = m.tensor(w1, requires_grad=True)
        p2 = m.tensor(w2, requires_grad=True)
        opt = m.optim.SGD([p1, p2], lr=0.2)
        scaler = m.amp.GradScaler("cpu", init_scale=2.0 ** 8)
        xs, ys, out = m.tensor(x), m.tensor(y), []
        for _ in range(15):
            with m.autocast("cpu", dtype=m.float16):
                h = m.nn.functional.relu(m.nn.functional.linear(xs, p1))
                loss = m.nn.functional.cross_entropy(m.nn.functional.linear(h, p2), ys)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            out.append(loss.item())
        return out

    t, j = run(torch), run(jitgrad)
    np.testing.assert_allclose(j, t, rtol=2e-2, atol=2e-3)
    assert j[-1] < j[0]


def test_other_threads_autocasting_change_nothing_here():
    """Autocast on in another thread (``AUTOCASTING`` non-empty): this thread's listed
    functions, backward and grad run as without autocast."""
    entered, release = threading.Event(), threading.Event()

    def other():
        with jitgrad.autocast("cpu", dtype=F16):
            entered.set()
            release.wait(30)

    t = threading.Thread(target=other)
    t.start()
    try:
        assert entered.wait(30)
        x = jitgrad.randn(3, 3, requires_grad=True)
        y = (x @ x).exp().sum()
        assert y.dtype == jitgrad.float32
        gx, = jitgrad.autograd.grad(y, x, retain_graph=True)
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), gx.numpy())
        f = jitgrad.compile(lambda a: (a @ a).sum())
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert f(x).dtype == jitgrad.float32 and f.stats.get("autocast_eager", 0) == 0
    finally:
        release.set()
        t.join()
