"""The new distributions' API against PyTorch: argument validation (exception types and
messages), values outside the support, ``repr``, ``expand``, flags; and sampling without
PyTorch's bits: shapes, dtypes, support, reproducibility, moments of large samples with a
fixed seed, and gradients flowing through ``rsample``."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402
import jitgrad.distributions as jd  # noqa: E402


def _mod(lib):
    return jd if lib is jitgrad else torch.distributions


def _ctor(name, lib, **params):
    args = {k: lib.tensor(v) if isinstance(v, (list, np.ndarray)) else v
            for k, v in params.items()}
    if name == "MixtureSameFamily":
        D = _mod(lib)
        return D.MixtureSameFamily(D.Categorical(logits=args["mix"]),
                                   D.Normal(args["loc"], args["scale"]),
                                   validate_args=args.get("validate_args"))
    return getattr(_mod(lib), name)(**args)


def _same_error(build_j, build_t, exc=Exception):
    with pytest.raises(exc) as ej:
        build_j()
    with pytest.raises(exc) as et:
        build_t()
    assert type(ej.value) is type(et.value)
    assert str(ej.value) == str(et.value).replace("torch.", "jitgrad."), (ej.value, et.value)
    return str(ej.value)


BAD = [
    ("LogNormal", {"loc": [0.0], "scale": [-1.0]}),
    ("HalfNormal", {"scale": [1.0, 0.0]}),
    ("HalfCauchy", {"scale": [-2.0]}),
    ("Gumbel", {"loc": [0.0, 1.0], "scale": [1.0, -1.0]}),
    ("Gumbel", {"loc": float("nan"), "scale": 1.0}),
    ("Weibull", {"scale": [1.0], "concentration": [-1.0]}),
    ("Pareto", {"scale": [1.0], "alpha": [-1.0]}),
    ("Pareto", {"scale": [0.0], "alpha": [1.0]}),
    ("Cauchy", {"loc": [0.0], "scale": [0.0]}),
    ("StudentT", {"df": [-1.0]}),
    ("StudentT", {"df": [1.0], "scale": [-1.0]}),
    ("Geometric", {"probs": [0.0, 0.5]}),
    ("Geometric", {"probs": [1.5]}),
    ("NegativeBinomial", {"total_count": [-1.0], "probs": [0.5]}),
    ("NegativeBinomial", {"total_count": 2.0, "probs": [1.0]}),
    ("ContinuousBernoulli", {"probs": [1.5], "validate_args": True}),
    ("ContinuousBernoulli", {"logits": [float("nan")]}),
    ("LogisticNormal", {"loc": [0.0, 1.0], "scale": [1.0, -1.0]}),
    ("RelaxedBernoulli", {"temperature": [1.0], "probs": [1.5]}),
    ("RelaxedOneHotCategorical", {"temperature": [1.0], "probs": [0.5, -0.5]}),
    ("Multinomial", {"total_count": 3, "probs": [0.5, -0.5]}),
    ("Multinomial", {"total_count": 2.5, "probs": [0.5, 0.5]}),
    ("LowRankMultivariateNormal", {"loc": [0.0, 0.0], "cov_factor": [[1.0], [0.0]],
                                   "cov_diag": [1.0, -1.0]}),
    ("LowRankMultivariateNormal", {"loc": [0.0, 0.0], "cov_factor": [1.0, 0.0],
                                   "cov_diag": [1.0, 1.0]}),
    ("LowRankMultivariateNormal", {"loc": [0.0, 0.0], "cov_factor": [[1.0, 0.0]],
                                   "cov_diag": [1.0, 1.0]}),
    ("MixtureSameFamily", {"mix": [0.0, 0.0, 0.0], "loc": [0.0, 1.0], "scale": [1.0, 1.0]}),
]


@pytest.mark.parametrize("name,params", BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BAD)])
def test_invalid_parameters_raise_torch_error(name, params):
    _same_error(lambda: _ctor(name, jitgrad, **params), lambda: _ctor(name, torch, **params))


def test_validation_can_be_turned_off_like_torch():
    for name, params in BAD:
        if name in ("ContinuousBernoulli", "Multinomial", "LowRankMultivariateNormal",
                    "MixtureSameFamily", "RelaxedOneHotCategorical", "RelaxedBernoulli",
                    "HalfNormal", "HalfCauchy", "StudentT"):
            continue  # shape errors, or inner distributions PyTorch always validates
        params = {**params, "validate_args": False}
        _ctor(name, jitgrad, **params)
        _ctor(name, torch, **params)


OUT_OF_SUPPORT = [
    ("LogNormal", {"loc": [0.0], "scale": [1.0]}, [-0.5]),
    ("HalfNormal", {"scale": [1.0]}, [-0.5]),
    ("HalfCauchy", {"scale": [1.0]}, [-0.5]),
    ("Weibull", {"scale": [1.0], "concentration": [1.0]}, [0.0]),
    ("Pareto", {"scale": [2.0], "alpha": [1.0]}, [1.5]),
    ("Gumbel", {"loc": [0.0], "scale": [1.0]}, [float("nan")]),
    ("Geometric", {"probs": [0.5]}, [1.5]),
    ("NegativeBinomial", {"total_count": 3.0, "probs": [0.5]}, [-1.0]),
    ("ContinuousBernoulli", {"probs": [0.3]}, [1.5]),
    ("RelaxedBernoulli", {"temperature": [1.0], "probs": [0.3]}, [1.5]),
    ("RelaxedOneHotCategorical", {"temperature": [1.0], "probs": [0.3, 0.7]}, [0.5, 0.6]),
    ("LogisticNormal", {"loc": [0.0], "scale": [1.0]}, [0.3, 0.3]),
    ("Multinomial", {"total_count": 3, "probs": [0.3, 0.7]}, [-1.0, 2.0]),
    ("LowRankMultivariateNormal", {"loc": [0.0, 0.0], "cov_factor": [[1.0], [0.0]],
                                   "cov_diag": [1.0, 1.0]}, [0.0]),
    ("MixtureSameFamily", {"mix": [0.0, 0.0], "loc": [0.0, 1.0], "scale": [1.0, 1.0]},
     [float("nan")]),
]


@pytest.mark.parametrize("name,params,value", OUT_OF_SUPPORT,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(OUT_OF_SUPPORT)])
def test_values_outside_the_support_raise_torch_error(name, params, value):
    dj, dt = _ctor(name, jitgrad, **params), _ctor(name, torch, **params)
    _same_error(lambda: dj.log_prob(jitgrad.tensor(value)),
                lambda: dt.log_prob(torch.tensor(value)), ValueError)


REPRS = [
    ("LogNormal", {"loc": 0.0, "scale": 1.0}),
    ("HalfNormal", {"scale": [1.0, 2.0]}),
    ("Gumbel", {"loc": [0.5], "scale": [2.0]}),
    ("Weibull", {"scale": 1.0, "concentration": [1.0, 2.0]}),
    ("Pareto", {"scale": [1.0], "alpha": [2.0]}),
    ("Cauchy", {"loc": 0.0, "scale": [1.0, 3.0]}),
    ("StudentT", {"df": [3.0]}),
    ("Geometric", {"logits": [0.3]}),
    ("NegativeBinomial", {"total_count": 3.0, "probs": [0.3]}),
    ("ContinuousBernoulli", {"probs": 0.3}),
    ("Multinomial", {"total_count": 4, "probs": [0.3, 0.7]}),
    ("LowRankMultivariateNormal", {"loc": [0.0, 0.0], "cov_factor": [[1.0], [0.0]],
                                   "cov_diag": [1.0, 1.0]}),
    ("MixtureSameFamily", {"mix": [0.0, 0.0], "loc": [0.0, 1.0], "scale": [1.0, 1.0]}),
]


@pytest.mark.parametrize("name,params", REPRS, ids=[f"{n}-{i}" for i, (n, _) in
                                                    enumerate(REPRS)])
def test_repr_matches_torch(name, params):
    assert repr(_ctor(name, jitgrad, **params)) == repr(_ctor(name, torch, **params)).replace(
        "torch.", "jitgrad.")


EXPAND = [
    ("LogNormal", {"loc": [0.0, 1.0], "scale": [1.0, 2.0]}, (3, 2)),
    ("HalfNormal", {"scale": [1.0]}, (4,)),
    ("HalfCauchy", {"scale": [1.0]}, (4,)),
    ("Gumbel", {"loc": [0.0, 1.0], "scale": [1.0, 0.5]}, (2, 2)),
    ("Weibull", {"scale": [1.0], "concentration": [2.0]}, (3,)),
    ("Pareto", {"scale": [1.0], "alpha": [3.0]}, (3,)),
    ("Cauchy", {"loc": [0.0], "scale": [1.0]}, (2, 1)),
    ("StudentT", {"df": [5.0], "loc": [1.0]}, (3,)),
    ("Geometric", {"probs": [0.3]}, (3,)),
    ("NegativeBinomial", {"total_count": [3.0], "logits": [0.3]}, (3,)),
    ("ContinuousBernoulli", {"probs": [0.3]}, (3,)),
    ("LogisticNormal", {"loc": [0.0, 1.0], "scale": [1.0, 1.0]}, (3,)),
    ("RelaxedBernoulli", {"temperature": [0.5], "probs": [0.3]}, (3,)),
    ("RelaxedOneHotCategorical", {"temperature": [0.5], "probs": [0.3, 0.7]}, (3,)),
    ("Multinomial", {"total_count": 4, "probs": [0.3, 0.7]}, (3,)),
    ("LowRankMultivariateNormal", {"loc": [0.0, 0.0], "cov_factor": [[1.0], [0.0]],
                                   "cov_diag": [1.0, 1.0]}, (3,)),
    ("MixtureSameFamily", {"mix": [0.0, 0.0], "loc": [0.0, 1.0], "scale": [1.0, 1.0]}, (3,)),
]


@pytest.mark.parametrize("name,params,shape", EXPAND,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(EXPAND)])
def test_expand_matches_torch(name, params, shape, dh):
    params = {k: np.asarray(v, dtype=np.float64) if isinstance(v, list) else v
              for k, v in params.items()}
    dj, dt = _ctor(name, jitgrad, **params), _ctor(name, torch, **params)
    ej, et = dj.expand(shape), dt.expand(shape)
    assert type(ej) is type(dj)
    assert ej.batch_shape == tuple(et.batch_shape) and ej.event_shape == tuple(et.event_shape)
    assert ej._validate_args == dj._validate_args
    s = et.sample((2,))
    dh.assert_close(ej.log_prob(jitgrad.tensor(s.numpy())), et.log_prob(s), np.float64)
    assert ej.sample((2,)).shape == tuple(s.shape)
    for prop in ("mean", "variance"):
        try:
            want = getattr(et, prop)
        except NotImplementedError:
            continue
        dh.assert_close(getattr(ej, prop), want, np.float64, prop)


# ------------------------------------------------------------------------- sampling

def _mixture(lib):
    D = _mod(lib)
    return D.MixtureSameFamily(D.Categorical(probs=lib.tensor([0.3, 0.7], dtype=lib.float64)),
                               D.Normal(lib.tensor([-2.0, 1.0], dtype=lib.float64),
                                        lib.tensor([0.5, 1.0], dtype=lib.float64)))


SAMPLED = {
    "LogNormal": {"loc": [0.0, 0.5], "scale": [0.25, 0.5]},
    "HalfNormal": {"scale": [0.5, 2.0]},
    "Gumbel": {"loc": [0.0, 3.0], "scale": [1.0, 0.5]},
    "Weibull": {"scale": [1.0, 2.0], "concentration": [1.5, 3.0]},
    "Pareto": {"scale": [1.0, 0.5], "alpha": [5.0, 9.0]},
    "StudentT": {"df": [6.0, 10.0], "loc": [0.0, 1.0], "scale": [1.0, 2.0]},
    "Geometric": {"probs": [0.3, 0.8]},
    "NegativeBinomial": {"total_count": [3.0, 0.5], "probs": [0.4, 0.2]},
    "ContinuousBernoulli": {"probs": [0.2, 0.9]},
    "Multinomial": {"total_count": 6, "probs": [0.2, 0.3, 0.5]},
    "LowRankMultivariateNormal": {"loc": [0.0, 1.0], "cov_factor": [[1.0], [0.5]],
                                  "cov_diag": [0.5, 1.0]},
    "MixtureSameFamily": None,
    "HalfCauchy": {"scale": [1.0, 2.0]},
    "Cauchy": {"loc": [0.0, 1.0], "scale": [1.0, 0.5]},
    "RelaxedBernoulli": {"temperature": [0.5], "probs": [0.2, 0.7]},
    "RelaxedOneHotCategorical": {"temperature": [0.5], "probs": [0.2, 0.3, 0.5]},
    "LogisticNormal": {"loc": [0.0, 1.0], "scale": [1.0, 0.5]},
}
NO_MOMENTS = ("HalfCauchy", "Cauchy", "RelaxedBernoulli", "RelaxedOneHotCategorical",
              "LogisticNormal")


def _sampled(name, lib):
    if name == "MixtureSameFamily":
        return _mixture(lib)
    return _ctor(name, lib, **{k: np.asarray(v, dtype=np.float64) if isinstance(v, list)
                               else v for k, v in SAMPLED[name].items()})


@pytest.mark.parametrize("name", sorted(SAMPLED))
def test_sample_shapes_support_and_reproducibility(name):
    dj, dt = _sampled(name, jitgrad), _sampled(name, torch)
    assert dj.has_rsample == dt.has_rsample
    assert dj.has_enumerate_support == dt.has_enumerate_support
    for shape in ((), (5,), (2, 3)):
        s, st = dj.sample(shape), dt.sample(shape)
        assert s.shape == tuple(st.shape) and s.dtype.np == st.numpy().dtype
        assert not s.requires_grad
        assert bool(dj.support.check(s).all())
        if dj.has_rsample:
            assert dj.rsample(shape).shape == tuple(st.shape)
    jitgrad.manual_seed(5)
    a = dj.sample((4,)).numpy()
    jitgrad.manual_seed(5)
    np.testing.assert_array_equal(dj.sample((4,)).numpy(), a)


@pytest.mark.parametrize("name", sorted(set(SAMPLED) - set(NO_MOMENTS)))
def test_sample_moments(name):
    """Sample mean and variance within 6 standard errors of PyTorch's analytic ones."""
    dj, dt = _sampled(name, jitgrad), _sampled(name, torch)
    n = 40000
    jitgrad.manual_seed(2024)
    s = dj.sample((n,)).numpy()
    mean, var = dt.mean.numpy(), dt.variance.numpy()
    assert np.all(np.abs(s.mean(0) - mean) <= 6 * np.sqrt(var / n) + 1e-12), (s.mean(0), mean)
    m4 = ((s - s.mean(0)) ** 4).mean(0)
    se_var = np.sqrt(np.maximum(m4 - var**2, 0) / n)
    assert np.all(np.abs(s.var(0) - var) <= 6 * se_var + 1e-12), (s.var(0), var)


