"""Every layer against PyTorch with the same weights (outputs, input and parameter
gradients, grad_fn names) and against finite differences in float64 (gradcheck); PyTorch's
default initialisation bounds; bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as jnn
from jitgrad.autograd import gradcheck

#: name -> (module factory taking the library, input shape)
LAYERS = {
    "Linear": (lambda M: M.nn.Linear(4, 3), (5, 4)),
    "Linear-nobias": (lambda M: M.nn.Linear(4, 3, bias=False), (5, 4)),
    "Linear-3d": (lambda M: M.nn.Linear(4, 3), (2, 5, 4)),
    "Linear-1d": (lambda M: M.nn.Linear(4, 3), (4,)),
    "Conv2d": (lambda M: M.nn.Conv2d(2, 3, 3, padding=1, stride=2), (2, 2, 7, 7)),
    "Conv2d-nobias": (lambda M: M.nn.Conv2d(2, 4, (3, 2), bias=False), (1, 2, 5, 5)),
    "MaxPool2d": (lambda M: M.nn.MaxPool2d(2), (2, 3, 6, 6)),
    "MaxPool2d-stride": (lambda M: M.nn.MaxPool2d(3, stride=2, padding=1), (1, 2, 7, 7)),
    "Flatten": (lambda M: M.nn.Flatten(), (2, 3, 4)),
    "ReLU": (lambda M: M.nn.ReLU(), (3, 4)),
    "Tanh": (lambda M: M.nn.Tanh(), (3, 4)),
    "Sigmoid": (lambda M: M.nn.Sigmoid(), (3, 4)),
    "GELU": (lambda M: M.nn.GELU(), (3, 4)),
    "GELU-tanh": (lambda M: M.nn.GELU("tanh"), (3, 4)),
    "Softmax": (lambda M: M.nn.Softmax(dim=1), (3, 4)),
    "LogSoftmax": (lambda M: M.nn.LogSoftmax(dim=-1), (3, 4)),
    "LayerNorm": (lambda M: M.nn.LayerNorm(6), (3, 6)),
    "LayerNorm-2d": (lambda M: M.nn.LayerNorm((2, 3)), (4, 2, 3)),
    "LayerNorm-noaffine": (lambda M: M.nn.LayerNorm(5, elementwise_affine=False), (2, 5)),
    "BatchNorm1d": (lambda M: M.nn.BatchNorm1d(4), (8, 4)),
    "BatchNorm1d-3d": (lambda M: M.nn.BatchNorm1d(3), (5, 3, 4)),
    "BatchNorm1d-eval": (lambda M: M.nn.BatchNorm1d(4).eval(), (6, 4)),
    "Identity": (lambda M: M.nn.Identity(), (2, 3)),
    "Dropout-eval": (lambda M: M.nn.Dropout(0.3).eval(), (2, 3)),
    "Sequential": (lambda M: M.nn.Sequential(M.nn.Linear(4, 6), M.nn.GELU(),
                                             M.nn.LayerNorm(6), M.nn.Linear(6, 2)), (3, 4)),
}
CONV = ("Conv2d", "MaxPool2d")


def _make(M, name, dtype=None):
    M.manual_seed(0)
    m = LAYERS[name][0](M)
    if "BatchNorm" in name and "eval" in name:  # non-trivial running statistics
        with M.no_grad():
            m.running_mean.copy_(M.tensor([0.5, -0.25, 0.0, 1.0]))
            m.running_var.copy_(M.tensor([2.0, 0.5, 1.0, 1.5]))
        m.weight.data = M.tensor([1.5, -0.5, 1.0, 2.0])
    return m.double() if dtype == "double" else m


def _skip_conv(name, H):
    if name.startswith(CONV) and not H.has_conv():
        pytest.skip("conv2d not available")


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_matches_torch(torch, H, name):
    _skip_conv(name, H)
    jm, tm = _make(jitgrad, name), _make(torch, name)
    H.copy_params(jm, tm, torch)
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal(LAYERS[name][1]).astype(np.float32)
    jx = jitgrad.tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    jy, ty = jm(jx), tm(tx)
    H.assert_close(jy, ty, rtol=1e-5, atol=1e-5)
    assert H.node_name(jy) == H.node_name(ty)
    w = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    (jy * jitgrad.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    H.assert_close(jx.grad, tx.grad, rtol=1e-4, atol=1e-5, msg="input grad")
    tparams = dict(tm.named_parameters())
    for pname, p in jm.named_parameters():
        H.assert_close(p.grad, tparams[pname].grad, rtol=1e-4, atol=1e-4, msg=pname)
    for bname, b in tm.named_buffers():  # running statistics after the step
        H.assert_close(jm.get_buffer(bname), b, rtol=1e-5, atol=1e-6, msg=bname)


GRADCHECK = [n for n in sorted(LAYERS) if n != "Dropout-eval"]


@pytest.mark.parametrize("name", GRADCHECK)
def test_layer_gradcheck(H, name):
    _skip_conv(name, H)
    m = _make(jitgrad, name, "double")
    x = jitgrad.tensor(np.random.default_rng(2).uniform(-1.5, 1.5, LAYERS[name][1]),
                       dtype=jitgrad.float64, requires_grad=True)
    params = [p for p in m.parameters() if p.requires_grad]
    assert gradcheck(lambda x, *ps: m(x), (x, *params))


def test_batchnorm_running_stats_over_steps_match_torch(torch, H):
    for momentum in (0.1, None):
        jm, tm = jnn.BatchNorm1d(3, momentum=momentum), torch.nn.BatchNorm1d(3,
                                                                           momentum=momentum)
        rng = np.random.default_rng(0)
        for _ in range(4):
            x = rng.standard_normal((6, 3)).astype(np.float32) * 3 + 1
            jm(jitgrad.tensor(x))
            tm(torch.tensor(x))
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            H.assert_close(getattr(jm, name), getattr(tm, name), msg=name)
        x = rng.standard_normal((2, 3)).astype(np.float32)
        H.assert_close(jm.eval()(jitgrad.tensor(x)), tm.eval()(torch.tensor(x)), rtol=1e-5)


def test_batchnorm_without_running_stats(torch, H):
    jm = jnn.BatchNorm1d(2, track_running_stats=False).eval()
    tm = torch.nn.BatchNorm1d(2, track_running_stats=False).eval()
    x = np.arange(8, dtype=np.float32).reshape(4, 2) ** 2
    H.assert_close(jm(jitgrad.tensor(x)), tm(torch.tensor(x)))
    assert list(jm.state_dict()) == list(tm.state_dict()) == ["weight", "bias"]


def test_embedding_matches_torch_with_padding_idx(torch, H):
    jm = jnn.Embedding(6, 3, padding_idx=2)
    tm = torch.nn.Embedding(6, 3, padding_idx=2)
    assert (jm.weight[2] == 0).all()
    H.copy_params(jm, tm, torch)
    idx = np.array([[0, 2, 5], [2, 2, 1]])
    jy, ty = jm(jitgrad.tensor(idx)), tm(torch.tensor(idx))
    H.assert_close(jy, ty)
    assert H.node_name(jy) == H.node_name(ty) == "EmbeddingBackward0"
    (jy ** 2).sum().backward()
    (ty ** 2).sum().backward()
    H.assert_close(jm.weight.grad, tm.weight.grad)
    assert not jm.weight.grad[2].numpy().any()


def test_embedding_gradcheck_and_double_backward():
    w = jitgrad.randn(5, 2, dtype=jitgrad.float64, requires_grad=True)
    idx = jitgrad.tensor([[0, 4], [4, 1]])
    assert gradcheck(lambda w: jnn.functional.embedding(idx, w), (w,))
    assert jitgrad.autograd.gradgradcheck(lambda w: jnn.functional.embedding(idx, w) ** 2, (w,))


def test_dropout_statistics_and_scaling():
    jitgrad.manual_seed(0)
    x = jitgrad.ones(200, 100, requires_grad=True)
    y = jnn.Dropout(0.25)(x)
    kept = y.detach().numpy() != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y.detach().numpy()[kept], 1 / 0.75, rtol=1e-6)
    assert type(y.grad_fn).__name__ == "MulBackward0"  # as PyTorch on the CPU
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy() != 0, kept)
    assert jnn.Dropout(0.25).eval()(x) is x
    assert (jnn.functional.dropout(x, 1.0) == 0).all()
    jitgrad.manual_seed(3)
    a = jnn.functional.dropout(jitgrad.ones(50))
    jitgrad.manual_seed(3)
    assert (a == jnn.functional.dropout(jitgrad.ones(50))).all()


def test_linear_default_init_bounds(torch):
    jitgrad.manual_seed(0)
    for fan_in in (3, 64, 784):
        m = jnn.Linear(fan_in, 256)
        bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=sqrt(5)) and the bias bound
        for p in (m.weight, m.bias):
            a = p.detach().numpy()
            assert a.dtype == np.float32
            assert np.abs(a).max() <= bound and np.abs(a).max() > 0.9 * bound
        t = torch.nn.Linear(fan_in, 256)
        assert np.abs(t.weight.detach().numpy()).max() <= bound


def test_conv_default_init_bounds(H):
    if not H.has_conv():
        pytest.skip("conv2d not available")
    m = jnn.Conv2d(3, 8, 5)
    bound = 1 / math.sqrt(3 * 25)
    assert np.abs(m.weight.detach().numpy()).max() <= bound
    assert np.abs(m.bias.detach().numpy()).max() <= bound


def test_module_dtype_argument():
    m = jnn.Linear(2, 3, dtype=jitgrad.float64)
    assert m.weight.dtype == jitgrad.float64 and m.bias.dtype == jitgrad.float64
    assert jnn.LayerNorm(3, dtype=jitgrad.float64).weight.dtype == jitgrad.float64


# ----------------------------------------------------------------------- bad input
def test_linear_wrong_input_shape_names_the_shapes(torch):
    for M in (jitgrad, torch):
        with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied "
                                               r"\(4x5 and 3x2\)"):
            M.nn.Linear(3, 2)(M.ones(4, 5))
        with pytest.raises(RuntimeError, match=r"\(1x5 and 3x2\)"):
            M.nn.Linear(3, 2)(M.ones(5))


def test_conv_wrong_channels_names_the_shapes(torch, H):
    if not H.has_conv():
        pytest.skip("conv2d not available")
    msg = r"expected input\[2, 5, 8, 8\] to have 3 channels, but got 5 channels instead"
    for M in (jitgrad, torch):
        with pytest.raises(RuntimeError, match=msg):
            M.nn.Conv2d(3, 4, 3)(M.ones(2, 5, 8, 8))


def test_layer_norm_and_batch_norm_bad_shapes(torch):
    for M in (jitgrad, torch):
        with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[3\], expected input "
                                               r"with shape \[\*, 3\], but got input of "
                                               r"size\[4, 5\]"):
            M.nn.LayerNorm(3)(M.ones(4, 5))
        with pytest.raises(RuntimeError, match="running_mean should contain 5 elements not 3"):
            M.nn.BatchNorm1d(3)(M.ones(4, 5))
        with pytest.raises(ValueError, match="Expected more than 1 value per channel when "
                                             "training"):
            M.nn.BatchNorm1d(5)(M.ones(1, 5))
        with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
            M.nn.BatchNorm1d(5)(M.ones(2, 5, 3, 3))


def test_embedding_bad_indices(torch):
    for M in (jitgrad, torch):
        with pytest.raises(IndexError, match="index out of range in self"):
            M.nn.Embedding(10, 3)(M.tensor([0, 12]))
        with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar "
                                               "types: Long, Int"):
            M.nn.Embedding(10, 3)(M.tensor([0.0, 1.0]))


def test_embedding_bad_indices_raise_in_compiled_calls_too():
    """The range check is the op's own, so a compiled plan makes it at every call: NumPy's
    take would return the last row for -1 (eager raised, compiled returned a value)."""
    emb = jitgrad.nn.Embedding(10, 3)
    f = jitgrad.compile(lambda i: emb(i).sum())
    good = jitgrad.tensor([1, 9])
    want = emb(good).sum().item()
    for _ in range(2):
        assert f(good).item() == want
    for bad in ([1, 10], [-1, 2]):
        for fn in (lambda i: emb(i).sum(), f):
            with pytest.raises(IndexError, match="index out of range in self"):
                fn(jitgrad.tensor(bad))
    assert f(good).item() == want


def test_gelu_and_dropout_bad_arguments(torch):
    for M in (jitgrad, torch):
        with pytest.raises(RuntimeError, match="approximate argument must be either none or "
                                               "tanh"):
            M.nn.functional.gelu(M.ones(2), approximate="foo")
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, "
                                             "but got 1.5"):
            M.nn.functional.dropout(M.ones(2), 1.5)


def test_layer_norm_weight_gradient_reads_the_forward_kernel():
    """The weight's gradient multiplies by x normalised by layer norm's own row kernel (one
    call), not by x rebuilt from mean and var ops; compiled mode gives eager mode's bits, and
    the weight's gradient passes gradcheck (with its second derivative)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 5, 16)).astype(np.float32)

    def step(ln, x):
        loss = (ln(x) ** 2).sum()
        loss.backward()
        return loss

    grads = []
    for compiled in (False, True):
        jitgrad.manual_seed(0)
        ln = jnn.LayerNorm(16)
        with jitgrad.no_grad():
            ln.weight.copy_(jitgrad.from_numpy(np.linspace(0.5, 1.5, 16, dtype=np.float32)))
        x = jitgrad.tensor(a, requires_grad=True)
        fn = jitgrad.compile(step) if compiled else step
        fn(ln, x)
        grads.append([t.grad.numpy().copy() for t in (x, ln.weight, ln.bias)])
        if compiled:
            graph = str(fn.lower(ln, x)).split("== fusion groups ==")[0]
            assert " var(" not in graph and "layer_norm(" in graph
    for e, c in zip(*grads):
        np.testing.assert_array_equal(c, e)
    x64 = jitgrad.tensor(a[:2, :3].astype(np.float64), requires_grad=True)
    w64 = jitgrad.tensor(np.linspace(0.5, 1.5, 16), requires_grad=True)
    f = lambda x, w: jitgrad.nn.functional.layer_norm(x, (16,), w, None)  # noqa: E731
    assert gradcheck(f, (x64, w64))
    assert jitgrad.autograd.gradgradcheck(f, (x64, w64))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_embedding_max_norm_renormalises_the_rows_it_reads(norm_type):
    """``max_norm``: the rows an input indexes whose norm exceeds it are scaled in place
    (outside autograd) before the lookup, as PyTorch's ``embedding_renorm_``; the other
    rows are left alone. Was a NotImplementedError."""
    w0 = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32) * 2
    idx = [[0, 2, 2], [5, 0, 1]]
    e = jitgrad.nn.Embedding(6, 4, max_norm=1.5, norm_type=norm_type)
    with jitgrad.no_grad():
        e.weight.copy_(jitgrad.tensor(w0))
    out = e(jitgrad.tensor(idx))
    out.sum().backward()
    w = e.weight.detach().numpy()
    norms = np.linalg.norm(w0.astype(np.float64), ord=norm_type, axis=1)
    for r in range(6):
        if r in (0, 1, 2, 5) and norms[r] > 1.5:
            np.testing.assert_allclose(w[r], w0[r] * 1.5 / (norms[r] + 1e-7), rtol=1e-6)
        else:
            np.testing.assert_array_equal(w[r], w0[r])
    np.testing.assert_array_equal(out.detach().numpy(), w[np.array(idx)])
    assert e.weight.grad.sum().item() == 24.0 and "max_norm=1.5" in repr(e)
    bag = jitgrad.nn.EmbeddingBag(6, 4, max_norm=1.0, mode="sum")
    with jitgrad.no_grad():
        bag.weight.copy_(jitgrad.tensor(w0))
    np.testing.assert_allclose(bag(jitgrad.tensor(idx)).detach().numpy(),
                               bag.weight.detach().numpy()[np.array(idx)].sum(1), rtol=1e-6)
    torch = pytest.importorskip("torch")
    t = torch.nn.Embedding(6, 4, max_norm=1.5, norm_type=norm_type)
    with torch.no_grad():
        t.weight.copy_(torch.tensor(w0))
    np.testing.assert_allclose(t(torch.tensor(idx)).detach().numpy(), out.detach().numpy(),
                               rtol=1e-6)


