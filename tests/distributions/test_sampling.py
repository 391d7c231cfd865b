"""Sampling: shapes, dtypes, reproducibility under jitgrad.manual_seed, sample moments
(statistical tests with a fixed seed), and the gradients of rsample -- the
reparameterization (checked against PyTorch given the same noise, or against the
analytic derivative of the transform) and the implicit gradients of Gamma / Beta /
Dirichlet (against PyTorch's ``_standard_gamma_grad`` / ``_dirichlet_grad``)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402
import jitgrad.distributions as jd  # noqa: E402
from jitgrad.distributions._gamma_helpers import (  # noqa: E402
    dirichlet_grad,
    standard_gamma_grad,
)

# name -> parameters (arrays of batch shape (2, 3) or with an event dimension)
PARAMS = {
    "Normal": {"loc": np.array([[0.0, 1.0, -2.0], [3.0, 0.5, 0.0]]),
               "scale": np.array([1.0, 0.5, 2.0])},
    "Uniform": {"low": np.array([0.0, -1.0, 2.0]), "high": np.array([[1.0, 1.0, 5.0],
                                                                     [0.5, 0.0, 2.5]])},
    "Exponential": {"rate": np.array([[0.5, 1.0, 4.0], [2.0, 1.5, 0.7]])},
    "Laplace": {"loc": np.array([0.0, 1.0, -1.0]), "scale": np.array([[1.0], [0.3]])},
    "Bernoulli": {"probs": np.array([[0.1, 0.5, 0.9], [0.0, 1.0, 0.3]])},
    "Categorical": {"probs": np.array([[[0.2, 0.3, 0.5]] * 3, [[0.7, 0.2, 0.1]] * 3])},
    "OneHotCategorical": {"logits": np.array([[0.0, 1.0, 2.0, 0.5]] * 3)},
    "MultivariateNormal": {"loc": np.array([[1.0, -1.0], [0.0, 2.0], [0.5, 0.5]]),
                           "covariance_matrix": np.array([[2.0, 0.6], [0.6, 1.0]])},
    "Gamma": {"concentration": np.array([[0.5, 1.0, 3.0], [10.0, 0.2, 2.0]]),
              "rate": np.array([1.0, 2.0, 0.5])},
    "Chi2": {"df": np.array([[1.0, 3.0, 6.0], [2.5, 10.0, 0.7]])},
    "Beta": {"concentration1": np.array([0.5, 2.0, 5.0]),
             "concentration0": np.array([[1.0], [3.0]])},
    "Dirichlet": {"concentration": np.array([[0.5, 1.0, 3.0], [2.0, 2.0, 2.0]])},
    "Poisson": {"rate": np.array([[0.5, 3.0, 10.0], [0.0, 1.0, 30.0]])},
    "Binomial": {"total_count": np.array([5.0, 10.0, 20.0]),
                 "probs": np.array([[0.1, 0.5, 0.9], [0.3, 0.0, 1.0]])},
}


def _both(name, dtype=np.float64, grad=False, **kw):
    out = []
    for lib, mod in ((jitgrad, jd), (torch, torch.distributions)):
        ts = {k: lib.tensor(v.astype(dtype), requires_grad=grad and k != "total_count")
              for k, v in PARAMS[name].items()}
        out.append((getattr(mod, name)(**ts, **kw), ts))
    return out


@pytest.mark.parametrize("sample_shape", [(), (5,), (2, 4)])
@pytest.mark.parametrize("name", sorted(PARAMS))
def test_sample_shapes_dtypes_and_flags(name, sample_shape):
    (dj, _), (dt, _) = _both(name, np.float32)
    assert dj.has_rsample == dt.has_rsample
    assert dj.has_enumerate_support == dt.has_enumerate_support
    sj, st = dj.sample(sample_shape), dt.sample(sample_shape)
    assert sj.shape == tuple(st.shape)
    assert sj.dtype.np == st.numpy().dtype
    assert not sj.requires_grad
    assert bool(dj.support.check(sj).all())
    if dj.has_rsample:
        assert dj.rsample(sample_shape).shape == tuple(st.shape)


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_sampling_is_reproducible_under_manual_seed(name):
    (d, _), _ = _both(name)
    jitgrad.manual_seed(123)
    a = d.sample((4,)).numpy()
    jitgrad.manual_seed(123)
    b = d.sample((4,)).numpy()
    np.testing.assert_array_equal(a, b)
    g = jitgrad.Generator().manual_seed(123)  # the default generator's stream is used
    jitgrad.manual_seed(123)
    jitgrad.rand(1, generator=g)
    np.testing.assert_array_equal(d.sample((4,)).numpy(), a)


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_sample_moments(name):
    """Sample mean and variance within 6 standard errors of PyTorch's analytic ones."""
    (dj, _), (dt, _) = _both(name)
    n = 40000
    jitgrad.manual_seed(2024)
    s = dj.sample((n,)).numpy()
    if name == "Categorical":
        s = np.eye(3)[s]  # compare the one-hot frequencies
        mean, var = dt.probs.numpy(), (dt.probs * (1 - dt.probs)).numpy()
    else:
        mean, var = dt.mean.numpy(), dt.variance.numpy()
    se = np.sqrt(var / n)
    assert np.all(np.abs(s.mean(0) - mean) <= 6 * se + 1e-12), (s.mean(0), mean)
    # the variance's standard error from the sample's fourth central moment
    m4 = ((s - s.mean(0)) ** 4).mean(0)
    se_var = np.sqrt(np.maximum(m4 - var**2, 0) / n)
    assert np.all(np.abs(s.var(0) - var) <= 6 * se_var + 1e-12), (s.var(0), var)


