"""MultivariateNormal (covariance / precision / scale_tril), Independent and Dirichlet
against PyTorch: log_prob, entropy, moments and the matrices, with batch broadcasting,
and their gradients."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402
import jitgrad.distributions as jd  # noqa: E402

DTYPES = [np.float32, np.float64]


def _spd(rng, batch, n):
    a = rng.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _mvn_params(kind, rng, loc_batch, mat_batch, n=3):
    cov = _spd(rng, mat_batch, n)
    mat = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
           "scale_tril": np.linalg.cholesky(cov)}[kind]
    return {"loc": rng.normal(size=loc_batch + (n,)), kind: mat}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("batches", [((), ()), ((2,), ()), ((), (2,)), ((4, 1), (2,))],
                         ids=["none", "loc", "matrix", "both"])
@pytest.mark.parametrize("kind", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_mvn_matches_torch(kind, batches, dtype, dh):
    rng = np.random.default_rng(11)
    params = _mvn_params(kind, rng, *batches)
    dj, tj = dh.make(jitgrad, "MultivariateNormal", params, dtype)
    dt, tt = dh.make(torch, "MultivariateNormal", params, dtype)
    assert dj.batch_shape == tuple(dt.batch_shape) and dj.event_shape == tuple(dt.event_shape)
    value = rng.normal(size=(5,) + tuple(dt.batch_shape) + (3,)).astype(dtype)
    tol = {"rtol": 2e-4, "atol": 2e-5} if dtype is np.float32 else {"rtol": 1e-9}
    for what in ("log_prob", "entropy", "mean", "mode", "variance", "stddev", "scale_tril",
                 "covariance_matrix", "precision_matrix"):
        if what == "log_prob":
            out_j, out_t = dj.log_prob(jitgrad.tensor(value)), dt.log_prob(torch.tensor(value))
        elif what == "entropy":
            out_j, out_t = dj.entropy(), dt.entropy()
        else:
            out_j, out_t = getattr(dj, what), getattr(dt, what)
        dh.assert_close(out_j, out_t, dtype, what, **tol)
        if out_t.requires_grad:
            w = np.random.default_rng(2).normal(size=tuple(out_t.shape))
            gt, gj = dh.grads_of(out_t, tt, w), dh.grads_of(out_j, tj, w)
            for k in gt:
                if gt[k] is None:
                    assert gj[k] is None or not np.any(dh.to_np(gj[k]))
                else:
                    dh.assert_close(gj[k], gt[k], dtype, f"d {what} / d {k}",
                                    **({"rtol": 2e-3, "atol": 2e-4} if dtype is np.float32
                                       else {"rtol": 1e-8, "atol": 1e-11}))


def test_mvn_scale_tril_upper_triangle_is_ignored_and_gets_no_gradient(dh):
    rng = np.random.default_rng(0)
    L = np.linalg.cholesky(_spd(rng, (), 3))
    value = rng.normal(size=(4, 3))
    grads = []
    for lib in (jitgrad, torch):
        Lt = lib.tensor(L, requires_grad=True)
        d = (jd if lib is jitgrad else torch.distributions).MultivariateNormal(
            lib.zeros(3, dtype=lib.float64), scale_tril=Lt)
        d.log_prob(lib.tensor(value)).sum().backward()
        grads.append(Lt.grad)
    dh.assert_close(grads[0], grads[1], np.float64, rtol=1e-9)
    assert not np.any(np.triu(dh.to_np(grads[0]), 1))


@pytest.mark.parametrize("bad,msg", [
    (lambda: jd.MultivariateNormal(jitgrad.tensor(0.0), jitgrad.eye(2)),
     "loc must be at least one-dimensional."),
    (lambda: jd.MultivariateNormal(jitgrad.zeros(2)),
     "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."),
    (lambda: jd.MultivariateNormal(jitgrad.zeros(2), jitgrad.eye(2), scale_tril=jitgrad.eye(2)),
     "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."),
    (lambda: jd.MultivariateNormal(jitgrad.zeros(2), jitgrad.zeros(2)),
     "covariance_matrix must be at least two-dimensional, with optional leading batch "
     "dimensions"),
])
def test_mvn_argument_errors(bad, msg):
    with pytest.raises(ValueError) as e:
        bad()
    assert str(e.value) == msg


def test_mvn_validation_rejects_non_positive_definite(dh):
    cov = np.array([[1.0, 2.0], [2.0, 1.0]])  # symmetric, indefinite
    msgs = []
    for lib, mod in ((jitgrad, jd), (torch, torch.distributions)):
        with pytest.raises(ValueError) as e:
            mod.MultivariateNormal(lib.zeros(2, dtype=lib.float64), lib.tensor(cov))
        msgs.append(str(e.value).replace("torch.", "jitgrad."))
    assert msgs[0] == msgs[1]
    with pytest.raises(ValueError, match="LowerCholesky"):
        jd.MultivariateNormal(jitgrad.zeros(2), scale_tril=jitgrad.tensor([[1.0, 1.0],
                                                                          [0.0, 1.0]]))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("ndims", [0, 1, 2])
def test_independent_normal_matches_torch(ndims, dtype, dh):
    rng = np.random.default_rng(4)
    params = {"loc": rng.normal(size=(2, 3, 4)), "scale": rng.uniform(0.5, 2, (3, 4))}
    pj = dh.tensors(jitgrad, params, dtype)
    tt = dh.tensors(torch, params, dtype)
    dj = jd.Independent(jd.Normal(**pj), ndims)
    dt = torch.distributions.Independent(torch.distributions.Normal(**tt), ndims)
    assert dj.batch_shape == tuple(dt.batch_shape) and dj.event_shape == tuple(dt.event_shape)
    assert dj.has_rsample and dj.has_enumerate_support is dt.has_enumerate_support
    v = rng.normal(size=(5, 2, 3, 4)).astype(dtype)
    for out_j, out_t in ((dj.log_prob(jitgrad.tensor(v)), dt.log_prob(torch.tensor(v))),
                         (dj.entropy(), dt.entropy()), (dj.mean, dt.mean),
                         (dj.variance, dt.variance), (dj.mode, dt.mode)):
        dh.assert_close(out_j, out_t, dtype, rtol=1e-5 if dtype is np.float32 else 1e-10)
    w = rng.normal(size=tuple(dt.log_prob(torch.tensor(v)).shape))
    gj = dh.grads_of(dj.log_prob(jitgrad.tensor(v)), pj, w)
    gt = dh.grads_of(dt.log_prob(torch.tensor(v)), tt, w)
    for k in gt:
        dh.assert_close(gj[k], gt[k], dtype, k, rtol=1e-4 if dtype is np.float32 else 1e-10)
    assert repr(dj) == repr(dt).replace("torch.", "jitgrad.")
    assert repr(dj.support) == repr(dt.support)


def test_independent_rejects_too_many_dims():
    msgs = []
    for lib, mod in ((jitgrad, jd), (torch, torch.distributions)):
        with pytest.raises(ValueError) as e:
            mod.Independent(mod.Normal(lib.zeros(3), lib.ones(3)), 2)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_dirichlet_matches_torch(dtype, dh):
    rng = np.random.default_rng(8)
    conc = rng.uniform(0.3, 4.0, (2, 4))
    dj, tj = dh.make(jitgrad, "Dirichlet", {"concentration": conc}, dtype)
    dt, tt = dh.make(torch, "Dirichlet", {"concentration": conc}, dtype)
    v = rng.dirichlet(np.ones(4), size=(3, 2)).astype(dtype)
    # PyTorch's trigamma (in digamma's gradient) is accurate to ~5e-10 only
    gtol = {"rtol": 1e-4, "atol": 1e-5} if dtype is np.float32 else {"rtol": 1e-8, "atol": 1e-9}
    for what in ("log_prob", "entropy", "mean", "variance", "mode"):
        if what == "log_prob":
            out_j, out_t = dj.log_prob(jitgrad.tensor(v)), dt.log_prob(torch.tensor(v))
        elif what == "entropy":
            out_j, out_t = dj.entropy(), dt.entropy()
        else:
            out_j, out_t = getattr(dj, what), getattr(dt, what)
        dh.assert_close(out_j, out_t, dtype, what, rtol=1e-5 if dtype is np.float32
                        else 1e-10)
        if out_t.requires_grad:
            w = rng.normal(size=tuple(out_t.shape))
            dh.assert_close(dh.grads_of(out_j, tj, w)["concentration"],
                            dh.grads_of(out_t, tt, w)["concentration"], dtype, what, **gtol)


def test_dirichlet_mode_with_small_concentrations_matches_torch(dh):
    conc = np.array([[0.5, 0.3, 0.9], [2.0, 3.0, 1.5], [0.2, 5.0, 0.1]])
    dh.assert_close(jd.Dirichlet(jitgrad.tensor(conc)).mode,
                    torch.distributions.Dirichlet(torch.tensor(conc)).mode, np.float64)


@pytest.mark.parametrize("native", [True, False], ids=["solve_triangular", "solve-fallback"])
def test_triangular_solve_paths_agree_with_torch(native, monkeypatch, dh):
    """``solve_tril`` uses ``jitgrad.linalg.solve_triangular`` where jitgrad has it, else
    ``linalg.solve`` on ``L.tril()``: both give PyTorch's values and gradients."""
    if not native:
        monkeypatch.delattr(jitgrad.linalg, "solve_triangular", raising=False)
    elif not hasattr(jitgrad.linalg, "solve_triangular"):
        pytest.skip("jitgrad.linalg.solve_triangular is not there")
    rng = np.random.default_rng(12)
    params = _mvn_params("scale_tril", rng, (2,), (2,))
    p2 = _mvn_params("precision_matrix", rng, (), (2,))
    v = rng.normal(size=(4, 2, 3))
    for ps in (params, p2):
        dj, tj = dh.make(jitgrad, "MultivariateNormal", ps, np.float64)
        dt, tt = dh.make(torch, "MultivariateNormal", ps, np.float64)
        kj = jd.kl_divergence(dj, jd.MultivariateNormal(jitgrad.zeros(3, dtype=jitgrad.float64),
                                                        scale_tril=dj.scale_tril * 1.5))
        kt = torch.distributions.kl_divergence(dt, torch.distributions.MultivariateNormal(
            torch.zeros(3, dtype=torch.float64), scale_tril=dt.scale_tril * 1.5))
        for out_j, out_t in ((dj.log_prob(jitgrad.tensor(v)), dt.log_prob(torch.tensor(v))),
                             (kj, kt)):
            dh.assert_close(out_j, out_t, np.float64, rtol=1e-9)
            w = np.ones(tuple(out_t.shape))
            gj, gt = dh.grads_of(out_j, tj, w), dh.grads_of(out_t, tt, w)
            for k in gt:
                dh.assert_close(gj[k], gt[k], np.float64, k, rtol=1e-8, atol=1e-11)
