"""Univariate distributions against PyTorch: log_prob, entropy, moments, mode, cdf, icdf
and their gradients w.r.t. the parameters, in float32 and float64, with broadcast
parameter shapes and sample dimensions in the values."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402

DTYPES = [np.float32, np.float64]


def _pos(rng, *shape, lo=0.3, hi=3.0):
    return rng.uniform(lo, hi, shape)


# name -> (params(rng), value(rng, params, sample_shape + batch_shape), batch_shape)
CASES = {
    "Normal": (lambda r: {"loc": r.normal(size=(3, 1)), "scale": _pos(r, 4)},
               lambda r, p, s: r.normal(size=s) * 2, (3, 4)),
    "Normal-scalar": (lambda r: {"loc": 0.5, "scale": 2.0},
                      lambda r, p, s: r.normal(size=s), ()),
    "Normal-number-and-tensor": (lambda r: {"loc": r.normal(size=(3,)), "scale": 1.5},
                                 lambda r, p, s: r.normal(size=s), (3,)),
    "Uniform": (lambda r: {"low": r.normal(size=(3,)), "high": r.normal(size=(3,)) + 4},
                lambda r, p, s: r.uniform(1.0, 2.5, s), (3,)),
    "Exponential": (lambda r: {"rate": _pos(r, 2, 3)},
                    lambda r, p, s: _pos(r, *s, lo=0.0, hi=4.0), (2, 3)),
    "Laplace": (lambda r: {"loc": r.normal(size=(3,)), "scale": _pos(r, 2, 1)},
                lambda r, p, s: r.normal(size=s) * 2, (2, 3)),
    "Bernoulli-probs": (lambda r: {"probs": r.uniform(0.05, 0.95, (2, 3))},
                        lambda r, p, s: r.integers(0, 2, s).astype(float), (2, 3)),
    "Bernoulli-logits": (lambda r: {"logits": r.normal(size=(2, 3)) * 3},
                         lambda r, p, s: r.integers(0, 2, s).astype(float), (2, 3)),
    "Gamma": (lambda r: {"concentration": _pos(r, 2, 3, hi=5), "rate": _pos(r, 3)},
              lambda r, p, s: _pos(r, *s, lo=0.05, hi=5.0), (2, 3)),
    "Chi2": (lambda r: {"df": _pos(r, 4, lo=1.0, hi=6.0)},
             lambda r, p, s: _pos(r, *s, lo=0.05, hi=8.0), (4,)),
    "Beta": (lambda r: {"concentration1": _pos(r, 3, hi=4),
                        "concentration0": _pos(r, 2, 1, hi=4)},
             lambda r, p, s: r.uniform(0.02, 0.98, s), (2, 3)),
    "Beta-scalar": (lambda r: {"concentration1": 2.0, "concentration0": 0.5},
                    lambda r, p, s: r.uniform(0.02, 0.98, s), ()),
    "Poisson": (lambda r: {"rate": _pos(r, 2, 3, hi=6)},
                lambda r, p, s: r.integers(0, 8, s).astype(float), (2, 3)),
    "Binomial-probs": (lambda r: {"total_count": 10, "probs": r.uniform(0.05, 0.95, (2, 3))},
                       lambda r, p, s: r.integers(0, 11, s).astype(float), (2, 3)),
    "Binomial-logits": (lambda r: {"total_count": r.integers(3, 12, (3,)).astype(float),
                                   "logits": r.normal(size=(2, 3))},
                        lambda r, p, s: r.integers(0, 3, s).astype(float), (2, 3)),
}

PROPERTIES = ["mean", "variance", "stddev", "mode"]
METHODS = ["log_prob", "entropy", "cdf", "icdf", "perplexity"]


def _build(lib, case, dtype, seed=0):
    params_of, value_of, batch = CASES[case]
    rng = np.random.default_rng(seed)
    params = params_of(rng)
    value = value_of(rng, params, (2,) + batch)
    return params, value


def _call(d, what, value, lib):
    if what in PROPERTIES:
        return getattr(d, what)
    if what in ("entropy", "perplexity"):
        return getattr(d, what)()
    if what == "icdf":  # probabilities in (0, 1) of the value's shape
        rng = np.random.default_rng(5)
        q = rng.uniform(0.02, 0.98, value.shape)
        return d.icdf(lib.tensor(q.astype(value.dtype)))
    return getattr(d, what)(lib.tensor(value))


def _outcome(fn):
    try:
        return fn(), None
    except (NotImplementedError, ValueError, RuntimeError) as e:
        return None, e


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("what", PROPERTIES + METHODS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_and_gradients_match_torch(case, what, dtype, dh):
    name = case.split("-")[0]
    params, value = _build(jitgrad, case, dtype)
    value = value.astype(dtype)
    dj, tj = dh.make(jitgrad, name, params, dtype)
    dt, tt = dh.make(torch, name, params, dtype)
    assert dj.batch_shape == tuple(dt.batch_shape)
    assert dj.event_shape == tuple(dt.event_shape)
    out_t, err_t = _outcome(lambda: _call(dt, what, value, torch))
    out_j, err_j = _outcome(lambda: _call(dj, what, value, jitgrad))
    if err_t is not None:
        assert type(err_j) is type(err_t), (err_j, err_t)
        return
    assert err_j is None, err_j
    assert out_j.dtype.np == dh.to_np(out_t).dtype
    dtype = dh.to_np(out_t).dtype.type  # Python-number parameters: the default dtype
    tol = {} if name not in ("Binomial",) or dtype is np.float64 else {"atol": 2e-5}
    dh.assert_close(out_j, out_t, dtype, what, **tol)
    if not out_t.requires_grad:
        assert not out_j.requires_grad
        return
    w = np.random.default_rng(7).normal(size=tuple(out_t.shape))
    gt, err_t = _outcome(lambda: dh.grads_of(out_t, tt, w))
    gj, err_j = _outcome(lambda: dh.grads_of(out_j, tj, w))
    if err_t is not None:  # Gamma.cdf: no derivative in the concentration
        assert type(err_j) is type(err_t), (err_j, err_t)
        assert str(err_j) in str(err_t), (err_j, err_t)
        return
    assert gj.keys() == gt.keys()
    # PyTorch's trigamma (in the gradients of digamma) is accurate to ~5e-10 only
    f64 = {"rtol": 1e-8} if name in ("Gamma", "Chi2", "Beta") else {}
    for k in gt:
        if gt[k] is None:
            assert gj[k] is None or not np.any(dh.to_np(gj[k])), k
        else:
            dh.assert_close(gj[k], gt[k], dtype, f"d {what} / d {k}",
                            **({"rtol": 1e-4, "atol": 1e-5} if dtype is np.float32 else f64))


@pytest.mark.parametrize("name,params,value", [
    ("Normal", {"loc": 0.0, "scale": 1.0}, [-np.inf, -3.0, 0.0, 2.0, np.inf]),
    ("Exponential", {"rate": 2.0}, [0.0, 0.5, np.inf]),
    ("Laplace", {"loc": 1.0, "scale": 0.5}, [-np.inf, 1.0, 4.0]),
    ("Uniform", {"low": -1.0, "high": 1.0}, [-1.0, 0.0, 0.999]),
])
def test_cdf_icdf_edges_and_roundtrip(name, params, value, dh):
    v = np.array(value)
    dj = getattr(jitgrad.distributions, name)(**params)
    dt = getattr(torch.distributions, name)(**params)
    dh.assert_close(dj.cdf(jitgrad.tensor(v, dtype=jitgrad.float64)),
                    dt.cdf(torch.tensor(v)), np.float64)
    q = np.array([0.0, 1e-6, 0.3, 0.5, 0.9, 1 - 1e-6])
    ij = dj.icdf(jitgrad.tensor(q, dtype=jitgrad.float64))
    dh.assert_close(ij, dt.icdf(torch.tensor(q)), np.float64, rtol=1e-9)
    inner = q[1:]
    back = dj.cdf(dj.icdf(jitgrad.tensor(inner, dtype=jitgrad.float64)))
    np.testing.assert_allclose(dh.to_np(back), inner, rtol=1e-7)


def test_icdf_gradient_matches_torch(dh):
    q = np.array([0.01, 0.3, 0.5, 0.97])
    loc, scale = np.array([0.5, -1.0, 2.0, 0.0]), np.array([1.0, 2.0, 0.5, 3.0])
    outs = []
    for lib in (jitgrad, torch):
        ts = dh.tensors(lib, {"loc": loc, "scale": scale, "q": q}, np.float64)
        d = lib.distributions.Normal(ts["loc"], ts["scale"])
        y = d.icdf(ts["q"])
        outs.append(dh.grads_of(y, ts, np.ones(4)))
    for k in outs[1]:
        dh.assert_close(outs[0][k], outs[1][k], np.float64, k, rtol=1e-9)


def test_scalar_parameters_give_default_dtype_and_empty_batch(dh):
    for lib in (jitgrad, torch):
        d = lib.distributions.Normal(0.0, 1.0)
        assert tuple(d.batch_shape) == () and d.loc.dtype == lib.float32
    d = jitgrad.distributions.Normal(jitgrad.tensor([0.0], dtype=jitgrad.float64), 1.0)
    assert d.scale.dtype == jitgrad.float64 and d.batch_shape == (1,)


def test_log_prob_value_broadcasts_like_torch(dh):
    loc = np.array([0.0, 1.0, 2.0])
    for shape in [(), (1,), (5, 1), (4, 3)]:
        v = np.random.default_rng(1).normal(size=shape)
        a = jitgrad.distributions.Normal(jitgrad.tensor(loc), 1.0).log_prob(jitgrad.tensor(v))
        b = torch.distributions.Normal(torch.tensor(loc), 1.0).log_prob(torch.tensor(v))
        dh.assert_close(a, b, np.float64)
