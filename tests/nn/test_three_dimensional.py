"""3-D convolution and pooling (nn/three_dimensional.py) against PyTorch: values and
gradients (input, weight, bias), indices, the modules with PyTorch's state_dicts, errors,
gradcheck, a compiled 3-D CNN training step equal to eager, and CUDA (simulator) == CPU."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
from jitgrad.autograd import gradcheck

torch = pytest.importorskip("torch")
JF, TF = jitgrad.nn.functional, torch.nn.functional


def _run(M, fn, arrays, w_seed=9, **kw):
    """(outputs, gradients of every array input) of ``fn`` in library ``M``."""
    ts = [M.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) else a for a in arrays]
    out = fn(*ts, **kw)
    extra = None
    if isinstance(out, tuple):
        out, extra = out
    w = np.random.default_rng(w_seed).standard_normal(tuple(out.shape)).astype(
        str(out.dtype).split(".")[1])
    (out * M.tensor(w)).sum().backward()
    grads = [t.grad.numpy() for t in ts if isinstance(t, M.Tensor)]
    return out.detach().numpy(), extra, grads


def _compare(j_fn, t_fn, arrays, dtype="float64", **kw):
    arrays = [a.astype(dtype) if isinstance(a, np.ndarray) else a for a in arrays]
    j_out, j_extra, j_grads = _run(jitgrad, j_fn, arrays, **kw)
    t_out, t_extra, t_grads = _run(torch, t_fn, arrays, **kw)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == "float64" else dict(rtol=2e-5, atol=2e-5)
    assert j_out.shape == t_out.shape and j_out.dtype == t_out.dtype
    np.testing.assert_allclose(j_out, t_out, **tol)
    if t_extra is not None:
        np.testing.assert_array_equal(j_extra.numpy(), t_extra.numpy())
    for j, t in zip(j_grads, t_grads):
        np.testing.assert_allclose(j, t, **tol)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 4, 5, 6, 7))

CONV_CASES = {
    "plain": (RNG.standard_normal((3, 4, 2, 3, 2)), True, {}),
    "strided dilated groups": (RNG.standard_normal((6, 2, 3, 2, 3)), True,
                               dict(stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1),
                                    groups=2)),
    "same even kernel": (RNG.standard_normal((2, 4, 2, 2, 3)), False, dict(padding="same")),
    "valid": (RNG.standard_normal((2, 4, 1, 1, 1)), True, dict(padding="valid", stride=2)),
    "int args": (RNG.standard_normal((4, 1, 3, 3, 3)), True, dict(stride=2, padding=1,
                                                                  groups=4)),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv3d_matches_torch(case, dtype):
    weight, with_bias, kw = CONV_CASES[case]
    bias = RNG.standard_normal(weight.shape[0]) if with_bias else None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyTorch: 'same' with even kernels
        _compare(JF.conv3d, TF.conv3d, [X, weight, bias], dtype, **kw)


def test_conv3d_unbatched_and_gradcheck():
    w = RNG.standard_normal((2, 4, 2, 2, 2))
    _compare(JF.conv3d, TF.conv3d, [X[0], w, None])
    x = jitgrad.tensor(X[:1, :2, :3, :3, :4], requires_grad=True)
    wt = jitgrad.tensor(RNG.standard_normal((2, 2, 2, 2, 2)), requires_grad=True)
    b = jitgrad.tensor(RNG.standard_normal(2), requires_grad=True)
    assert gradcheck(lambda a, c, d: JF.conv3d(a, c, d, stride=(1, 2, 1), padding=1),
                     (x, wt, b))


TRANSPOSED_CASES = {
    "stride output padding": ((4, 3, 2, 3, 2), dict(stride=2, padding=1, output_padding=1)),
    "mixed groups dilation": ((4, 2, 3, 2, 2), dict(stride=(2, 1, 3), padding=(1, 0, 1),
                                                     output_padding=(1, 0, 2), groups=2,
                                                     dilation=(1, 2, 1))),
    "pointwise": ((4, 3, 1, 1, 1), {}),
    "depthwise dilated": ((4, 1, 3, 3, 3), dict(groups=4, dilation=2, padding=2)),
}


@pytest.mark.parametrize("case", sorted(TRANSPOSED_CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv_transpose3d_matches_torch(case, dtype):
    wshape, kw = TRANSPOSED_CASES[case]
    x = X[:, :, :3, :4, :5]
    bias = RNG.standard_normal(wshape[1] * kw.get("groups", 1))
    _compare(JF.conv_transpose3d, TF.conv_transpose3d, [x, RNG.standard_normal(wshape), bias],
             dtype, **kw)


def test_conv_transpose3d_unbatched_gradcheck_and_module():
    _compare(JF.conv_transpose3d, TF.conv_transpose3d,
             [X[0, :, :3, :3, :3], RNG.standard_normal((4, 2, 2, 2, 2)), None], stride=2)
    x = jitgrad.tensor(X[:1, :2, :2, :3, :2], requires_grad=True)
    w = jitgrad.tensor(RNG.standard_normal((2, 2, 2, 2, 2)), requires_grad=True)
    assert gradcheck(lambda a, b: JF.conv_transpose3d(a, b, stride=(2, 1, 2), padding=1,
                                                      output_padding=(1, 0, 0)), (x, w))
    torch.manual_seed(0)
    t_mod = torch.nn.ConvTranspose3d(4, 6, (2, 3, 3), stride=2, groups=2, output_padding=1)
    j_mod = jitgrad.nn.ConvTranspose3d(4, 6, (2, 3, 3), stride=2, groups=2, output_padding=1)
    assert repr(j_mod) == repr(t_mod)
    assert {k: tuple(v.shape) for k, v in j_mod.state_dict().items()} == {
        k: tuple(v.shape) for k, v in t_mod.state_dict().items()}
    j_mod.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})
    x = X[:1].astype(np.float32)
    np.testing.assert_allclose(j_mod(jitgrad.tensor(x)).detach().numpy(),
                               t_mod(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    j_mod.output_padding = t_mod.output_padding = (0, 0, 0)
    size = (1, 6, 11, 13, 16)  # one more than the smallest along depth and width
    j_out = j_mod(jitgrad.tensor(x), output_size=size)
    t_out = t_mod(torch.tensor(x), output_size=size)
    assert tuple(j_out.shape) == tuple(t_out.shape) == size
    np.testing.assert_allclose(j_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-5,
                               atol=1e-5)


MAX_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
             dict(kernel_size=(3, 2, 3), stride=(2, 2, 1), padding=(1, 1, 0),
                  dilation=(2, 1, 1), ceil_mode=True)]


@pytest.mark.parametrize("kw", MAX_CASES, ids=range(len(MAX_CASES)))
@pytest.mark.parametrize("indices", [False, True])
def test_max_pool3d_matches_torch(kw, indices):
    _compare(JF.max_pool3d, TF.max_pool3d, [X], return_indices=indices, **kw)
    _compare(JF.max_pool3d, TF.max_pool3d, [X[0]], "float32", return_indices=indices, **kw)


def test_max_pool3d_ties_route_the_gradient_to_the_first_maximum():
    x = np.zeros((1, 1, 2, 2, 2))
    _compare(JF.max_pool3d, TF.max_pool3d, [x], kernel_size=2, return_indices=True)


AVG_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
             dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
             dict(kernel_size=(3, 2, 3), stride=(2, 2, 1), padding=(1, 1, 0), ceil_mode=True),
             dict(kernel_size=2, divisor_override=3)]


@pytest.mark.parametrize("kw", AVG_CASES, ids=range(len(AVG_CASES)))
def test_avg_pool3d_matches_torch(kw):
    _compare(JF.avg_pool3d, TF.avg_pool3d, [X], **kw)
    _compare(JF.avg_pool3d, TF.avg_pool3d, [X[0]], "float32", **kw)


@pytest.mark.parametrize("size", [(1, 1, 1), (2, 3, 4), (3, None, 2), 4, (5, 6, 7)])
def test_adaptive_avg_pool3d_matches_torch(size):
    _compare(JF.adaptive_avg_pool3d, TF.adaptive_avg_pool3d, [X, size])


def test_modules_load_torch_state_dicts_and_match():
    torch.manual_seed(0)
    t_net = torch.nn.Sequential(torch.nn.Conv3d(4, 3, 3, padding=1, bias=True),
                                torch.nn.MaxPool3d(2, ceil_mode=True),
                                torch.nn.AvgPool3d(2, padding=1, count_include_pad=False),
                                torch.nn.AdaptiveAvgPool3d((1, 2, 1)))
    j_net = jitgrad.nn.Sequential(jitgrad.nn.Conv3d(4, 3, 3, padding=1, bias=True),
                                  jitgrad.nn.MaxPool3d(2, ceil_mode=True),
                                  jitgrad.nn.AvgPool3d(2, padding=1, count_include_pad=False),
                                  jitgrad.nn.AdaptiveAvgPool3d((1, 2, 1)))
    assert repr(j_net) == repr(t_net)
    j_net.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in t_net.state_dict().items()})
    x = X.astype(np.float32)
    np.testing.assert_allclose(j_net(jitgrad.tensor(x)).detach().numpy(),
                               t_net(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    # PyTorch's initialisation: the same shapes, bounds from fan_in
    conv = jitgrad.nn.Conv3d(4, 6, (2, 3, 3), groups=2)
    bound = 1 / np.sqrt(2 * 2 * 3 * 3)
    assert tuple(conv.weight.shape) == (6, 2, 2, 3, 3)
    assert np.abs(conv.weight.detach().numpy()).max() <= bound
    assert np.abs(conv.bias.detach().numpy()).max() <= bound


ERRORS = [
    ("input rank", lambda M, F: F.conv3d(M.zeros(2, 3, 4), M.zeros(1, 3, 1, 1, 1))),
    ("channels", lambda M, F: F.conv3d(M.zeros(1, 3, 4, 4, 4), M.zeros(1, 2, 1, 1, 1))),
    ("kernel too big", lambda M, F: F.conv3d(M.zeros(1, 1, 2, 4, 4), M.zeros(1, 1, 3, 1, 1))),
    ("same strided", lambda M, F: F.conv3d(M.zeros(1, 1, 4, 4, 4), M.zeros(1, 1, 3, 3, 3),
                                           stride=2, padding="same")),
    ("bad padding string", lambda M, F: F.conv3d(M.zeros(1, 1, 4, 4, 4),
                                                 M.zeros(1, 1, 3, 3, 3), padding="full")),
    ("transposed output padding", lambda M, F: F.conv_transpose3d(
        M.zeros(1, 2, 3, 3, 3), M.zeros(2, 1, 2, 2, 2), stride=2, output_padding=2)),
    ("transposed channels", lambda M, F: F.conv_transpose3d(M.zeros(1, 2, 3, 3, 3),
                                                            M.zeros(3, 1, 2, 2, 2))),
    ("transposed too small", lambda M, F: F.conv_transpose3d(M.zeros(1, 2, 3, 3, 3),
                                                             M.zeros(2, 1, 2, 2, 2), padding=3)),
    ("transposed rank", lambda M, F: F.conv_transpose3d(M.zeros(2, 3, 4),
                                                        M.zeros(2, 1, 2, 2, 2))),
    ("pool rank", lambda M, F: F.max_pool3d(M.zeros(2, 3, 4), 2)),
    ("adaptive rank", lambda M, F: F.adaptive_avg_pool3d(M.zeros(2, 3, 4), 2)),
    ("pool padding", lambda M, F: F.avg_pool3d(M.zeros(1, 1, 4, 4, 4), 2, padding=2)),
]


@pytest.mark.parametrize("call", [c[1] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_match_torch(call):
    with pytest.raises(Exception) as t_err:
        call(torch, TF)
    with pytest.raises(type(t_err.value)) as j_err:
        call(jitgrad, JF)
    assert str(j_err.value) == str(t_err.value)


def test_compiled_3d_cnn_step_equals_eager():
    jitgrad.manual_seed(0)
    net = jitgrad.nn.Sequential(jitgrad.nn.Conv3d(2, 4, 3, padding=1), jitgrad.nn.ReLU(),
                                jitgrad.nn.MaxPool3d(2), jitgrad.nn.AdaptiveAvgPool3d(1),
                                jitgrad.nn.Flatten(), jitgrad.nn.Linear(4, 3))
    opt = jitgrad.optim.SGD(net.parameters(), lr=0.1)
    x = jitgrad.randn(3, 2, 4, 4, 4)
    y = jitgrad.tensor([0, 2, 1])

    def step(inp):
        opt.zero_grad()
        loss = JF.cross_entropy(net(inp), y)
        loss.backward()
        opt.step()
        return loss

    start = {k: v.clone() for k, v in net.state_dict().items()}
    eager = [step(x).item() for _ in range(3)]
    eager_params = [p.detach().clone() for p in net.parameters()]
    net.load_state_dict(start)
    compiled = jitgrad.compile(step)
    got = [compiled(x).item() for _ in range(3)]
    np.testing.assert_allclose(got, eager, rtol=1e-5)
    for p, q in zip(net.parameters(), eager_params):
        np.testing.assert_allclose(p.detach().numpy(), q.numpy(), rtol=1e-5, atol=1e-6)
