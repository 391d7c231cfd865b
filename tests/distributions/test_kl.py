"""kl_divergence against PyTorch for every registered pair (values and gradients, with
broadcast batch shapes and the infinite cases), the Bregman-divergence fallback of
exponential families, and register_kl's dispatch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402
import jitgrad.distributions as jd  # noqa: E402
from jitgrad.distributions.kl import _KL_REGISTRY  # noqa: E402


def _u(r, lo, hi, shape):
    return r.uniform(lo, hi, shape)


def _probs(r, shape, zeros=True):
    p = r.uniform(0.05, 1.0, shape)
    if zeros:
        p[..., 0, 0] = 0.0
    return p / p.sum(-1, keepdims=True)


# name -> params(rng, batch shape, role) with role "p" or "q"
def _params(name, r, b, role):
    if name in ("Normal", "Laplace"):
        return {"loc": r.normal(size=b), "scale": _u(r, 0.5, 2, b)}
    if name == "Exponential":
        return {"rate": _u(r, 0.5, 2, b)}
    if name == "Uniform":
        if role == "p":
            low = _u(r, 0.05, 0.4, b)
            return {"low": low, "high": low + _u(r, 0.1, 0.5, b)}
        return {"low": _u(r, -0.2, 0.3, b), "high": _u(r, 0.5, 1.2, b)}
    if name == "Bernoulli":
        p = _u(r, 0.05, 0.95, b)
        p.flat[0], p.flat[-1] = (0.0, 1.0) if role == "p" else (1.0, 0.0)
        return {"probs": p}
    if name in ("Categorical", "OneHotCategorical"):
        return {"probs": _probs(r, b + (4,), zeros=True)}
    if name == "MultivariateNormal":
        a = r.normal(size=b + (3, 3))
        cov = a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)
        return {"loc": r.normal(size=b + (3,)), "scale_tril": np.linalg.cholesky(cov)}
    if name == "Gamma":
        return {"concentration": _u(r, 0.5, 3, b), "rate": _u(r, 0.5, 2, b)}
    if name == "Beta":
        return {"concentration1": _u(r, 0.5, 3, b), "concentration0": _u(r, 0.5, 3, b)}
    if name == "Dirichlet":
        return {"concentration": _u(r, 0.5, 3, b + (3,))}
    if name == "Poisson":
        return {"rate": _u(r, 0.5, 3, b)}
    if name == "Binomial":
        return {"total_count": 10.0 if role == "p" else np.array([10.0, 8.0, 10.0]),
                "probs": _u(r, 0.1, 0.9, b)}
    return _params_of_later_families(name, r, b, role)


def _params_of_later_families(name, r, b, role):
    """The families added with the transforms (tests/distributions/test_kl_transformed.py
    has their own checks)."""
    if name in ("Cauchy", "Gumbel", "TransformedDistribution"):
        return {"loc": r.normal(size=b), "scale": _u(r, 0.5, 2, b)}
    if name == "HalfNormal":
        return {"scale": _u(r, 0.5, 2, b)}
    if name == "Pareto":  # alpha <= 1 and <= 2: the infinite cases
        return {"scale": _u(r, 0.5, 2, b), "alpha": _u(r, 0.5, 4, b)}
    if name == "ContinuousBernoulli":  # away from 0.5, where float32 cancels
        p = _u(r, 0.05, 0.35, b)
        p[..., ::2] = 1 - p[..., ::2]
        return {"probs": p}
    if name == "Geometric":
        return {"probs": _u(r, 0.1, 0.9, b)}
    if name == "LowRankMultivariateNormal":
        return {"loc": r.normal(size=b + (3,)), "cov_factor": r.normal(size=b + (3, 2)),
                "cov_diag": _u(r, 0.5, 2, b + (3,))}
    raise KeyError(name)


PAIRS = sorted((p.__name__, q.__name__) for p, q in _KL_REGISTRY
               if "ExponentialFamily" not in (p.__name__, q.__name__))


def _build(lib, name, params, dtype):
    mod = jd if lib is jitgrad else torch.distributions
    ts = {}
    for k, v in params.items():
        if isinstance(v, np.ndarray) and k != "total_count":
            ts[k] = lib.tensor(v.astype(dtype), requires_grad=True)
        elif isinstance(v, np.ndarray):
            ts[k] = lib.tensor(v.astype(dtype))
        else:
            ts[k] = v
    if name == "Independent":
        return mod.Independent(mod.Normal(**ts), 1), ts
    if name == "TransformedDistribution":
        return mod.TransformedDistribution(mod.Normal(**ts), [mod.transforms.ExpTransform()]), ts
    return getattr(mod, name)(**ts), ts


def test_every_registered_pair_is_covered():
    assert len(PAIRS) >= 40
    assert ("Normal", "Normal") in PAIRS and ("MultivariateNormal", "MultivariateNormal") in PAIRS


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_kl_matches_torch(pair, dtype, dh):
    pn, qn = pair
    r = np.random.default_rng(abs(hash(pair)) % 2**32)
    bp, bq = (2, 3), (3,)
    if pair in (("Bernoulli", "Bernoulli"), ("Beta", "Uniform")):
        bq = bp  # PyTorch's in-place masking there does not broadcast q's batch shape
    if pair == ("Independent", "Independent"):
        pp, qp = _params("Normal", r, (2, 3, 4), "p"), _params("Normal", r, (3, 4), "q")
    else:
        pp, qp = _params(pn, r, bp, "p"), _params(qn, r, bq, "q")
    pj, ptj = _build(jitgrad, pn, pp, dtype)
    qj, qtj = _build(jitgrad, qn, qp, dtype)
    pt, ptt = _build(torch, pn, pp, dtype)
    qt, qtt = _build(torch, qn, qp, dtype)
    kj, kt = jd.kl_divergence(pj, qj), torch.distributions.kl_divergence(pt, qt)
    f32 = {"rtol": 1e-4, "atol": 1e-5}
    dh.assert_close(kj, kt, dtype, "kl", **(f32 if dtype is np.float32 else {"rtol": 1e-9}))
    w = np.random.default_rng(0).normal(size=tuple(kt.shape))
    ts_j, ts_t = {**ptj, **{"q_" + k: v for k, v in qtj.items()}}, \
        {**ptt, **{"q_" + k: v for k, v in qtt.items()}}
    if not kt.requires_grad:
        return
    gt = dh.grads_of(kt, ts_t, w)
    gj = dh.grads_of(kj, ts_j, w)
    for k in gt:
        if gt[k] is None:
            assert gj[k] is None or not np.any(dh.to_np(gj[k])), k
            continue
        # PyTorch's trigamma (in digamma's gradient) is accurate to ~5e-10 only
        tol = f32 if dtype is np.float32 else {"rtol": 1e-7, "atol": 1e-9}
        if dtype is np.float32 and "ContinuousBernoulli" in pair:
            tol = {"rtol": 1e-3, "atol": 1e-4}  # its closed forms cancel
        dh.assert_close(gj[k], gt[k], dtype, f"d kl / d {k}", **tol)


def test_binomial_kl_with_larger_q_count_is_not_implemented():
    for lib, mod in ((jitgrad, jd), (torch, torch.distributions)):
        p = mod.Binomial(5, lib.tensor([0.5]))
        q = mod.Binomial(10, lib.tensor([0.5]))
        with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
            mod.kl_divergence(p, q)


@pytest.mark.parametrize("name", ["Normal", "Exponential", "Gamma", "Poisson", "Bernoulli",
                                  "Beta", "Dirichlet"])
def test_exponential_family_bregman_fallback_matches_torch_and_closed_form(name, dh):
    r = np.random.default_rng(1)
    pp, qp = _params(name, r, (3,), "q"), _params(name, r, (3,), "q")
    if name == "Bernoulli":
        pp, qp = {"probs": _u(r, 0.1, 0.9, (3,))}, {"probs": _u(r, 0.1, 0.9, (3,))}
    pj, _ = _build(jitgrad, name, pp, np.float64)
    qj, _ = _build(jitgrad, name, qp, np.float64)
    pt, _ = _build(torch, name, pp, np.float64)
    qt, _ = _build(torch, name, qp, np.float64)
    bj = jd.kl._kl_expfamily_expfamily(pj, qj)
    bt = torch.distributions.kl._kl_expfamily_expfamily(pt, qt)
    dh.assert_close(bj, bt, np.float64, rtol=1e-9)
    dh.assert_close(bj, jd.kl_divergence(pj, qj), np.float64, rtol=1e-8, atol=1e-12)


def test_exponential_family_entropy_fallback():
    d = jd.Normal(jitgrad.tensor([0.0, 1.0], dtype=jitgrad.float64),
                  jitgrad.tensor([0.5, 2.0], dtype=jitgrad.float64))
    np.testing.assert_allclose(jd.ExponentialFamily.entropy(d).detach().numpy(),
                               d.entropy().numpy(), rtol=1e-12)
    with pytest.raises(NotImplementedError):
        jd.Poisson(jitgrad.tensor([1.0])).entropy()  # no carrier measure, as in PyTorch


def test_dispatch_most_specific_pair_and_ambiguity():
    class MyNormal(jd.Normal):
        pass

    class MyOtherNormal(jd.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), MyOtherNormal(1.0, 2.0)
    base = jd.kl_divergence(jd.Normal(0.0, 1.0), jd.Normal(1.0, 2.0))
    assert jd.kl_divergence(p, q).item() == base.item()  # Normal-Normal by inheritance

    calls = []
    try:
        @jd.register_kl(MyNormal, jd.Normal)
        def _left(p, q):
            calls.append("left")
            return p.loc * 0

        @jd.register_kl(jd.Normal, MyOtherNormal)
        def _right(p, q):
            calls.append("right")
            return p.loc * 0 + 1

        with pytest.warns(RuntimeWarning, match="Ambiguous kl_divergence"):
            jd.kl_divergence(p, q)
        # the tie broken by registering the most derived pair
        jd.register_kl(MyNormal, MyOtherNormal)(_right)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert jd.kl_divergence(p, q).item() == 1.0
        assert jd.kl_divergence(p, jd.Normal(0.0, 1.0)).item() == 0.0
    finally:
        for key in [k for k in _KL_REGISTRY if MyNormal in k or MyOtherNormal in k]:
            del _KL_REGISTRY[key]
        jd.kl._KL_MEMOIZE.clear()


def test_unregistered_pair_raises_torch_message():
    msgs = []
    for lib, mod in ((jitgrad, jd), (torch, torch.distributions)):
        with pytest.raises(NotImplementedError) as e:
            mod.kl_divergence(mod.Categorical(probs=lib.ones(2)), mod.Normal(0.0, 1.0))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