def test_embedding_scale_grad_by_freq():
    """Each lookup's gradient divided by how often the batch looks its row up (PyTorch's
    ``scale_grad_by_freq``); the values are the plain lookup's. Was NotImplementedError."""
    w0 = np.random.default_rng(1).standard_normal((5, 3))
    idx = [[0, 2, 2], [4, 2, 1]]
    g = np.random.default_rng(2).standard_normal((2, 3, 3))
    e = jitgrad.nn.Embedding(5, 3, scale_grad_by_freq=True, dtype=jitgrad.float64)
    with jitgrad.no_grad():
        e.weight.copy_(jitgrad.tensor(w0))
    out = e(jitgrad.tensor(idx))
    np.testing.assert_array_equal(out.detach().numpy(), w0[np.array(idx)])
    (out * jitgrad.tensor(g)).sum().backward()
    want = np.zeros((5, 3))
    flat, rows = np.array(idx).reshape(-1), g.reshape(-1, 3)
    for k, i in enumerate(flat):
        want[i] += rows[k] / np.count_nonzero(flat == i)
    np.testing.assert_allclose(e.weight.grad.numpy(), want, rtol=1e-14)
    torch = pytest.importorskip("torch")
    t = torch.nn.Embedding(5, 3, scale_grad_by_freq=True, dtype=torch.float64)
    with torch.no_grad():
        t.weight.copy_(torch.tensor(w0))
    (t(torch.tensor(idx)) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(e.weight.grad.numpy(), t.weight.grad.numpy(), rtol=1e-14)
