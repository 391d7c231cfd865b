"""The univariate families built on transforms and the later ones (LogNormal, HalfNormal,
HalfCauchy, Gumbel, Weibull, Pareto, Cauchy, StudentT, Geometric, NegativeBinomial,
ContinuousBernoulli, (Logit)RelaxedBernoulli) against PyTorch: log_prob, cdf, icdf,
entropy, moments and mode, and their gradients w.r.t. the parameters, in float32 and
float64 (PyTorch's exception type where it raises)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402

DTYPES = [np.float32, np.float64]


def _pos(r, *shape, lo=0.3, hi=3.0):
    return r.uniform(lo, hi, shape)


def _ints(r, s, hi=8):
    return r.integers(0, hi, s).astype(float)


# name -> (params(rng), value(rng, params, sample_shape + batch_shape), batch_shape)
CASES = {
    "LogNormal": (lambda r: {"loc": r.normal(size=(3, 1)), "scale": _pos(r, 4)},
                  lambda r, p, s: _pos(r, *s, lo=0.05, hi=5.0), (3, 4)),
    "LogNormal-scalar": (lambda r: {"loc": 0.5, "scale": 2.0},
                         lambda r, p, s: _pos(r, *s), ()),
    "HalfNormal": (lambda r: {"scale": _pos(r, 2, 3)},
                   lambda r, p, s: _pos(r, *s, lo=0.0, hi=4.0), (2, 3)),
    "HalfCauchy": (lambda r: {"scale": _pos(r, 3)},
                   lambda r, p, s: _pos(r, *s, lo=0.0, hi=6.0), (3,)),
    "Gumbel": (lambda r: {"loc": r.normal(size=(3,)), "scale": _pos(r, 2, 1)},
               lambda r, p, s: r.normal(size=s) * 2, (2, 3)),
    "Gumbel-scalar": (lambda r: {"loc": 0.5, "scale": 2.0},
                      lambda r, p, s: r.normal(size=s), ()),
    "Weibull": (lambda r: {"scale": _pos(r, 3), "concentration": _pos(r, 2, 1, lo=0.5)},
                lambda r, p, s: _pos(r, *s, lo=0.05, hi=4.0), (2, 3)),
    "Pareto": (lambda r: {"scale": _pos(r, 3), "alpha": np.array([[0.5], [1.5], [3.0]])},
               lambda r, p, s: p["scale"] + _pos(r, *s, lo=0.0, hi=3.0), (3, 3)),
    "Cauchy": (lambda r: {"loc": r.normal(size=(3,)), "scale": _pos(r, 2, 3)},
               lambda r, p, s: r.normal(size=s) * 3, (2, 3)),
    "StudentT": (lambda r: {"df": np.array([0.7, 1.5, 2.5, 6.0]), "loc": r.normal(size=(2, 1)),
                            "scale": _pos(r, 4)},
                 lambda r, p, s: r.normal(size=s) * 2, (2, 4)),
    "StudentT-df-only": (lambda r: {"df": _pos(r, 3, lo=2.5, hi=9.0)},
                         lambda r, p, s: r.normal(size=s), (3,)),
    "Geometric-probs": (lambda r: {"probs": r.uniform(0.05, 0.95, (2, 3))},
                        lambda r, p, s: _ints(r, s), (2, 3)),
    "Geometric-logits": (lambda r: {"logits": r.normal(size=(3,)) * 2},
                         lambda r, p, s: _ints(r, s), (3,)),
    "NegativeBinomial-probs": (lambda r: {"total_count": _pos(r, 3, lo=0.5, hi=6.0),
                                          "probs": r.uniform(0.05, 0.9, (2, 3))},
                               lambda r, p, s: _ints(r, s, 10), (2, 3)),
    "NegativeBinomial-logits": (lambda r: {"total_count": 4.0,
                                           "logits": r.normal(size=(3,))},
                                lambda r, p, s: _ints(r, s, 10), (3,)),
    "ContinuousBernoulli-probs": (
        lambda r: {"probs": np.array([[0.05, 0.3, 0.4995, 0.5005], [0.7, 0.95, 0.45, 0.6]])},
        lambda r, p, s: r.uniform(0.01, 0.99, s), (2, 4)),
    "ContinuousBernoulli-logits": (lambda r: {"logits": r.normal(size=(3,)) * 2},
                                   lambda r, p, s: r.uniform(0.01, 0.99, s), (3,)),
    "LogitRelaxedBernoulli": (lambda r: {"temperature": np.array(0.7),
                                         "probs": r.uniform(0.05, 0.95, (2, 3))},
                              lambda r, p, s: r.normal(size=s) * 2, (2, 3)),
    "RelaxedBernoulli-probs": (lambda r: {"temperature": np.array([0.5, 1.0, 2.0]),
                                          "probs": r.uniform(0.05, 0.95, (2, 3))},
                               lambda r, p, s: r.uniform(0.02, 0.98, s), (2, 3)),
    "RelaxedBernoulli-logits": (lambda r: {"temperature": np.array(1.5),
                                           "logits": r.normal(size=(3,))},
                                lambda r, p, s: r.uniform(0.02, 0.98, s), (3,)),
}

PROPERTIES = ["mean", "variance", "stddev", "mode"]
METHODS = ["log_prob", "entropy", "cdf", "icdf", "perplexity"]
# special functions (digamma / lgamma gradients) are accurate to ~1e-9 in PyTorch
SPECIAL = ("StudentT", "Weibull", "NegativeBinomial")


def _call(d, what, value, lib):
    if what in PROPERTIES:
        return getattr(d, what)
    if what in ("entropy", "perplexity"):
        return getattr(d, what)()
    if what == "icdf":  # probabilities in (0, 1) of the value's shape
        q = np.random.default_rng(5).uniform(0.02, 0.98, value.shape)
        return d.icdf(lib.tensor(q.astype(value.dtype)))
    return getattr(d, what)(lib.tensor(value))


def _outcome(fn):
    try:
        return fn(), None
    except (NotImplementedError, ValueError, RuntimeError) as e:
        return None, e


def _make(dh, lib, name, params, dtype):
    """``dh.make``, with the classes PyTorch keeps out of ``torch.distributions``' namespace
    taken from their modules."""
    if name != "LogitRelaxedBernoulli":
        return dh.make(lib, name, params, dtype)
    ts = dh.tensors(lib, params, dtype)
    return lib.distributions.relaxed_bernoulli.LogitRelaxedBernoulli(**ts), ts


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("what", PROPERTIES + METHODS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_and_gradients_match_torch(case, what, dtype, dh):
    name = case.split("-")[0]
    params_of, value_of, batch = CASES[case]
    rng = np.random.default_rng(0)
    params = params_of(rng)
    value = value_of(rng, params, (2,) + batch).astype(dtype)
    dj, tj = _make(dh, jitgrad, name, params, dtype)
    dt, tt = _make(dh, torch, name, params, dtype)
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
    # ContinuousBernoulli's closed forms cancel next to probs = 0.5: float32 rounding
    # differences are amplified there (both libraries are that far from the exact value)
    loose = {"rtol": 1e-3, "atol": 5e-5} if name == "ContinuousBernoulli" else {}
    dh.assert_close(out_j, out_t, dtype, what, **(loose if dtype is np.float32 else {}))
    if not out_t.requires_grad:
        assert not out_j.requires_grad
        return
    w = np.random.default_rng(7).normal(size=tuple(out_t.shape))
    gt, gj = dh.grads_of(out_t, tt, w), dh.grads_of(out_j, tj, w)
    assert gj.keys() == gt.keys()
    f64 = {"rtol": 1e-8} if name in SPECIAL else {}
    f32 = {"rtol": 1e-4, "atol": 1e-5, **loose, **({"atol": 2e-4} if loose else {})}
    for k in gt:
        if gt[k] is None:
            assert gj[k] is None or not np.any(dh.to_np(gj[k])), k
        else:
            dh.assert_close(gj[k], gt[k], dtype, f"d {what} / d {k}",
                            **(f32 if dtype is np.float32 else f64))


@pytest.mark.parametrize("name,params,value", [
    ("HalfNormal", {"scale": 1.5}, [0.0, 0.5, 3.0, np.inf]),
    ("HalfCauchy", {"scale": 0.5}, [0.0, 0.5, 30.0, np.inf]),
    ("Cauchy", {"loc": 1.0, "scale": 2.0}, [-np.inf, -3.0, 1.0, 4.0, np.inf]),
    ("Gumbel", {"loc": 0.0, "scale": 1.0}, [-3.0, 0.0, 5.0]),
    ("LogNormal", {"loc": 0.0, "scale": 0.5}, [1e-3, 1.0, 4.0]),
    ("Weibull", {"scale": 2.0, "concentration": 1.5}, [0.1, 1.0, 4.0]),
    ("Pareto", {"scale": 1.0, "alpha": 2.0}, [1.0, 2.0, 10.0]),
    ("ContinuousBernoulli", {"probs": 0.2}, [0.0, 0.3, 1.0]),
])
def test_cdf_icdf_edges_and_roundtrip(name, params, value, dh):
    v = np.array(value)
    dj = getattr(jitgrad.distributions, name)(
        **{k: jitgrad.tensor(p, dtype=jitgrad.float64) for k, p in params.items()})
    dt = getattr(torch.distributions, name)(
        **{k: torch.tensor(p, dtype=torch.float64) for k, p in params.items()})
    outs = []
    for what, arg in (("cdf", v), ("icdf", np.array([1e-6, 0.3, 0.5, 0.9, 1 - 1e-6]))):
        out_j, err_j = _outcome(lambda w=what, a=arg: getattr(dj, w)(jitgrad.tensor(a)))
        out_t, err_t = _outcome(lambda w=what, a=arg: getattr(dt, w)(torch.tensor(a)))
        if err_t is not None:
            assert type(err_j) is type(err_t)
            continue
        dh.assert_close(out_j, out_t, np.float64, what, rtol=1e-9)
        outs.append(what)
    if outs == ["cdf", "icdf"]:
        q = np.array([0.1, 0.5, 0.9])
        back = dj.cdf(dj.icdf(jitgrad.tensor(q, dtype=jitgrad.float64)))
        np.testing.assert_allclose(back.numpy(), q, rtol=1e-7)


def test_geometric_edge_probs_one_and_log_prob_support(dh):
    for lib in (jitgrad, torch):
        d = lib.distributions.Geometric(lib.tensor([1.0, 0.5], requires_grad=True))
        out = d.log_prob(lib.tensor([0.0, 2.0]))
        dh.to_np(out)
    pj = jitgrad.tensor([1.0, 0.5], requires_grad=True)
    pt = torch.tensor([1.0, 0.5], requires_grad=True)
    lj = jitgrad.distributions.Geometric(pj).log_prob(jitgrad.tensor([0.0, 2.0]))
    lt = torch.distributions.Geometric(pt).log_prob(torch.tensor([0.0, 2.0]))
    dh.assert_close(lj, lt, np.float32)
    lj.sum().backward()
    lt.sum().backward()
    dh.assert_close(pj.grad, pt.grad, np.float32)


def test_negative_binomial_zero_total_count_and_value(dh):
    for tc in (0.0, 2.0):
        a = jitgrad.distributions.NegativeBinomial(tc, probs=jitgrad.tensor([0.3]))
        b = torch.distributions.NegativeBinomial(tc, probs=torch.tensor([0.3]))
        v = [0.0, 1.0, 4.0]
        dh.assert_close(a.log_prob(jitgrad.tensor(v)), b.log_prob(torch.tensor(v)), np.float32)