def test_mvn_sample_covariance():
    (dj, _), (dt, _) = _both("MultivariateNormal")
    s = dj.sample((50000,)).numpy()[:, 0]
    cov = np.cov(s.T)
    np.testing.assert_allclose(cov, dt.covariance_matrix.numpy()[0], atol=0.06)


# ------------------------------------------------------------ reparameterized samples

def _noise_then_sample(make_noise, d, shape):
    """The noise rsample draws first, then the sample, from the same seed."""
    jitgrad.manual_seed(77)
    eps = make_noise()
    jitgrad.manual_seed(77)
    return eps, d.rsample(shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_rsample_is_loc_plus_eps_scale_with_torch_gradients(dtype, monkeypatch, dh):
    (dj, tj), (dt, tt) = _both("Normal", dtype, grad=True)
    eps, xj = _noise_then_sample(lambda: jitgrad.randn(4, 2, 3, dtype=tj["loc"].dtype),
                                 dj, (4,))
    eps_t = torch.tensor(eps.numpy())
    monkeypatch.setattr(torch.distributions.normal, "_standard_normal",
                        lambda shape, dtype, device: eps_t)
    xt = dt.rsample((4,))
    np.testing.assert_array_equal(xj.detach().numpy(), xt.detach().numpy())
    w = np.random.default_rng(0).normal(size=(4, 2, 3))
    gj, gt = dh.grads_of(xj, tj, w), dh.grads_of(xt, tt, w)
    for k in gt:
        dh.assert_close(gj[k], gt[k], dtype, k)


def test_mvn_rsample_matches_torch_given_the_same_noise(monkeypatch, dh):
    (dj, tj), (dt, tt) = _both("MultivariateNormal", grad=True)
    eps, xj = _noise_then_sample(lambda: jitgrad.randn(5, 3, 2, dtype=jitgrad.float64),
                                 dj, (5,))
    eps_t = torch.tensor(eps.numpy())
    monkeypatch.setattr(torch.distributions.multivariate_normal, "_standard_normal",
                        lambda shape, dtype, device: eps_t)
    xt = dt.rsample((5,))
    dh.assert_close(xj, xt, np.float64, rtol=1e-12)
    w = np.random.default_rng(0).normal(size=(5, 3, 2))
    gj, gt = dh.grads_of(xj, tj, w), dh.grads_of(xt, tt, w)
    for k in gt:
        dh.assert_close(gj[k], gt[k], np.float64, k, rtol=1e-9)


def test_uniform_rsample_matches_torch_given_the_same_noise(monkeypatch, dh):
    (dj, tj), (dt, tt) = _both("Uniform", grad=True)
    u, xj = _noise_then_sample(lambda: jitgrad.rand(6, 2, 3, dtype=jitgrad.float64), dj, (6,))
    u_t = torch.tensor(u.numpy())
    monkeypatch.setattr(torch, "rand", lambda *a, **k: u_t)
    xt = dt.rsample((6,))
    dh.assert_close(xj, xt, np.float64)
    w = np.random.default_rng(0).normal(size=(6, 2, 3))
    gj, gt = dh.grads_of(xj, tj, w), dh.grads_of(xt, tt, w)
    for k in gt:
        dh.assert_close(gj[k], gt[k], np.float64, k)


def test_exponential_and_laplace_rsample_gradients_are_the_transforms(dh):
    (d, ts), _ = _both("Exponential", grad=True)
    x = d.rsample((7,))
    assert bool((x >= 0).all())
    (g,) = jitgrad.autograd.grad(x.sum(), [ts["rate"]])
    # x = E / rate: dx/drate = -x / rate
    expected = (-x.detach() / ts["rate"].detach()).sum(0)
    dh.assert_close(g, expected, np.float64)
    (d, ts), _ = _both("Laplace", grad=True)
    x = d.rsample((7,))
    gl, gs = jitgrad.autograd.grad(x.sum(), [ts["loc"], ts["scale"]])
    z = ((x.detach() - ts["loc"].detach()) / ts["scale"].detach())
    dh.assert_close(gl, jitgrad.ones_like(x).sum((0, 1)), np.float64)
    dh.assert_close(gs, z.sum((0, 2)).reshape(2, 1), np.float64)


def test_sample_n_is_deprecated_sample():
    (d, _), _ = _both("Normal")
    with pytest.warns(FutureWarning, match="sample_n"):
        assert d.sample_n(3).shape == (3, 2, 3)


def test_sample_has_no_gradient_rsample_has():
    (d, ts), _ = _both("Normal", grad=True)
    assert not d.sample().requires_grad
    assert d.rsample().requires_grad
    (c, _), _ = _both("Categorical", grad=True)
    with pytest.raises(NotImplementedError):
        c.rsample()


# ------------------------------------------------------------ implicit reparameterization

def test_standard_gamma_grad_matches_torch_on_every_branch():
    alpha = np.array([0.1, 0.5, 1.0, 3.0, 7.5, 8.5, 20.0, 20.0, 20.0, 50.0, 2.0, 0.3])
    x = np.array([0.01, 0.5, 0.79, 2.0, 6.0, 9.0, 19.5, 12.0, 30.0, 48.0, 0.81, 1.5])
    ours = standard_gamma_grad(alpha, x)
    ref = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-12)