@pytest.mark.parametrize("name", ["Cauchy", "HalfCauchy"])
def test_heavy_tailed_sample_quantiles(name):
    dj = _sampled(name, jitgrad)
    jitgrad.manual_seed(7)
    s = dj.sample((40000,)).numpy()
    for q in (0.25, 0.5, 0.75):
        emp = (s <= dj.icdf(jitgrad.tensor(q, dtype=jitgrad.float64)).numpy()).mean(0)
        assert np.all(np.abs(emp - q) < 6 * np.sqrt(q * (1 - q) / s.shape[0])), (q, emp)


def test_relaxed_samples_concentrate_at_low_temperature():
    jitgrad.manual_seed(3)
    p = jitgrad.tensor([0.2, 0.3, 0.5], dtype=jitgrad.float64)
    s = jd.RelaxedOneHotCategorical(jitgrad.tensor(0.05, dtype=jitgrad.float64),
                                    probs=p).sample((20000,)).numpy()
    assert np.all(np.abs(s.sum(-1) - 1) < 1e-12)
    # argmax frequencies are the categorical probabilities (Gumbel-max)
    freq = np.bincount(s.argmax(-1), minlength=3) / s.shape[0]
    np.testing.assert_allclose(freq, p.numpy(), atol=0.02)
    b = jd.RelaxedBernoulli(jitgrad.tensor(0.05, dtype=jitgrad.float64),
                            probs=jitgrad.tensor([0.3], dtype=jitgrad.float64)).sample((20000,))
    assert abs((b.numpy() > 0.5).mean() - 0.3) < 0.02


