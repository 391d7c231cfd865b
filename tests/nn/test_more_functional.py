"""Activations and functions written with jitgrad's ops (jitgrad/nn/activation_functions.py,
similarity.py, kl_div.py, functional.one_hot) and their modules: PyTorch's values and
gradients (boundaries of the piecewise ones included, and finite where an unused branch
would overflow), gradcheck in float64, modules, in place, CUDA and compiled."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.autograd import gradcheck

#: the kinks and thresholds of every function, and far out (overflow of unused branches)
GRID = np.concatenate([np.linspace(-30.0, 30.0, 61),
                       [-3.0, 3.0, 0.0, -0.0, 6.0, -1.0, 1.0, 25.0, -25.0, 20.0, 19.999,
                        800.0, -800.0, 0.5, -0.5, 2.0]])

#: name -> (function of the library's functional module and x, gradient rtol vs PyTorch)
POINTWISE = {
    "silu": (lambda F, x: F.silu(x), 1e-12),
    "softplus": (lambda F, x: F.softplus(x), 1e-12),
    "softplus_beta": (lambda F, x: F.softplus(x, beta=2.0, threshold=10.0), 1e-12),
    "mish": (lambda F, x: F.mish(x), 1e-12),
    "elu": (lambda F, x: F.elu(x), 1e-12),
    "elu_alpha": (lambda F, x: F.elu(x, alpha=0.5), 1e-12),
    "selu": (lambda F, x: F.selu(x), 1e-12),
    "celu": (lambda F, x: F.celu(x, alpha=2.0), 1e-12),
    "leaky_relu": (lambda F, x: F.leaky_relu(x), 1e-12),
    "leaky_relu_slope": (lambda F, x: F.leaky_relu(x, 0.2), 1e-12),
    "hardtanh": (lambda F, x: F.hardtanh(x), 1e-12),
    "hardtanh_range": (lambda F, x: F.hardtanh(x, -2.0, 3.0), 1e-12),
    "relu6": (lambda F, x: F.relu6(x), 1e-12),
    "hardsigmoid": (lambda F, x: F.hardsigmoid(x), 1e-7),  # PyTorch's grad: a float32 1/6
    "hardswish": (lambda F, x: F.hardswish(x), 1e-12),
    "logsigmoid": (lambda F, x: F.logsigmoid(x), 1e-12),
    "softsign": (lambda F, x: F.softsign(x), 1e-12),
    "threshold": (lambda F, x: F.threshold(x, 1.0, -2.0), 1e-12),
}


def _pair(fn, a):
    torch = pytest.importorskip("torch")
    x, xt = jitgrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    return x, xt, fn(F, x), fn(torch.nn.functional, xt)


@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_values_and_gradients_match_pytorch_everywhere(name):
    fn, grad_rtol = POINTWISE[name]
    x, xt, y, yt = _pair(fn, GRID)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-15,
                               atol=1e-300)
    w = np.cos(np.arange(GRID.size))
    (y * jitgrad.tensor(w)).sum().backward()
    (yt * pt_tensor(w)).sum().backward()
    g = x.grad.numpy()
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g, xt.grad.numpy(), rtol=grad_rtol, atol=1e-300)


def pt_tensor(a):
    import torch

    return torch.tensor(a)


@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_gradcheck(name):
    fn, _ = POINTWISE[name]
    rng = np.random.default_rng(1)
    a = rng.uniform(-4.0, 4.0, 40)
    a = a[np.min(np.abs(a[:, None] - np.array([-3.0, 0.0, 1.0, 3.0, 6.0])), 1) > 1e-3]
    x = jitgrad.tensor(a, requires_grad=True)
    assert gradcheck(lambda t: fn(F, t), (x,), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_formulas_without_pytorch():
    a = np.array([-2.0, -0.5, 0.0, 0.5, 2.0, 30.0])
    x = jitgrad.tensor(a)
    sig = 1.0 / (1.0 + np.exp(-a))
    np.testing.assert_allclose(F.silu(x).numpy(), a * sig, rtol=1e-15)
    np.testing.assert_allclose(F.softplus(x).numpy()[:5], np.log1p(np.exp(a[:5])), rtol=1e-15)
    assert F.softplus(x).numpy()[5] == 30.0 - 0.0 or F.softplus(x).numpy()[5] > 29.9
    np.testing.assert_allclose(F.elu(x).numpy(), np.where(a > 0, a, np.expm1(a)), rtol=1e-15)
    np.testing.assert_array_equal(F.leaky_relu(x, 0.1).numpy(), np.where(a > 0, a, 0.1 * a))
    np.testing.assert_array_equal(F.relu6(x).numpy(), np.clip(a, 0, 6))
    np.testing.assert_allclose(F.logsigmoid(x).numpy(),
                               np.where(a < 0, a - np.log1p(np.exp(a)), -np.log1p(np.exp(-a))),
                               rtol=1e-15)
    np.testing.assert_allclose(F.hardswish(x).numpy(), a * np.clip(a + 3, 0, 6) / 6, rtol=1e-15)


def test_unused_branches_never_poison_the_gradient():
    x = jitgrad.tensor([800.0, -800.0, 1e4], requires_grad=True)
    (F.softplus(x) + F.elu(x) + F.celu(x) + F.mish(x) + F.logsigmoid(x) + F.selu(x)).sum() \
        .backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_glu_prelu_and_their_errors():
    torch = pytest.importorskip("torch")
    b = np.random.default_rng(0).standard_normal((2, 6, 3))
    for dim in (1, -1 if False else 1):
        x, xt = jitgrad.tensor(b, requires_grad=True), torch.tensor(b, requires_grad=True)
        F.glu(x, dim).sum().backward()
        torch.nn.functional.glu(xt, dim).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-14)
    w = np.linspace(0.1, 0.6, 6)
    x, xt = jitgrad.tensor(b, requires_grad=True), torch.tensor(b, requires_grad=True)
    wj, wt = jitgrad.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    (F.prelu(x, wj) * 2.0).sum().backward()
    (torch.nn.functional.prelu(xt, wt) * 2.0).sum().backward()
    np.testing.assert_allclose(wj.grad.numpy(), wt.grad.numpy(), rtol=1e-14)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-14)
    with pytest.raises(RuntimeError, match="Halving dimension must be even, but dimension 2 "
                                           "is size 3"):
        F.glu(jitgrad.ones(2, 6, 3))
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel "
                                           "size. Found parameter numbers = 2"):
        F.prelu(jitgrad.ones(2, 6, 3), jitgrad.ones(2))
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        nn.Hardtanh(2.0, 1.0)


def test_inplace_forms_write_into_their_input():
    for fn in (lambda t: F.silu(t, inplace=True), lambda t: F.elu(t, inplace=True),
               lambda t: F.leaky_relu(t, 0.3, inplace=True),
               lambda t: F.hardtanh(t, inplace=True), lambda t: F.relu6(t, inplace=True),
               lambda t: F.threshold(t, 0.0, 5.0, inplace=True)):
        t = jitgrad.tensor([-2.0, 0.5, 7.0])
        ref = fn(t.clone())
        out = fn(t)
        assert out is t and t.tolist() == ref.tolist()


def test_modules_run_their_function_and_print_like_pytorch():
    x = jitgrad.tensor(GRID)
    cases = [(nn.SiLU(), F.silu), (nn.Mish(), F.mish), (nn.Softplus(2.0, 10.0),
             lambda t: F.softplus(t, 2.0, 10.0)), (nn.ELU(0.5), lambda t: F.elu(t, 0.5)),
             (nn.SELU(), F.selu), (nn.CELU(2.0), lambda t: F.celu(t, 2.0)),
             (nn.LeakyReLU(0.2), lambda t: F.leaky_relu(t, 0.2)), (nn.Hardtanh(-2, 3),
             lambda t: F.hardtanh(t, -2, 3)), (nn.ReLU6(), F.relu6),
             (nn.Hardsigmoid(), F.hardsigmoid), (nn.Hardswish(), F.hardswish),
             (nn.LogSigmoid(), F.logsigmoid), (nn.Softsign(), F.softsign),
             (nn.Threshold(0.1, 20.0), lambda t: F.threshold(t, 0.1, 20.0))]
    for module, fn in cases:
        np.testing.assert_array_equal(module(x).numpy(), fn(x).numpy())
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    assert repr(nn.Softplus()) == "Softplus(beta=1.0, threshold=20.0)"
    assert repr(nn.ReLU6(inplace=True)) == "ReLU6(inplace=True)"
    assert repr(nn.Threshold(0.1, 20)) == "Threshold(threshold=0.1, value=20)"
    assert repr(nn.GLU()) == "GLU(dim=-1)" and repr(nn.SiLU()) == "SiLU()"
    p = nn.PReLU(3, init=0.1)
    assert repr(p) == "PReLU(num_parameters=3)" and p.weight.tolist() == pytest.approx([0.1] * 3)
    assert [n for n, _ in p.named_parameters()] == ["weight"]
    y = p(jitgrad.tensor([[-1.0, 2.0, -3.0]]))
    assert y.tolist()[0] == pytest.approx([-0.1, 2.0, -0.3])
    assert nn.GLU(1)(jitgrad.ones(2, 4)).shape == (2, 2)


# ---------------------------------------------------------------- similarity and losses
def _kl(reduction):
    return lambda F, x, y: F.kl_div(x.log_softmax(1), y.softmax(1), reduction=reduction)


A = np.random.default_rng(2).standard_normal((4, 5))
B = np.random.default_rng(3).standard_normal((4, 5))
PAIRS = {
    "normalize": lambda F, x, y: F.normalize(x) * y,
    "normalize_p1_dim0": lambda F, x, y: F.normalize(x, 1.0, 0) * y,
    "cosine_similarity": lambda F, x, y: F.cosine_similarity(x, y),
    "cosine_similarity_broadcast": lambda F, x, y: F.cosine_similarity(x, y[:1], 0),
    "pairwise_distance": lambda F, x, y: F.pairwise_distance(x, y),
    "pairwise_distance_p1": lambda F, x, y: F.pairwise_distance(x, y, 1.0, keepdim=True),
    "pairwise_distance_1d": lambda F, x, y: F.pairwise_distance(x[0], y[0]),
    **{f"kl_div_{r}": _kl(r) for r in ("mean", "batchmean", "sum", "none")},
    "kl_div_log_target": lambda F, x, y: F.kl_div(x.log_softmax(1), y.log_softmax(1),
                                                  reduction="batchmean", log_target=True),
    "kl_div_zero_targets": lambda F, x, y: F.kl_div(x, (y > 0).double() * y,
                                                    reduction="sum"),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_pair_functions_match_pytorch(name):
    torch = pytest.importorskip("torch")
    fn = PAIRS[name]
    x1, x2 = jitgrad.tensor(A, requires_grad=True), jitgrad.tensor(B, requires_grad=True)
    t1, t2 = torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div's "mean" warns (both)
        y, yt = fn(F, x1, x2), fn(torch.nn.functional, t1, t2)
    assert tuple(y.shape) == tuple(yt.shape)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-13,
                               atol=1e-15)
    (y * 1.3).sum().backward()
    (yt * 1.3).sum().backward()
    np.testing.assert_allclose(x1.grad.numpy(), t1.grad.numpy(), rtol=1e-12, atol=1e-15)
    if name != "kl_div_zero_targets":  # d/dt of t log t at t = 0: PyTorch's -inf
        np.testing.assert_allclose(x2.grad.numpy(), t2.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_pair_functions_gradcheck(name):
    fn = PAIRS[name]
    x1 = jitgrad.tensor(A, requires_grad=True)
    x2 = jitgrad.tensor(B, requires_grad=name != "kl_div_zero_targets")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert gradcheck(lambda a, b: fn(F, a, b), (x1, x2), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_kl_div_warns_for_mean_and_its_module():
    x, t = jitgrad.tensor(A).log_softmax(1), jitgrad.tensor(B).softmax(1)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(x, t)
    assert nn.KLDivLoss(reduction="batchmean")(x, t).item() == pytest.approx(
        F.kl_div(x, t, reduction="batchmean").item())
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        F.kl_div(x, t, reduction="bad")
    assert nn.CosineSimilarity(0)(x, t).shape == (5,)
    assert nn.PairwiseDistance(keepdim=True)(x, t).shape == (4, 1)


def test_one_hot():
    assert F.one_hot(jitgrad.tensor([0, 2])).tolist() == [[1, 0, 0], [0, 0, 1]]
    y = F.one_hot(jitgrad.tensor([[1], [0]]), 3)
    assert y.shape == (2, 1, 3) and y.dtype == jitgrad.int64
    assert F.one_hot(jitgrad.tensor([], dtype=jitgrad.int64), 4).shape == (0, 4)
    for bad, msg in ((jitgrad.tensor([0.0, 2.0]), "only applicable to index tensor of type "
                      "LongTensor"), (jitgrad.tensor([-1, 2]), "must be non-negative"),
                     (jitgrad.tensor([], dtype=jitgrad.int64), "Can not infer total number")):
        with pytest.raises(RuntimeError, match=msg):
            F.one_hot(bad)
    with pytest.raises(RuntimeError, match="must be smaller than num_classes"):
        F.one_hot(jitgrad.tensor([0, 3]), 3)


# ------------------------------------------------------------------- CUDA and compiled
def test_cuda_gives_the_cpus_values_and_gradients():
    if not jitgrad.cuda.is_available():
        pytest.skip("no CUDA")
    a = GRID[::3]
    for name in ("silu", "softplus", "elu", "leaky_relu", "hardswish", "logsigmoid"):
        fn, _ = POINTWISE[name]
        x = jitgrad.tensor(a, requires_grad=True)
        xc = jitgrad.tensor(a, device="cuda", requires_grad=True)
        y, yc = fn(F, x), fn(F, xc)
        y.sum().backward()
        yc.sum().backward()
        assert yc.device == "cuda:0" and xc.grad.device == "cuda:0"
        np.testing.assert_allclose(yc.detach().cpu().numpy(), y.detach().numpy(),
                                   rtol=1e-13, atol=1e-300)
        np.testing.assert_allclose(xc.grad.cpu().numpy(), x.grad.numpy(), rtol=1e-13,
                                   atol=1e-300)
    c = F.cosine_similarity(jitgrad.tensor(A, device="cuda"), jitgrad.tensor(B, device="cuda"))
    np.testing.assert_allclose(c.cpu().numpy(), F.cosine_similarity(
        jitgrad.tensor(A), jitgrad.tensor(B)).numpy(), rtol=1e-13)
    oh = F.one_hot(jitgrad.tensor([2, 0], device="cuda"), 3)
    assert oh.device == "cuda:0" and oh.cpu().tolist() == [[0, 0, 1], [1, 0, 0]]


def test_compiled_step_with_new_activations_equals_eager():
    jitgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.SiLU(), nn.Linear(8, 8), nn.LeakyReLU(0.1),
                          nn.Linear(8, 3), nn.Hardswish())
    x = jitgrad.tensor(A, dtype=jitgrad.float32)

    def step(x):
        return (F.softplus(model(x)) + F.elu(model(x))).square().mean()
    ref = step(x)
    ref.backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    compiled = jitgrad.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = compiled(x)
    out.backward()
    assert out.item() == ref.item()
    for p, g in zip(model.parameters(), grads):
        np.testing.assert_array_equal(p.grad.numpy(), g)


# ------------------------------------------------------------------ normalisation layers
NORMS = {
    "batchnorm2d": (lambda M: M.nn.BatchNorm2d(6, dtype=M.float64), (4, 6, 3, 5)),
    "batchnorm3d": (lambda M: M.nn.BatchNorm3d(6, momentum=None, dtype=M.float64),
                    (2, 6, 2, 3, 2)),
    "groupnorm": (lambda M: M.nn.GroupNorm(3, 6, dtype=M.float64), (4, 6, 3, 5)),
    "groupnorm_one_group_plain": (lambda M: M.nn.GroupNorm(1, 6, affine=False,
                                                           dtype=M.float64), (2, 6, 7)),
    "groupnorm_no_bias": (lambda M: M.nn.GroupNorm(2, 6, bias=False, dtype=M.float64),
                          (3, 6)),
}


def _run_norm(M, make, shape, train=True):
    rng = np.random.default_rng(4)
    m = make(M)
    m.train(train)
    with M.no_grad():
        if m.weight is not None:
            m.weight.copy_(M.tensor(np.linspace(0.5, 1.5, 6)))
        if m.bias is not None:
            m.bias.copy_(M.tensor(np.linspace(-1.0, 1.0, 6)))
    x = M.tensor(rng.standard_normal(shape), requires_grad=True)
    y = m(x)
    y = m(x * 1.5) if train else y  # a second batch moves the running statistics again
    (y * M.tensor(np.cos(np.arange(y.numel())).reshape(shape))).sum().backward()
    return m, x, y


@pytest.mark.parametrize("name", sorted(NORMS))
def test_normalisation_layers_match_pytorch(name):
    torch = pytest.importorskip("torch")
    make, shape = NORMS[name]
    for train in (True, False):
        (m, x, y), (mt, xt, yt) = _run_norm(jitgrad, make, shape, train), \
            _run_norm(torch, make, shape, train)
        assert repr(m) == repr(mt)
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-11, atol=1e-12)
        for name_, b in m.named_buffers():
            np.testing.assert_allclose(b.numpy(), dict(mt.named_buffers())[name_].numpy(),
                                       rtol=1e-13)
        if m.weight is not None:
            np.testing.assert_allclose(m.weight.grad.numpy(), mt.weight.grad.numpy(),
                                       rtol=1e-11, atol=1e-12)


def test_normalisation_errors_and_gradcheck():
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(jitgrad.ones(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected 5D input \(got 4D input\)"):
        nn.BatchNorm3d(3)(jitgrad.ones(2, 3, 4, 4))
    with pytest.raises(ValueError,
                       match=r"num_channels \(6\) must be divisible by num_groups \(4\)"):
        nn.GroupNorm(4, 6)
    with pytest.raises(RuntimeError, match="divisible by num_groups, but got input of shape "
                                           r"\[2, 6\] and num_groups=4"):
        F.group_norm(jitgrad.ones(2, 6), 4)
    x = jitgrad.tensor(np.random.default_rng(5).standard_normal((2, 4, 3)), requires_grad=True)
    w = jitgrad.tensor(np.linspace(0.5, 2.0, 4), requires_grad=True)
    b = jitgrad.tensor(np.linspace(-1.0, 1.0, 4), requires_grad=True)
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), (x, w, b), eps=1e-6,
                     atol=1e-6, rtol=1e-5)


def test_a_cnn_with_batchnorm2d_compiles_to_eagers_results():
    jitgrad.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.SiLU(),
                          nn.Conv2d(4, 4, 3), nn.GroupNorm(2, 4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 4 * 4, 3))
    x = jitgrad.randn(5, 1, 8, 8)
    y = jitgrad.tensor([0, 1, 2, 1, 0])

    def step(x, y):
        return F.cross_entropy(model(x), y)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ref = step(x, y)
    ref.backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    ref_state = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    model.zero_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = jitgrad.compile(step)(x, y)
    out.backward()
    assert out.item() == ref.item()
    for p, g in zip(model.parameters(), grads):
        np.testing.assert_array_equal(p.grad.numpy(), g)
    for k, v in model.state_dict().items():  # running statistics updated the same way
        np.testing.assert_array_equal(v.numpy(), ref_state[k].numpy())


# ------------------------------------------------------------------ 1-D conv and pooling
def _module_matches_pytorch(make, a, rng, param_rtol: float = 1e-12) -> None:
    """``make(jitgrad)`` and ``make(torch)`` with the same random parameters: the same repr,
    output, input gradient and parameter gradients (a weighted sum's)."""
    torch = pytest.importorskip("torch")
    params = None
    outs = []
    for M in (jitgrad, torch):
        m = make(M)
        if params is None:
            params = {k: rng.standard_normal(tuple(v.shape)) for k, v in m.named_parameters()}
        with M.no_grad():
            for k, v in m.named_parameters():
                v.copy_(M.tensor(params[k]))
        x = M.tensor(a, requires_grad=True)
        y = m(x)
        (y * M.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))).sum().backward()
        outs.append((repr(m), y.detach().numpy(), x.grad.numpy(),
                     [p.grad.numpy() for p in m.parameters()]))
    (r, y, g, pg), (rt, yt, gt, pgt) = outs
    assert r == rt and y.shape == yt.shape
    np.testing.assert_allclose(y, yt, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, gt, rtol=1e-12, atol=1e-12)
    for p, q in zip(pg, pgt):
        np.testing.assert_allclose(p, q, rtol=param_rtol, atol=1e-12)