def test_dirichlet_grad_matches_torch_on_every_branch():
    x = np.array([0.01, 0.3, 0.6, 0.99, 0.45, 0.5, 0.2, 0.7, 0.4])
    alpha = np.array([0.5, 2.0, 3.0, 1.0, 10.0, 8.0, 1.5, 4.0, 7.0])
    total = np.array([1.5, 4.0, 4.0, 3.0, 22.0, 16.0, 5.0, 6.0, 14.0])
    ours = dirichlet_grad(x, alpha, total)
    ref = torch._dirichlet_grad(torch.tensor(x), torch.tensor(alpha),
                                torch.tensor(total)).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-10)


def test_gamma_rsample_gradients_are_torch_formula_at_the_sample(dh):
    (d, ts), _ = _both("Gamma", grad=True)
    x = d.rsample((5,))
    w = np.random.default_rng(3).normal(size=(5, 2, 3))
    gj = dh.grads_of(x, ts, w)
    conc, rate = PARAMS["Gamma"]["concentration"], PARAMS["Gamma"]["rate"]
    xs = x.detach().numpy()
    dx_dconc = torch._standard_gamma_grad(torch.tensor(np.broadcast_to(conc, xs.shape).copy()),
                                          torch.tensor(xs * rate)).numpy() / rate
    dh.assert_close(gj["concentration"], (w * dx_dconc).sum(0), np.float64, rtol=1e-10)
    dh.assert_close(gj["rate"], (w * -xs / rate).sum((0, 1)), np.float64, rtol=1e-10)