RSAMPLED = ["LogNormal", "HalfNormal", "HalfCauchy", "Gumbel", "Weibull", "Pareto", "Cauchy",
            "StudentT", "ContinuousBernoulli", "RelaxedBernoulli", "RelaxedOneHotCategorical",
            "LogisticNormal", "LowRankMultivariateNormal"]


@pytest.mark.parametrize("name", RSAMPLED)
def test_rsample_gradients_flow_to_every_parameter(name):
    params = {k: jitgrad.tensor(np.asarray(v, dtype=np.float64), requires_grad=True)
              if isinstance(v, list) else v for k, v in SAMPLED[name].items()}
    d = getattr(jd, name)(**params)
    assert d.has_rsample
    jitgrad.manual_seed(1)
    x = d.rsample((50,))
    assert x.requires_grad
    x.sum().backward()
    for k, p in params.items():
        if isinstance(p, jitgrad.Tensor):
            assert p.grad is not None and np.all(np.isfinite(p.grad.numpy())), k


def test_location_scale_rsample_gradients_are_the_standardised_noise():
    for name in ("Gumbel", "Cauchy", "StudentT"):
        loc = jitgrad.tensor([0.5, -1.0], dtype=jitgrad.float64, requires_grad=True)
        scale = jitgrad.tensor([2.0, 0.5], dtype=jitgrad.float64, requires_grad=True)
        kw = {"df": jitgrad.tensor([4.0, 7.0], dtype=jitgrad.float64)} if name == "StudentT" \
            else {}
        d = getattr(jd, name)(loc=loc, scale=scale, **kw)
        jitgrad.manual_seed(4)
        x = d.rsample((7,))
        x.sum().backward()
        np.testing.assert_allclose(loc.grad.numpy(), [7.0, 7.0])
        z = (x.detach() - loc.detach()) / scale.detach()
        np.testing.assert_allclose(scale.grad.numpy(), z.numpy().sum(0), rtol=1e-10)


def test_mixture_sample_selects_components():
    d = _mixture(jitgrad)
    jitgrad.manual_seed(0)
    s = d.sample((20000,)).numpy()
    for x in (-2.0, -0.7, 1.0):
        want = d.cdf(jitgrad.tensor(x, dtype=jitgrad.float64)).item()
        assert abs((s <= x).mean() - want) < 6 * np.sqrt(want * (1 - want) / s.size)
    comp = jd.Independent(jd.Normal(jitgrad.zeros(2, 3, 4), 1.0), 1)
    mix = jd.MixtureSameFamily(jd.Categorical(logits=jitgrad.zeros(2, 3)), comp)
    assert mix.sample((5,)).shape == (5, 2, 4)
    assert mix.log_prob(mix.sample((5,))).shape == (5, 2)