ONE_D = {
    "conv1d": lambda M: M.nn.Conv1d(3, 4, 5, dtype=M.float64),
    "conv1d_strided": lambda M: M.nn.Conv1d(3, 4, 3, padding=2, bias=False, dilation=2,
                                            stride=2, dtype=M.float64),
    "conv1d_same_groups": lambda M: M.nn.Conv1d(3, 6, 3, padding="same", groups=3,
                                                dtype=M.float64),
    "maxpool1d": lambda M: M.nn.MaxPool1d(3, 2, 1),
    "maxpool1d_ceil": lambda M: M.nn.MaxPool1d(2, ceil_mode=True),
    "avgpool1d": lambda M: M.nn.AvgPool1d(3, 1, 1),
    "avgpool1d_no_pad_count": lambda M: M.nn.AvgPool1d(4, 2, 2, count_include_pad=False),
}


@pytest.mark.parametrize("name", sorted(ONE_D))
@pytest.mark.parametrize("batched", [True, False])
def test_one_dimensional_layers_match_pytorch(name, batched):
    rng = np.random.default_rng(6)
    _module_matches_pytorch(ONE_D[name], rng.standard_normal((2, 3, 11) if batched
                                                             else (3, 11)), rng)


def test_max_pool1d_indices_and_errors():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(7).standard_normal((2, 3, 9))
    v, i = F.max_pool1d(jitgrad.tensor(a), 3, 2, 1, return_indices=True)
    vt, it = torch.nn.functional.max_pool1d(torch.tensor(a), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(v.numpy(), vt.numpy())
    np.testing.assert_array_equal(i.numpy(), it.numpy())
    with pytest.raises(RuntimeError, match="Expected 2D .unbatched. or 3D .batched. input to "
                                           "conv1d"):
        F.conv1d(jitgrad.ones(1, 2, 3, 4), jitgrad.ones(1, 2, 3))


# ----------------------------------------------------------------------- ConvTranspose2d
TRANSPOSED = {
    "plain": ({}, (2, 4, 5, 5)),
    "strided_padded": ({"stride": 2, "padding": 1, "output_padding": 1}, (2, 4, 5, 6)),
    "dilated_groups_no_bias": ({"stride": (2, 1), "dilation": 2, "groups": 2, "bias": False},
                               (1, 4, 3, 4)),
    "unbatched": ({"stride": 2}, (4, 3, 3)),
}


@pytest.mark.parametrize("name", sorted(TRANSPOSED))
def test_conv_transpose2d_matches_pytorch(name):
    kw, shape = TRANSPOSED[name]
    rng = np.random.default_rng(8)
    _module_matches_pytorch(lambda M: M.nn.ConvTranspose2d(4, 6, 3, dtype=M.float64, **kw),
                            rng.standard_normal(shape), rng, param_rtol=1e-11)


def test_conv_transpose2d_output_size_gradcheck_and_cuda():
    m = nn.ConvTranspose2d(2, 3, 3, stride=2, dtype=jitgrad.float64)
    assert m(jitgrad.ones(1, 2, 4, 4, dtype=jitgrad.float64), output_size=(10, 10)).shape == \
        (1, 3, 10, 10)
    with pytest.raises(ValueError, match="requested an output size of"):
        m(jitgrad.ones(1, 2, 4, 4, dtype=jitgrad.float64), output_size=(12, 12))
    x = jitgrad.tensor(np.random.default_rng(9).standard_normal((1, 2, 3, 3)),
                       requires_grad=True)
    assert gradcheck(lambda t: m(t), (x,), eps=1e-6, atol=1e-6, rtol=1e-5)
    if jitgrad.cuda.is_available():
        mc = nn.ConvTranspose2d(2, 3, 3, stride=2, dtype=jitgrad.float64, device="cuda")
        mc.load_state_dict(m.state_dict())
        np.testing.assert_allclose(mc(x.detach().cuda()).detach().cpu().numpy(),
                                   m(x).detach().numpy(), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------- interpolate
RESIZE = {
    "nearest_1d_x2": ((1, 2, 5), {"scale_factor": 2}),
    "linear_1d": ((1, 2, 5), {"size": 7, "mode": "linear"}),
    "linear_1d_corners": ((1, 2, 5), {"size": 3, "mode": "linear", "align_corners": True}),
    "nearest_2d_x2": ((2, 3, 4, 5), {"scale_factor": 2}),
    "nearest_2d_size": ((2, 3, 4, 5), {"size": (7, 3)}),
    "nearest_2d_fraction": ((2, 3, 4, 5), {"scale_factor": 1.3}),
    "nearest_exact": ((2, 3, 4, 5), {"scale_factor": 1.5, "mode": "nearest-exact"}),
    "bilinear_size": ((2, 3, 4, 5), {"size": (7, 9), "mode": "bilinear"}),
    "bilinear_scale": ((2, 3, 4, 5), {"scale_factor": 1.7, "mode": "bilinear"}),
    "bilinear_recomputed": ((2, 3, 4, 5), {"scale_factor": 1.7, "mode": "bilinear",
                                           "recompute_scale_factor": True}),
    "bilinear_corners": ((2, 3, 4, 5), {"scale_factor": (2, 3), "mode": "bilinear",
                                        "align_corners": True}),
    "bilinear_down": ((2, 3, 4, 5), {"scale_factor": 0.5, "mode": "bilinear"}),
    "trilinear": ((1, 2, 3, 4, 5), {"size": (4, 6, 3), "mode": "trilinear"}),
    "nearest_3d": ((1, 2, 3, 4, 5), {"scale_factor": 2}),
}


@pytest.mark.parametrize("name", sorted(RESIZE))
def test_interpolate_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    shape, kw = RESIZE[name]
    a = np.random.default_rng(10).standard_normal(shape)
    outs = []
    for M in (jitgrad, torch):
        x = M.tensor(a, requires_grad=True)
        y = M.nn.functional.interpolate(x, **kw)
        (y * M.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))).sum().backward()
        outs.append((y.detach().numpy(), x.grad.numpy()))
    (y, g), (yt, gt) = outs
    assert y.shape == yt.shape
    np.testing.assert_allclose(y, yt, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(g, gt, rtol=1e-13, atol=1e-14)


def test_interpolate_upsample_errors_gradcheck_cuda():
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert repr(nn.Upsample(size=(3, 4), mode="bilinear")) == \
        "Upsample(size=(3, 4), mode='bilinear')"
    x = jitgrad.tensor(np.random.default_rng(11).standard_normal((1, 2, 3, 4)),
                       requires_grad=True)
    assert gradcheck(lambda t: F.interpolate(t, size=(5, 3), mode="bilinear"), (x,),
                     eps=1e-6, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="align_corners option can only be set with the "
                                         "interpolating modes"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(NotImplementedError, match=r"for the modes: .* \(got cubic\)"):
        F.interpolate(x, scale_factor=2, mode="cubic")
    with pytest.raises(ValueError, match="Anti-alias option is restricted"):
        F.interpolate(x, scale_factor=2, mode="nearest", antialias=True)
    if jitgrad.cuda.is_available():
        y = F.interpolate(x.detach().cuda(), scale_factor=1.7, mode="bilinear")
        assert y.device == "cuda:0"
        np.testing.assert_allclose(y.cpu().numpy(), F.interpolate(
            x.detach(), scale_factor=1.7, mode="bilinear").numpy(), rtol=1e-13, atol=1e-14)


# ---------------------------------------------- shape layers, instance norm, containers
SHAPE_LAYERS = {
    "unflatten": (lambda M: M.nn.Unflatten(1, (2, 3)), (4, 6)),
    "pixel_shuffle": (lambda M: M.nn.PixelShuffle(2), (2, 8, 3, 4)),
    "pixel_unshuffle": (lambda M: M.nn.PixelUnshuffle(2), (2, 2, 4, 6)),
    "zero_pad": (lambda M: M.nn.ZeroPad2d((1, 0, 2, 3)), (1, 2, 3, 4)),
    "constant_pad": (lambda M: M.nn.ConstantPad2d((1, 2, 0, 1), -1.0), (1, 2, 3, 4)),
    "constant_pad_1d": (lambda M: M.nn.ConstantPad1d(2, 3.5), (1, 2, 4)),
    "reflection_pad": (lambda M: M.nn.ReflectionPad2d(1), (1, 2, 3, 4)),
    "reflection_pad_1d": (lambda M: M.nn.ReflectionPad1d((2, 1)), (1, 2, 4)),
    "replication_pad": (lambda M: M.nn.ReplicationPad2d((1, 2, 2, 1)), (1, 2, 3, 4)),
    "instance_norm": (lambda M: M.nn.InstanceNorm2d(3, dtype=M.float64), (2, 3, 4, 5)),
    "instance_norm_affine_1d": (lambda M: M.nn.InstanceNorm1d(3, affine=True,
                                                              dtype=M.float64), (2, 3, 6)),
    "instance_norm_unbatched": (lambda M: M.nn.InstanceNorm2d(3, affine=True,
                                                              dtype=M.float64), (3, 4, 5)),
    "softmin": (lambda M: M.nn.Softmin(1), (2, 5)),
}


@pytest.mark.parametrize("name", sorted(SHAPE_LAYERS))
def test_shape_layers_and_instance_norm_match_pytorch(name):
    make, shape = SHAPE_LAYERS[name]
    rng = np.random.default_rng(12)
    _module_matches_pytorch(make, rng.standard_normal(shape), rng)


def test_channel_dropout():
    jitgrad.manual_seed(0)
    x = jitgrad.ones(8, 16, 3, 3)
    y = F.dropout2d(x, 0.5)
    per_channel = y.reshape(8, 16, 9)
    assert (per_channel.amax(-1) == per_channel.amin(-1)).all()  # whole channels
    kept = (per_channel[..., 0] != 0).float().mean().item()
    assert 0.35 < kept < 0.65 and set(y.unique().tolist()) <= {0.0, 2.0}
    assert F.dropout2d(x, 0.5, training=False) is x
    m = nn.Dropout1d(0.25)
    assert repr(m) == "Dropout1d(p=0.25, inplace=False)"
    z = m(jitgrad.ones(4, 5, 7))
    assert (z.amax(-1) == z.amin(-1)).all()
    m.eval()
    assert m(jitgrad.ones(4, 5, 7)).sum().item() == 140.0
    with pytest.raises(RuntimeError, match="dropout2d: Expected 3D or 4D input, but received "
                                           "a 2D input"):
        F.dropout2d(jitgrad.ones(3, 4))


def test_pixel_unshuffle_undoes_pixel_shuffle():
    x = jitgrad.randn(2, 12, 3, 5)
    assert F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2).tolist() == x.tolist()
    with pytest.raises(RuntimeError, match="divisible by the square of upscale_factor"):
        F.pixel_shuffle(jitgrad.ones(1, 6, 2, 2), 2)


def test_parameter_containers_register_and_print_like_pytorch():
    torch = pytest.importorskip("torch")

    def net(M):
        m = M.nn.Module()
        m.ps = M.nn.ParameterList([M.ones(2, 3), M.zeros(3)])
        m.pd = M.nn.ParameterDict({"w": M.ones(3), "b": M.zeros(1)})
        return m

    ours, theirs = net(jitgrad), net(torch)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert all(isinstance(p, nn.Parameter) for p in ours.ps)
    assert repr(ours.ps).replace("jitgrad", "torch") == repr(theirs.ps)
    assert repr(ours.pd).replace("jitgrad", "torch") == repr(theirs.pd)
    ours.ps.append(jitgrad.ones(1))
    ours.pd["c"] = jitgrad.ones(2)
    assert len(ours.ps) == 3 and ours.ps[-1].shape == (1,) and "c" in ours.pd
    assert [k for k, _ in ours.pd.items()] == ["b", "w", "c"]  # a plain dict: sorted
    del ours.pd["w"]
    assert "w" not in ours.pd and len(list(ours.parameters())) == 5
