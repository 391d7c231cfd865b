"""InverseGamma, Kumaraswamy, FisherSnedecor, GeneralizedPareto and VonMises: log_prob,
entropy, moments, mode, cdf / icdf and their gradients against PyTorch in float32 and
float64; argument validation and expand like PyTorch's; and, without PyTorch, densities
that integrate to one and sample moments with a fixed seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jitgrad
import jitgrad.distributions as jd

DTYPES = [np.float32, np.float64]


def _pos(r, *shape, lo=0.3, hi=3.0):
    return r.uniform(lo, hi, shape)


# name -> (params(rng), value(rng, params, shape), batch shape, methods beyond log_prob)
CASES = {
    "InverseGamma": (lambda r: {"concentration": np.array([0.7, 1.5, 2.5, 4.0]),
                                "rate": _pos(r, 2, 1)},
                     lambda r, p, s: _pos(r, *s, lo=0.05, hi=5.0), (2, 4),
                     ("entropy", "mean", "mode", "variance")),
    "InverseGamma-scalar": (lambda r: {"concentration": 3.0, "rate": 2.0},
                            lambda r, p, s: _pos(r, *s), (), ("entropy", "mean", "variance")),
    "Kumaraswamy": (lambda r: {"concentration1": _pos(r, 3, lo=0.5),
                               "concentration0": np.array([[0.6], [1.5]])},
                    lambda r, p, s: r.uniform(0.02, 0.98, s), (2, 3),
                    ("entropy", "mean", "mode", "variance")),
    "FisherSnedecor": (lambda r: {"df1": np.array([1.0, 2.5, 5.0]),
                                  "df2": np.array([[1.5], [3.0], [6.0]])},
                       lambda r, p, s: _pos(r, *s, lo=0.05, hi=5.0), (3, 3),
                       ("mean", "mode", "variance")),
    "GeneralizedPareto": (lambda r: {"loc": r.normal(size=(3,)), "scale": _pos(r, 3),
                                     "concentration": np.array([[-0.3], [0.0], [0.4],
                                                                [1.2]])},
                          lambda r, p, s: p["loc"] + _pos(r, *s, lo=0.01, hi=0.8),
                          (4, 3), ("entropy", "mean", "mode", "variance", "cdf")),
    "VonMises": (lambda r: {"loc": r.normal(size=(3,)),
                            "concentration": np.array([[0.2], [2.0], [5.0]])},
                 lambda r, p, s: r.uniform(-4, 4, s), (3, 3), ("mean", "mode", "variance")),
}


def _name(case):
    return case.split("-")[0]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch(case, dtype, dh):
    pf, vf, batch, methods = CASES[case]
    r = np.random.default_rng(abs(hash(case)) % 2**32)
    params = pf(r)
    value = vf(r, params, (2,) + batch)
    dj, tj = dh.make(jitgrad, _name(case), params, dtype)
    if case == "GeneralizedPareto" and dtype is np.float64:
        pytest.skip("PyTorch's GeneralizedPareto compares with a float32 zero: float32 only")
    dt, tt = dh.make(dh.torch, _name(case), params, dtype)
    assert tuple(dj.batch_shape) == tuple(dt.batch_shape) == batch
    assert dj.has_rsample == dt.has_rsample
    outs = [("log_prob", dj.log_prob(jitgrad.tensor(value.astype(dtype))),
             dt.log_prob(dh.torch.tensor(value.astype(dtype))))]
    for m in methods:
        if m == "cdf":
            u = value.astype(dtype)
            outs.append(("cdf", dj.cdf(jitgrad.tensor(u)), dt.cdf(dh.torch.tensor(u))))
            q = r.uniform(0.05, 0.95, (2,) + batch).astype(dtype)
            outs.append(("icdf", dj.icdf(jitgrad.tensor(q)), dt.icdf(dh.torch.tensor(q))))
        elif m == "entropy":
            outs.append((m, dj.entropy(), dt.entropy()))
        else:
            outs.append((m, getattr(dj, m), getattr(dt, m)))
    for what, oj, ot in outs:
        # scalar parameters are in the default dtype (float32)
        f64 = dtype is np.float64 and "scalar" not in case
        tol = {"rtol": 1e-9, "atol": 1e-11} if f64 else {"rtol": 1e-4, "atol": 1e-5}
        dh.assert_close(oj, ot, np.float64, what, **tol)
        if not ot.requires_grad:
            continue
        w = r.normal(size=tuple(ot.shape))
        finite = np.isfinite(dh.to_np(ot))
        w = np.where(finite, w, 0.0)
        oj0 = jitgrad.where(jitgrad.tensor(finite), oj, 0.0)
        ot0 = dh.torch.where(dh.torch.tensor(finite), ot, 0.0)
        gt = dh.grads_of(ot0, tt, w)
        gj = dh.grads_of(oj0, tj, w)
        for k in gt:
            if gt[k] is None:
                assert gj[k] is None or not np.any(dh.to_np(gj[k])), (what, k)
            else:
                dh.assert_close(gj[k], gt[k], np.float64, f"d {what} / d {k}",
                                **{**tol, "atol": 1e-9 if f64 else 1e-4})


BAD = [
    ("InverseGamma", {"concentration": [-1.0], "rate": [1.0]}),
    ("InverseGamma", {"concentration": [1.0], "rate": [0.0]}),
    ("Kumaraswamy", {"concentration1": [1.0], "concentration0": [-1.0]}),
    ("FisherSnedecor", {"df1": [0.0], "df2": [1.0]}),
    ("GeneralizedPareto", {"loc": [0.0], "scale": [-1.0], "concentration": [0.1]}),
    ("GeneralizedPareto", {"loc": [float("nan")], "scale": [1.0], "concentration": [0.1]}),
    ("VonMises", {"loc": [0.0], "concentration": [-1.0]}),
]


@pytest.mark.parametrize("name,params", BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BAD)])
def test_invalid_parameters_raise_torch_error(name, params, dh):
    msgs = []
    for lib in (jitgrad, dh.torch):
        mod = jd if lib is jitgrad else dh.torch.distributions
        with pytest.raises(ValueError) as e:
            getattr(mod, name)(**{k: lib.tensor(v) for k, v in params.items()})
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1].replace("torch.", "jitgrad.")


@pytest.mark.parametrize("name,params,value", [
    ("InverseGamma", {"concentration": [2.0], "rate": [1.0]}, [-1.0]),
    ("Kumaraswamy", {"concentration1": [2.0], "concentration0": [1.0]}, [1.5]),
    ("FisherSnedecor", {"df1": [2.0], "df2": [1.0]}, [-0.5]),
    ("GeneralizedPareto", {"loc": [1.0], "scale": [1.0], "concentration": [-0.5]}, [3.5]),
])
def test_values_outside_support_raise_torch_error(name, params, value, dh):
    msgs = []
    for lib in (jitgrad, dh.torch):
        mod = jd if lib is jitgrad else dh.torch.distributions
        d = getattr(mod, name)(**{k: lib.tensor(v) for k, v in params.items()})
        with pytest.raises(ValueError) as e:
            d.log_prob(lib.tensor(value))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1].replace("torch.", "jitgrad.")


@pytest.mark.parametrize("name,params", [
    ("InverseGamma", {"concentration": [2.0, 3.0], "rate": [1.0, 2.0]}),
    ("Kumaraswamy", {"concentration1": [2.0, 3.0], "concentration0": [1.0, 2.0]}),
    ("FisherSnedecor", {"df1": [2.0, 3.0], "df2": [5.0, 6.0]}),
    ("GeneralizedPareto", {"loc": [0.0, 1.0], "scale": [1.0, 2.0],
                           "concentration": [-0.2, 0.3]}),
    ("VonMises", {"loc": [0.0, 1.0], "concentration": [1.0, 2.0]}),
])
def test_expand_and_repr_like_torch(name, params, dh):
    dj = getattr(jd, name)(**{k: jitgrad.tensor(v) for k, v in params.items()})
    dt = getattr(dh.torch.distributions, name)(**{k: dh.torch.tensor(v)
                                                for k, v in params.items()})
    ej, et = dj.expand((3, 2)), dt.expand((3, 2))
    assert type(ej) is type(dj) and tuple(ej.batch_shape) == (3, 2)
    assert repr(ej) == repr(et).replace("torch.", "jitgrad.")
    v = np.full((3, 2), 1.5 if name == "GeneralizedPareto" else 0.5)
    dh.assert_close(ej.log_prob(jitgrad.tensor(v)), et.log_prob(dh.torch.tensor(v)),
                    np.float32, rtol=1e-5, atol=1e-6)
    assert tuple(ej.sample((4,)).shape) == (4, 3, 2)


# ------------------------------------------------------------------------ torch-free

def _grid_integral(d, lo, hi, n=200001):
    x = np.linspace(lo, hi, n)
    p = np.exp(d.log_prob(jitgrad.tensor(x[:, None], dtype=jitgrad.float64)).numpy())
    return np.trapezoid(p, x, axis=0) if hasattr(np, "trapezoid") else np.trapz(p, x, axis=0)


F64 = jitgrad.float64


def test_densities_integrate_to_one():
    t = lambda *v: jitgrad.tensor(list(v), dtype=F64)  # noqa: E731
    np.testing.assert_allclose(_grid_integral(jd.InverseGamma(t(2.0, 4.0), t(1.0, 3.0)),
                                              1e-6, 400.0), 1, atol=2e-3)
    np.testing.assert_allclose(_grid_integral(jd.Kumaraswamy(t(2.0, 3.0), t(1.5, 4.0)),
                                              1e-12, 1 - 1e-12), 1, atol=1e-5)
    np.testing.assert_allclose(_grid_integral(jd.FisherSnedecor(t(4.0, 8.0), t(6.0, 10.0)),
                                              1e-9, 400.0), 1, atol=2e-3)
    gp = jd.GeneralizedPareto(t(0.5), t(2.0), t(-0.5))  # support [0.5, 4.5]
    np.testing.assert_allclose(_grid_integral(gp, 0.5, 4.5), 1, atol=1e-6)
    gp = jd.GeneralizedPareto(t(0.5, -1.0), t(1.0, 2.0), t(0.0, 0.3))
    np.testing.assert_allclose(_grid_integral(gp, 0.5, 2000.0)[0], 1, atol=1e-4)
    np.testing.assert_allclose(_grid_integral(jd.VonMises(t(1.0, -2.0), t(0.5, 8.0)),
                                              -math.pi, math.pi), 1, atol=1e-6)


def _check_moments(d, n, mean, var, k=5.0):
    x = d.sample((n,)).numpy().astype(np.float64)
    assert x.shape == (n,) + tuple(d.batch_shape)
    assert np.all(d.support.check(jitgrad.tensor(x, dtype=F64)).numpy())
    se = np.sqrt(var / n)
    assert np.all(np.abs(x.mean(0) - mean) < k * se), (x.mean(0), mean, se)
    return x


def test_sample_moments_with_fixed_seed():
    jitgrad.manual_seed(0)
    t = lambda *v: jitgrad.tensor(list(v), dtype=F64)  # noqa: E731
    n = 20000
    for d in (jd.InverseGamma(t(5.0, 8.0), t(2.0, 1.0)), jd.Kumaraswamy(t(0.7, 3.0), t(2.0, 0.5)),
              jd.FisherSnedecor(t(3.0, 10.0), t(12.0, 20.0)),
              jd.GeneralizedPareto(t(0.0, 1.0), t(1.0, 2.0), t(-0.4, 0.2))):
        _check_moments(d, n, d.mean.numpy(), d.variance.numpy())
    vm = jd.VonMises(t(1.0, -3.0), t(2.0, 0.5))
    x = vm.sample((n,)).numpy()
    assert np.all((x >= -math.pi) & (x < math.pi))
    resultant = np.exp(1j * x).mean(0)  # circular mean and 1 - mean resultant length
    np.testing.assert_allclose(np.angle(resultant), [1.0, -3.0], atol=0.06)
    np.testing.assert_allclose(1 - np.abs(resultant), vm.variance.numpy(), atol=0.02)


def test_rsample_carries_gradients():
    jitgrad.manual_seed(1)
    a = jitgrad.tensor([2.0, 3.0], requires_grad=True)
    b = jitgrad.tensor([1.5, 4.0], requires_grad=True)
    for d in (jd.InverseGamma(a, b), jd.Kumaraswamy(a, b), jd.FisherSnedecor(a, b),
              jd.GeneralizedPareto(a, b, a - 2)):
        ga, gb = jitgrad.autograd.grad(d.rsample((5,)).sum(), [a, b])
        assert np.all(np.isfinite(ga.numpy())) and np.any(ga.numpy() != 0)
        assert np.all(np.isfinite(gb.numpy())) and np.any(gb.numpy() != 0)
    assert not jd.VonMises(a, b).has_rsample
    with pytest.raises(NotImplementedError):
        jd.VonMises(a, b).rsample()
    s = jd.VonMises(a, b).sample((3,))
    assert not s.requires_grad and s.dtype == a.dtype


def test_kumaraswamy_rsample_matches_its_pathwise_derivative():
    # x = (1 - u^(1/b))^(1/a): dx/da = -x log(x) / a
    jitgrad.manual_seed(2)
    a = jitgrad.tensor([2.0], dtype=F64, requires_grad=True)
    x = jd.Kumaraswamy(a, jitgrad.tensor([3.0], dtype=F64)).rsample((50,))
    (g,) = jitgrad.autograd.grad(x.sum(), [a])
    xv = x.detach().numpy()
    np.testing.assert_allclose(g.numpy(), (-xv * np.log(xv) / 2.0).sum(0), rtol=1e-8)


# ------------------------------------------------------------------------ LKJCholesky

def _corr_cholesky(r, n, dim):
    a = r.normal(size=(n, dim, dim + 2))
    c = a @ np.swapaxes(a, -1, -2)
    s = 1 / np.sqrt(np.diagonal(c, axis1=-2, axis2=-1))
    return np.linalg.cholesky(c * s[..., :, None] * s[..., None, :])


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("dim", [2, 4])
def test_lkj_cholesky_log_prob_matches_torch(dim, dtype, dh):
    r = np.random.default_rng(dim)
    conc = np.array([0.5, 1.0, 3.0])
    value = _corr_cholesky(r, 3, dim)[:, None]  # sample (3,) x batch (3,)
    dj = jd.LKJCholesky(dim, cj := jitgrad.tensor(conc.astype(dtype), requires_grad=True))
    dt = dh.torch.distributions.LKJCholesky(
        dim, ct := dh.torch.tensor(conc.astype(dtype), requires_grad=True))
    assert tuple(dj.event_shape) == tuple(dt.event_shape) == (dim, dim)
    lj = dj.log_prob(jitgrad.tensor(value.astype(dtype)))
    lt = dt.log_prob(dh.torch.tensor(value.astype(dtype)))
    tol = {"rtol": 1e-9, "atol": 1e-10} if dtype is np.float64 else {"rtol": 1e-4,
                                                                     "atol": 1e-5}
    dh.assert_close(lj, lt, np.float64, "log_prob", **tol)
    w = r.normal(size=tuple(lt.shape))
    dh.assert_close(dh.grads_of(lj, {"c": cj}, w)["c"], dh.grads_of(lt, {"c": ct}, w)["c"],
                    np.float64, "d log_prob / d concentration", **tol)
    ej, et = dj.expand((2, 3)), dt.expand((2, 3))
    assert repr(ej) == repr(et).replace("torch.", "jitgrad.")
    assert tuple(ej.sample().shape) == (2, 3, dim, dim)


def test_lkj_cholesky_validation_like_torch(dh):
    for bad in (lambda m, lib: m.LKJCholesky(1, 1.0),
                lambda m, lib: m.LKJCholesky(3, lib.tensor([-1.0])),
                lambda m, lib: m.LKJCholesky(2, 1.0).log_prob(lib.tensor([[1.0, 0.0],
                                                                         [0.5, 0.5]]))):
        msgs = []
        for lib, mod in ((jitgrad, jd), (dh.torch, dh.torch.distributions)):
            with pytest.raises(ValueError) as e:
                bad(mod, lib)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1].replace("torch.", "jitgrad.")


def test_lkj_cholesky_dim2_density_integrates_to_one():
    # dim 2: L = [[1, 0], [r, sqrt(1 - r^2)]], the density in r
    rr = np.linspace(-1 + 1e-9, 1 - 1e-9, 400001)
    value = np.zeros((rr.size, 1, 2, 2))
    value[..., 0, 0] = 1.0
    value[:, 0, 1, 0], value[:, 0, 1, 1] = rr, np.sqrt(1 - rr ** 2)
    d = jd.LKJCholesky(2, jitgrad.tensor([1.0, 2.5, 4.0], dtype=F64), validate_args=False)
    p = np.exp(d.log_prob(jitgrad.tensor(value, dtype=F64)).numpy())
    np.testing.assert_allclose(np.sum((p[1:] + p[:-1]) / 2 * np.diff(rr)[:, None], 0),
                               1, atol=1e-5)


def test_lkj_cholesky_sample_support_and_moments():
    jitgrad.manual_seed(3)
    dim, n = 4, 20000
    d = jd.LKJCholesky(dim, jitgrad.tensor([0.5, 2.0], dtype=F64))
    s = d.sample((n,))
    assert tuple(s.shape) == (n, 2, dim, dim) and s.dtype == F64 and not s.requires_grad
    assert np.all(jd.constraints.corr_cholesky.check(s).numpy())
    corr = (s @ s.mT).numpy()
    # the first correlation ~ 2 Beta(eta - 1 + dim / 2, same) - 1 (PyTorch's onion
    # sampler, followed here, gives the later ones other spreads)
    off = corr[..., 1, 0]
    var = 1 / (2 * np.array([0.5, 2.0]) + dim - 1)
    assert np.all(np.abs(off.mean(0)) < 5 * np.sqrt(var / n))
    np.testing.assert_allclose(off.var(0), var, rtol=0.05)


# ------------------------------------------------------------------------ Wishart

def _spd(r, shape, p):
    a = r.normal(size=shape + (p, p))
    return a @ np.swapaxes(a, -1, -2) + p * np.eye(p)


@pytest.mark.filterwarnings("ignore:Low df values detected")  # df = 2.5 < p: a NaN mode
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart_matches_torch(param, dtype, dh):
    r = np.random.default_rng(len(param))
    p = 3
    cov = _spd(r, (2, 1), p)
    mat = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
           "scale_tril": np.linalg.cholesky(cov)}[param]
    params = {"df": np.array([2.5, 4.0, 7.0]), param: mat}
    dj, tj = dh.make(jitgrad, "Wishart", params, dtype)
    dt, tt = dh.make(dh.torch, "Wishart", params, dtype)
    assert tuple(dj.batch_shape) == tuple(dt.batch_shape) == (2, 3)
    value = _spd(r, (4, 2, 3), p) / 3
    f64 = dtype is np.float64
    tol = {"rtol": 1e-9, "atol": 1e-10} if f64 else {"rtol": 2e-4, "atol": 1e-4}
    outs = [("log_prob", dj.log_prob(jitgrad.tensor(value.astype(dtype))),
             dt.log_prob(dh.torch.tensor(value.astype(dtype)))),
            ("entropy", dj.entropy(), dt.entropy())]
    outs += [(m, getattr(dj, m), getattr(dt, m)) for m in
             ("mean", "mode", "variance", "covariance_matrix", "precision_matrix",
              "scale_tril")]
    for what, oj, ot in outs:
        dh.assert_close(oj, ot, np.float64, what, **tol)
        finite = np.isfinite(dh.to_np(ot))
        w = np.where(finite, r.normal(size=tuple(ot.shape)), 0.0)
        gt = dh.grads_of(dh.torch.where(dh.torch.tensor(finite), ot, 0.0), tt, w)
        gj = dh.grads_of(jitgrad.where(jitgrad.tensor(finite), oj, 0.0), tj, w)
        for k in gt:
            if gt[k] is None:
                assert gj[k] is None or not np.any(dh.to_np(gj[k])), (what, k)
            else:
                dh.assert_close(gj[k], gt[k], np.float64, f"d {what} / d {k}",
                                **{**tol, "atol": 1e-9 if f64 else 1e-3})
    ej, et = dj.expand((4, 2, 3)), dt.expand((4, 2, 3))
    assert repr(ej) == repr(et).replace("torch.", "jitgrad.")
    dh.assert_close(ej.log_prob(jitgrad.tensor(value.astype(dtype))),
                    et.log_prob(dh.torch.tensor(value.astype(dtype))), np.float64, **tol)


def test_wishart_validation_like_torch(dh):
    eye = np.eye(2)
    cases = [(ValueError, {"df": np.array([0.5]), "covariance_matrix": eye}),
             (ValueError, {"df": 3.0, "covariance_matrix": np.array([1.0, 2.0])}),
             (ValueError, {"df": 3.0, "covariance_matrix": -eye}),
             (ValueError, {"df": 3.0, "scale_tril": np.array([[1.0, 1.0], [0.0, 1.0]])}),
             (AssertionError, {"df": 3.0, "covariance_matrix": eye, "scale_tril": eye})]
    for exc, params in cases:
        msgs = []
        for lib in (jitgrad, dh.torch):
            with pytest.raises(exc) as e:
                dh.make(lib, "Wishart", params, np.float64, grad=False)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1].replace("torch.", "jitgrad."), msgs
    for lib in (jitgrad, dh.torch):
        d, _ = dh.make(lib, "Wishart", {"df": 3.0, "covariance_matrix": eye}, np.float64)
        with pytest.raises(ValueError, match="within the support"):
            d.log_prob(lib.tensor(-eye))


def test_wishart_sample_moments_and_rsample_gradients():
    jitgrad.manual_seed(4)
    r = np.random.default_rng(0)
    cov = _spd(r, (2,), 3) / 3
    df = jitgrad.tensor([4.0, 9.0], dtype=F64, requires_grad=True)
    L = jitgrad.tensor(np.linalg.cholesky(cov), dtype=F64, requires_grad=True)
    d = jd.Wishart(df, scale_tril=L)
    n = 4000
    s = d.rsample((n,))
    assert tuple(s.shape) == (n, 2, 3, 3) and s.dtype == F64
    assert np.all(jd.constraints.positive_definite.check(s.detach()).numpy())
    x = s.detach().numpy()
    se = np.sqrt(d.variance.detach().numpy() / n)
    assert np.all(np.abs(x.mean(0) - d.mean.detach().numpy()) < 5 * se)
    gdf, gl = jitgrad.autograd.grad(s.sum(), [df, L])
    assert np.all(np.isfinite(gdf.numpy())) and np.all(gdf.numpy() > 0)
    assert np.all(np.isfinite(gl.numpy())) and np.any(gl.numpy() != 0)


def test_wishart_low_df_warns_and_redraws_singular_samples():
    with pytest.warns(UserWarning, match="Low df values detected"):
        d = jd.Wishart(jitgrad.tensor([1.5]), covariance_matrix=jitgrad.eye(2))
    jitgrad.manual_seed(0)
    assert tuple(d.sample((5,)).shape) == (5, 1, 2, 2)
