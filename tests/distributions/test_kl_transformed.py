"""kl_divergence of the distributions built on transforms beyond test_kl.py's
every-registered-pair check: TransformedDistributions with equal transforms reduce to
their bases (LogNormal, Weibull), unequal ones are not implemented, and no registered
pair dispatches ambiguously."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402
import jitgrad.distributions as jd  # noqa: E402
from jitgrad.distributions.kl import _KL_REGISTRY, _dispatch_kl  # noqa: E402


def _both(name, **params):
    out = []
    for lib in (jitgrad, torch):
        ts = {k: lib.tensor(np.asarray(v, dtype=np.float64), requires_grad=True)
              for k, v in params.items()}
        out.append((getattr(lib.distributions, name)(**ts), ts))
    return out


@pytest.mark.parametrize("name,p,q", [
    ("LogNormal", {"loc": [0.0, 1.0], "scale": [1.0, 0.5]}, {"loc": [0.5, 0.0],
                                                           "scale": [2.0, 1.0]}),
    ("HalfNormal", {"scale": [1.0, 0.5]}, {"scale": [2.0, 1.5]}),
    ("Weibull", {"scale": [1.0, 2.0], "concentration": [1.5, 0.5]},
     {"scale": [1.0, 2.0], "concentration": [1.5, 0.5]}),
])
def test_transformed_kl_matches_torch(name, p, q, dh):
    (pj, tpj), (pt, tpt) = _both(name, **p)
    (qj, _), (qt, _) = _both(name, **q)
    kj, kt = jd.kl_divergence(pj, qj), torch.distributions.kl_divergence(pt, qt)
    dh.assert_close(kj, kt, np.float64, "kl")
    if kt.requires_grad:
        gj = dh.grads_of(kj, tpj, np.ones(2))
        gt = dh.grads_of(kt, tpt, np.ones(2))
        for k in gt:
            if gt[k] is not None:
                dh.assert_close(gj[k], gt[k], np.float64, k)


def test_transformed_kl_with_unequal_transforms_is_not_implemented():
    for lib in (jitgrad, torch):
        D = lib.distributions
        T = D.transforms
        p = D.TransformedDistribution(D.Normal(0.0, 1.0), [T.ExpTransform()])
        q = D.TransformedDistribution(D.Normal(0.0, 1.0), [T.SigmoidTransform()])
        with pytest.raises(NotImplementedError):
            D.kl_divergence(p, q)
        w1, w2 = D.Weibull(1.0, 2.0), D.Weibull(1.0, 3.0)  # unequal PowerTransforms
        with pytest.raises(NotImplementedError):
            D.kl_divergence(w1, w2)
        with pytest.raises(NotImplementedError, match="No KL"):
            D.kl_divergence(D.HalfCauchy(1.0), D.Normal(0.0, 1.0))


def test_no_registered_pair_dispatches_ambiguously():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for p, q in _KL_REGISTRY:
            assert _dispatch_kl(p, q) is _KL_REGISTRY[p, q]
        for p, q in ((jd.LogNormal, jd.LogNormal), (jd.Gumbel, jd.Gumbel),
                     (jd.HalfNormal, jd.HalfNormal), (jd.Pareto, jd.Gumbel)):
            assert _dispatch_kl(p, q) is not NotImplemented