def test_dirichlet_and_beta_rsample_gradients_are_torch_backward_at_the_sample(dh):
    from torch.distributions.dirichlet import _Dirichlet_backward

    (d, ts), _ = _both("Dirichlet", grad=True)
    x = d.rsample((4,))
    w = np.random.default_rng(4).normal(size=(4, 2, 3))
    gj = dh.grads_of(x, ts, w)
    conc = torch.tensor(np.broadcast_to(PARAMS["Dirichlet"]["concentration"], (4, 2, 3)).copy())
    ref = _Dirichlet_backward(torch.tensor(x.detach().numpy()), conc, torch.tensor(w)).sum(0)
    dh.assert_close(gj["concentration"], ref, np.float64, rtol=1e-10)
    # Beta: the first component of a two-component Dirichlet sample
    c1, c0 = (jitgrad.tensor([2.0, 0.7], dtype=jitgrad.float64, requires_grad=True),
              jitgrad.tensor([3.0, 1.5], dtype=jitgrad.float64, requires_grad=True))
    y = jd.Beta(c1, c0).rsample((4,))
    w = np.random.default_rng(5).normal(size=(4, 2))
    g1, g0 = jitgrad.autograd.grad((y * jitgrad.tensor(w)).sum(), [c1, c0])
    ys = y.detach().numpy()
    xt = torch.tensor(np.stack([ys, 1 - ys], -1))
    conc = torch.tensor(np.broadcast_to(np.stack([[2.0, 0.7], [3.0, 1.5]], -1), (4, 2, 2))
                        .copy())
    gw = torch.tensor(np.stack([w, np.zeros_like(w)], -1))
    ref = _Dirichlet_backward(xt, conc, gw).sum(0)
    dh.assert_close(g1, ref[:, 0], np.float64, rtol=1e-8)
    dh.assert_close(g0, ref[:, 1], np.float64, rtol=1e-8)


@pytest.mark.parametrize("name,param,value,dmean", [
    # d/dalpha E[x] for Gamma(alpha, 1) is 1; for Beta(a, b) it is b / (a + b)^2
    ("Gamma", "concentration", {"concentration": 2.5, "rate": 1.0}, 1.0),
    ("Gamma", "concentration", {"concentration": 0.4, "rate": 1.0}, 1.0),
    ("Beta", "concentration1", {"concentration1": 2.0, "concentration0": 3.0}, 3 / 25),
])
def test_implicit_gradients_are_unbiased(name, param, value, dmean):
    ts = {k: jitgrad.tensor(v, dtype=jitgrad.float64, requires_grad=True)
          for k, v in value.items()}
    d = getattr(jd, name)(**ts)
    # 8 independent estimates of d/dparam E[x] from 5000 samples each: their spread
    # bounds the error of their mean
    per = []
    for _ in range(8):
        (g,) = jitgrad.autograd.grad(d.rsample((5000,)).mean(), [ts[param]])
        per.append(g.item())
    se = np.std(per, ddof=1) / np.sqrt(len(per))
    assert abs(np.mean(per) - dmean) <= 6 * max(se, 1e-4), (per, dmean, se)
