"""``affine_grid`` and ``grid_sample`` (nn/grid_sampling.py) against PyTorch: every mode,
padding mode and ``align_corners``, values and the gradients of the input, the grid and
``theta``; gradcheck in float64; errors and warnings; a spatial-transformer step compiled
equal to eager."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.autograd import gradcheck

torch = pytest.importorskip("torch")
JF = jitgrad.nn.functional
TF = torch.nn.functional

MODES = ["bilinear", "nearest", "bicubic"]
PADDINGS = ["zeros", "border", "reflection"]


def _pair(a, grad=True):
    return jitgrad.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


@pytest.mark.parametrize("mode,padding_mode,align_corners",
                         list(itertools.product(MODES, PADDINGS, [False, True])))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_grid_sample_matches_torch_with_gradients(mode, padding_mode, align_corners, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 6)).astype(dtype)
    # points inside, near and beyond the edges (reflected several times)
    g = rng.uniform(-2.8, 2.8, (2, 4, 7, 2)).astype(dtype)
    jx, tx = _pair(x)
    jg, tg = _pair(g)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    jo, to = JF.grid_sample(jx, jg, **kw), TF.grid_sample(tx, tg, **kw)
    assert tuple(jo.shape) == tuple(to.shape) and str(jo.dtype)[8:] == str(to.dtype)[6:]
    tol = dict(rtol=1e-5, atol=2e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jo.detach().numpy(), to.detach().numpy(), **tol)
    w = rng.standard_normal(tuple(to.shape)).astype(dtype)
    (jo * jitgrad.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy(), **tol)
    np.testing.assert_allclose(jg.grad.numpy(), tg.grad.numpy(), rtol=tol["rtol"] * 10,
                               atol=tol["atol"] * 10)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding_mode", PADDINGS)
def test_grid_sample_gradcheck(mode, padding_mode):
    rng = np.random.default_rng(2)
    x = jitgrad.tensor(rng.standard_normal((1, 2, 4, 5)), requires_grad=True)
    g = jitgrad.tensor(rng.uniform(-1.2, 1.2, (1, 3, 2, 2)), requires_grad=True)
    assert gradcheck(lambda a, b: JF.grid_sample(a, b, mode=mode, padding_mode=padding_mode,
                                                 align_corners=False), (x, g))


def test_nan_and_infinite_grid_points_in_zeros_mode_match_torch():
    x = np.arange(9.0).reshape(1, 1, 3, 3)
    g = np.array([[[[np.nan, 0.2], [0.1, np.inf], [2.5, 0.0]]]])
    for mode in MODES:
        jo = JF.grid_sample(jitgrad.tensor(x), jitgrad.tensor(g), mode=mode,
                            align_corners=False)
        to = TF.grid_sample(torch.tensor(x), torch.tensor(g), mode=mode, align_corners=False)
        np.testing.assert_array_equal(jo.numpy(), to.numpy())


def test_grid_sample_nearest_gives_the_grid_a_zero_gradient():
    jx, tx = _pair(np.ones((1, 1, 3, 3)), grad=False)
    jg, tg = _pair(np.full((1, 2, 2, 2), 0.3))
    JF.grid_sample(jx, jg, mode="nearest", align_corners=True).sum().backward()
    TF.grid_sample(tx, tg, mode="nearest", align_corners=True).sum().backward()
    np.testing.assert_array_equal(jg.grad.numpy(), tg.grad.numpy())


def test_grid_sample_empty_output_and_channels():
    for xs, gs in [((2, 3, 4, 4), (2, 0, 5, 2)), ((2, 0, 4, 4), (2, 3, 5, 2))]:
        j = JF.grid_sample(jitgrad.zeros(xs), jitgrad.zeros(gs), align_corners=False)
        t = TF.grid_sample(torch.zeros(xs), torch.zeros(gs), align_corners=False)
        assert tuple(j.shape) == tuple(t.shape)


@pytest.mark.parametrize("size,theta_shape", [((2, 3, 4, 5), (2, 2, 3)),
                                              ((2, 3, 1, 5), (2, 2, 3)),
                                              ((2, 1, 3, 4, 5), (2, 3, 4))])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_matches_torch_with_gradients(size, theta_shape, align_corners):
    rng = np.random.default_rng(3)
    th = rng.standard_normal(theta_shape)
    jt, tt = _pair(th)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # unit-size grids with align_corners
        jo = JF.affine_grid(jt, size, align_corners=align_corners)
        to = TF.affine_grid(tt, size, align_corners=align_corners)
    np.testing.assert_allclose(jo.detach().numpy(), to.detach().numpy(), rtol=1e-12,
                               atol=1e-15)
    w = rng.standard_normal(tuple(to.shape))
    (jo * jitgrad.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(jt.grad.numpy(), tt.grad.numpy(), rtol=1e-12, atol=1e-13)


def _messages(call):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in seen if issubclass(w.category, UserWarning)]


def test_warnings_match_torch():
    th = np.eye(2, 3, dtype=np.float32)[None]
    j_warn = _messages(lambda: JF.grid_sample(jitgrad.zeros(1, 1, 2, 2),
                                              JF.affine_grid(jitgrad.tensor(th), (1, 1, 2, 2),
                                                             align_corners=False)))
    t_warn = _messages(lambda: TF.grid_sample(torch.zeros(1, 1, 2, 2),
                                              TF.affine_grid(torch.tensor(th), (1, 1, 2, 2),
                                                             align_corners=False)))
    assert j_warn == t_warn and len(j_warn) == 1
    j_warn = _messages(lambda: JF.affine_grid(jitgrad.tensor(th), (1, 1, 1, 2),
                                              align_corners=True))
    t_warn = _messages(lambda: TF.affine_grid(torch.tensor(th), (1, 1, 1, 2),
                                              align_corners=True))
    assert j_warn == t_warn and len(j_warn) == 1


ERRORS = [
    ("mode", lambda M, F: F.grid_sample(M.zeros(1, 1, 2, 2), M.zeros(1, 2, 2, 2), mode="foo",
                                        align_corners=False)),
    ("padding", lambda M, F: F.grid_sample(M.zeros(1, 1, 2, 2), M.zeros(1, 2, 2, 2),
                                           padding_mode="foo", align_corners=False)),
    ("dtype", lambda M, F: F.grid_sample(M.zeros(1, 1, 2, 2), M.zeros(1, 2, 2, 2).double(),
                                         align_corners=False)),
    ("batch", lambda M, F: F.grid_sample(M.zeros(2, 1, 2, 2), M.zeros(1, 2, 2, 2),
                                         align_corners=False)),
    ("last dim", lambda M, F: F.grid_sample(M.zeros(1, 1, 2, 2), M.zeros(1, 2, 2, 3),
                                            align_corners=False)),
    ("theta shape", lambda M, F: F.affine_grid(M.zeros(2, 1, 3), (2, 3, 4, 5),
                                               align_corners=False)),
    ("size rank", lambda M, F: F.affine_grid(M.zeros(2, 2, 3), (2, 3, 4),
                                             align_corners=False)),
    ("theta batch", lambda M, F: F.affine_grid(M.zeros(2, 2, 3), (3, 3, 4, 5),
                                               align_corners=False)),
    ("int theta", lambda M, F: F.affine_grid(M.zeros(2, 2, 3, dtype=M.int64), (2, 3, 4, 5),
                                             align_corners=False)),
]


@pytest.mark.parametrize("call", [c[1] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_match_torch(call):
    with pytest.raises(Exception) as t_err:
        call(torch, TF)
    with pytest.raises(type(t_err.value)) as j_err:
        call(jitgrad, JF)
    assert str(j_err.value) == str(t_err.value).replace("torch.", "jitgrad.")


class _SpatialTransformer(jitgrad.nn.Module):
    """The tutorial's shape: a localisation net predicts theta; the input is resampled."""

    def __init__(self):
        super().__init__()
        self.loc = jitgrad.nn.Linear(2 * 6 * 6, 6)
        self.head = jitgrad.nn.Linear(2 * 6 * 6, 3)

    def forward(self, x):
        theta = self.loc(x.flatten(1)).view(-1, 2, 3)
        grid = JF.affine_grid(theta, x.size(), align_corners=False)
        y = JF.grid_sample(x, grid, align_corners=False)
        return self.head(y.flatten(1))


def test_spatial_transformer_step_compiled_equals_eager():
    jitgrad.manual_seed(0)
    model = _SpatialTransformer()
    x = jitgrad.randn(4, 2, 6, 6)
    target = jitgrad.tensor([0, 2, 1, 2])

    def step(inp):
        loss = JF.cross_entropy(model(inp), target)
        loss.backward()
        return loss

    eager_loss = step(x)
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = jitgrad.compile(step)
    for _ in range(2):
        model.zero_grad()
        loss = compiled(x)
        np.testing.assert_allclose(loss.item(), eager_loss.item(), rtol=1e-6)
        for p, g in zip(model.parameters(), eager_grads):
            np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-5, atol=1e-7)
