"""The new distributions with event dimensions or built from other distributions
(LogisticNormal, RelaxedOneHotCategorical, ExpRelaxedCategorical, Multinomial,
LowRankMultivariateNormal, MixtureSameFamily, a generic TransformedDistribution) against
PyTorch: log_prob, entropy, moments, cdf and the covariance views, with their gradients."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402

R = np.random.default_rng(0)
ARR = {
    "loc3": R.normal(size=(2, 3)), "scale3": R.uniform(0.3, 2.0, (3,)),
    "logits3": R.normal(size=(2, 3)), "probs3": R.uniform(0.1, 1.0, (2, 3)),
    "temp": np.array(0.6), "W": R.normal(size=(2, 3, 2)), "D": R.uniform(0.5, 2.0, (3,)),
    "mix": R.normal(size=(2, 4)), "cloc": R.normal(size=(2, 4, 3)),
    "cscale": R.uniform(0.4, 1.5, (2, 4, 3)), "w1": R.normal(size=(3,)),
}
VALUES = {
    "simplex3": R.dirichlet(np.ones(3), (5, 2)), "simplex4": R.dirichlet(np.ones(4), (5, 2)),
    "real3": R.normal(size=(5, 2, 3)), "counts": np.array([[2.0, 0.0, 3.0], [1.0, 1.0, 3.0]]),
    "pos3": R.uniform(0.2, 3.0, (5, 2, 3)), "log_simplex3": np.log(R.dirichlet(np.ones(3),
                                                                                (5, 2))),
}


def _D(lib, name):
    if name == "ExpRelaxedCategorical":
        return lib.distributions.relaxed_categorical.ExpRelaxedCategorical
    return getattr(lib.distributions, name)


def _transformed(lib, p):
    T = lib.distributions.transforms
    base = lib.distributions.Independent(lib.distributions.Normal(p["loc3"], p["scale3"]), 1)
    return lib.distributions.TransformedDistribution(
        base, [T.AffineTransform(p["w1"], p["scale3"], event_dim=1), T.ExpTransform()])


# name -> (builder(lib, params), parameter keys, value key, what to compare)
CASES = {
    "LogisticNormal": (lambda lib, p: _D(lib, "LogisticNormal")(p["loc3"], p["scale3"]),
                       ("loc3", "scale3"), "simplex4", ["log_prob"]),
    "RelaxedOneHotCategorical-logits": (
        lambda lib, p: _D(lib, "RelaxedOneHotCategorical")(p["temp"], logits=p["logits3"]),
        ("temp", "logits3"), "simplex3", ["log_prob"]),
    "RelaxedOneHotCategorical-probs": (
        lambda lib, p: _D(lib, "RelaxedOneHotCategorical")(p["temp"], probs=p["probs3"]),
        ("temp", "probs3"), "simplex3", ["log_prob"]),
    "ExpRelaxedCategorical": (
        lambda lib, p: _D(lib, "ExpRelaxedCategorical")(p["temp"], logits=p["logits3"]),
        ("temp", "logits3"), "log_simplex3", ["log_prob"]),
    "Multinomial-probs": (lambda lib, p: _D(lib, "Multinomial")(5, probs=p["probs3"]),
                          ("probs3",), "counts",
                          ["log_prob", "entropy", "mean", "variance"]),
    "Multinomial-logits": (lambda lib, p: _D(lib, "Multinomial")(5, logits=p["logits3"]),
                           ("logits3",), "counts", ["log_prob", "entropy", "mean", "variance"]),
    "LowRankMultivariateNormal": (
        lambda lib, p: _D(lib, "LowRankMultivariateNormal")(p["loc3"], p["W"], p["D"]),
        ("loc3", "W", "D"), "real3",
        ["log_prob", "entropy", "mean", "mode", "variance", "stddev", "covariance_matrix",
         "precision_matrix", "scale_tril"]),
    "MixtureSameFamily": (
        lambda lib, p: _D(lib, "MixtureSameFamily")(
            _D(lib, "Categorical")(logits=p["mix"]),
            _D(lib, "Independent")(_D(lib, "Normal")(p["cloc"], p["cscale"]), 1)),
        ("mix", "cloc", "cscale"), "real3", ["log_prob", "mean", "variance"]),
    "MixtureSameFamily-univariate": (
        lambda lib, p: _D(lib, "MixtureSameFamily")(
            _D(lib, "Categorical")(logits=p["mix"][0]),
            _D(lib, "Normal")(p["cloc"][0, :, 0], p["cscale"][0, :, 0])),
        ("mix", "cloc", "cscale"), "real3", ["log_prob", "mean", "variance", "cdf"]),
    "TransformedDistribution": (_transformed, ("loc3", "scale3", "w1"), "pos3",
                                ["log_prob"]),
}


def _build(lib, case, dtype):
    make, keys, vkey, _ = CASES[case]
    ps = {k: lib.tensor(ARR[k].astype(dtype), requires_grad=True) for k in keys}
    return make(lib, ps), ps, VALUES[vkey].astype(dtype)


def _eval(d, what, value, lib):
    if what in ("log_prob", "cdf"):
        return getattr(d, what)(lib.tensor(value))
    if what == "entropy":
        return d.entropy()
    return getattr(d, what)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_and_gradients_match_torch(case, dtype, dh):
    dj, pj, value = _build(jitgrad, case, dtype)
    dt, pt, _ = _build(torch, case, dtype)
    assert dj.batch_shape == tuple(dt.batch_shape) and dj.event_shape == tuple(dt.event_shape)
    assert dj.has_rsample == dt.has_rsample
    if case.startswith("MixtureSameFamily-univariate"):
        value = value[:, 0, :1]
    for what in CASES[case][3]:
        out_j, out_t = _eval(dj, what, value, jitgrad), _eval(dt, what, value, torch)
        dh.assert_close(out_j, out_t, dtype, what, **({"rtol": 1e-4, "atol": 1e-5}
                                                      if dtype is np.float32 else {}))
        if not out_t.requires_grad:
            continue
        w = np.random.default_rng(3).normal(size=tuple(out_t.shape))
        gj, gt = dh.grads_of(out_j, pj, w), dh.grads_of(out_t, pt, w)
        for k in gt:
            if gt[k] is None:
                assert gj[k] is None or not np.any(dh.to_np(gj[k])), (what, k)
                continue
            dh.assert_close(gj[k], gt[k], dtype, f"d {what} / d {k}",
                            **({"rtol": 2e-4, "atol": 2e-5} if dtype is np.float32
                               else {"rtol": 1e-8, "atol": 1e-11}))
