"""Argument validation (PyTorch's exception types and messages), the default-validation
switch, ``repr``, ``expand`` and the constraints."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402
import jitgrad.distributions as jd  # noqa: E402
from jitgrad.distributions import constraints  # noqa: E402


def _same_error(build_j, build_t, exc=ValueError):
    with pytest.raises(exc) as ej:
        build_j()
    with pytest.raises(exc) as et:
        build_t()
    assert type(ej.value) is type(et.value)
    # jitgrad's tensors print as PyTorch's, with "jitgrad." for "torch."
    assert str(ej.value) == str(et.value).replace("torch.", "jitgrad.")
    return str(ej.value)


def _ctor(name, lib, **params):
    mod = jd if lib is jitgrad else torch.distributions
    return getattr(mod, name)(**{k: lib.tensor(v) if isinstance(v, (list, np.ndarray)) else v
                                 for k, v in params.items()})


BAD = [
    ("Normal", {"loc": [0.0, 1.0], "scale": [1.0, -1.0]}),
    ("Normal", {"loc": [0.0, float("nan")], "scale": [1.0, 1.0]}),
    ("Normal", {"loc": 0.0, "scale": -1.0}),
    ("Normal", {"loc": [0.5], "scale": [0.0]}),
    ("Uniform", {"low": [0.0, 1.0], "high": [1.0, 0.5]}),
    ("Uniform", {"low": 1.0, "high": 0.0}),
    ("Exponential", {"rate": [[1.0, 0.0]]}),
    ("Laplace", {"loc": [0.0], "scale": [-2.0]}),
    ("Bernoulli", {"probs": [0.5, 1.5]}),
    ("Bernoulli", {"logits": [0.5, float("nan")]}),
    ("Categorical", {"probs": [[0.5, -0.5, 1.0]]}),
    ("Categorical", {"logits": [0.0, float("nan")]}),
    ("OneHotCategorical", {"probs": [0.5, -0.5, 1.0]}),
    ("Gamma", {"concentration": [1.0, -1.0], "rate": 1.0}),
    ("Chi2", {"df": [-1.0]}),
    ("Beta", {"concentration1": [1.0], "concentration0": [0.0]}),
    ("Dirichlet", {"concentration": [[1.0, 0.0]]}),
    ("Poisson", {"rate": [-1.0]}),
    ("Binomial", {"total_count": 10, "probs": [1.2]}),
    ("Binomial", {"total_count": [2.5], "probs": [0.2]}),
]


@pytest.mark.parametrize("name,params", BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BAD)])
def test_invalid_parameters_raise_torch_message(name, params):
    msg = _same_error(lambda: _ctor(name, jitgrad, **params),
                      lambda: _ctor(name, torch, **params))
    assert msg.startswith("Expected parameter ")
    # validate_args=False: no check (OneHotCategorical's inner Categorical still checks,
    # as in PyTorch)
    _same_outcome(lambda: _ctor(name, jitgrad, **params, validate_args=False),
                  lambda: _ctor(name, torch, **params, validate_args=False))


def _same_outcome(fj, ft):
    """Both calls succeed, or both raise the same exception type."""
    errs = []
    for f in (fj, ft):
        try:
            f()
            errs.append(None)
        except Exception as e:  # noqa: BLE001 - compared below
            errs.append(type(e))
    assert errs[0] is errs[1], errs


def test_message_text_for_the_documented_example():
    msg = _same_error(lambda: jd.Normal(jitgrad.tensor([0.0, 1.0]), jitgrad.tensor([1.0, -1.0])),
                      lambda: torch.distributions.Normal(torch.tensor([0.0, 1.0]),
                                                         torch.tensor([1.0, -1.0])))
    assert msg == ("Expected parameter scale (Tensor of shape (2,)) of distribution "
                   "Normal(loc: jitgrad.Size([2]), scale: jitgrad.Size([2])) to satisfy the "
                   "constraint GreaterThan(lower_bound=0.0), but found invalid values:\n"
                   "tensor([ 1., -1.])")


OUT_OF_SUPPORT = [
    ("Normal", {"loc": [0.0, 1.0], "scale": [1.0, 1.0]}, [float("nan"), 0.0]),
    ("Exponential", {"rate": [1.0]}, [-0.5]),
    ("Uniform", {"low": [0.0], "high": [1.0]}, [1.5]),
    ("Bernoulli", {"probs": [0.3, 0.3]}, [0.5, 1.0]),
    ("Categorical", {"probs": [0.5, 0.5]}, [2]),
    ("Categorical", {"probs": [0.5, 0.5]}, [0.5]),
    ("OneHotCategorical", {"probs": [0.5, 0.5]}, [1.0, 1.0]),
    ("Gamma", {"concentration": [1.0], "rate": [1.0]}, [-1.0]),
    ("Beta", {"concentration1": [1.0], "concentration0": [1.0]}, [1.5]),
    ("Poisson", {"rate": [1.0]}, [0.5]),
    ("Binomial", {"total_count": 3, "probs": [0.5]}, [4.0]),
    ("Dirichlet", {"concentration": [1.0, 1.0]}, [0.3, 0.3]),
]


@pytest.mark.parametrize("name,params,value", OUT_OF_SUPPORT,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(OUT_OF_SUPPORT)])
def test_values_outside_the_support_raise_torch_message(name, params, value):
    dj, dt = _ctor(name, jitgrad, **params), _ctor(name, torch, **params)
    msg = _same_error(lambda: dj.log_prob(jitgrad.tensor(value)),
                      lambda: dt.log_prob(torch.tensor(value)))
    assert msg.startswith("Expected value argument")
    _same_outcome(
        lambda: _ctor(name, jitgrad, **params, validate_args=False).log_prob(
            jitgrad.tensor(value)),
        lambda: _ctor(name, torch, **params, validate_args=False).log_prob(torch.tensor(value)))


def test_value_shape_errors_match_torch():
    dj = jd.MultivariateNormal(jitgrad.zeros(3), jitgrad.eye(3))
    dt = torch.distributions.MultivariateNormal(torch.zeros(3), torch.eye(3))
    _same_error(lambda: dj.log_prob(jitgrad.zeros(2)), lambda: dt.log_prob(torch.zeros(2)))
    nj, nt = jd.Normal(jitgrad.zeros(3), 1.0), torch.distributions.Normal(torch.zeros(3), 1.0)
    _same_error(lambda: nj.log_prob(jitgrad.zeros(2)), lambda: nt.log_prob(torch.zeros(2)))
    _same_error(lambda: nj.log_prob([0.0]), lambda: nt.log_prob([0.0]))


def test_set_default_validate_args():
    jd.Distribution.set_default_validate_args(False)
    d = jd.Normal(0.0, -1.0)  # no check
    assert d.scale.item() == -1.0
    assert jd.Normal(0.0, 1.0)._validate_args is False
    with pytest.raises(ValueError):
        jd.Normal(0.0, -1.0, validate_args=True)
    jd.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        jd.Normal(0.0, -1.0)
    with pytest.raises(ValueError):
        jd.Distribution.set_default_validate_args("yes")


REPRS = [
    ("Normal", {"loc": 0.0, "scale": 1.0}),
    ("Normal", {"loc": [0.5], "scale": [2.0]}),
    ("Normal", {"loc": [0.0, 1.0], "scale": 1.0}),
    ("Uniform", {"low": 0.0, "high": 2.0}),
    ("Bernoulli", {"logits": [[0.3, 0.1]]}),
    ("Categorical", {"probs": [0.2, 0.8]}),
    ("OneHotCategorical", {"logits": [0.2, 0.8]}),
    ("Exponential", {"rate": 0.5}),
    ("Laplace", {"loc": [0.0, 1.0], "scale": [1.0, 2.0]}),
    ("MultivariateNormal", {"loc": [0.0, 1.0], "scale_tril": [[1.0, 0.0], [0.5, 1.0]]}),
    ("Gamma", {"concentration": 2.0, "rate": [1.0, 3.0]}),
    ("Beta", {"concentration1": 0.5, "concentration0": 0.5}),
    ("Dirichlet", {"concentration": [1.0, 2.0]}),
    ("Poisson", {"rate": [[1.0]]}),
    ("Binomial", {"total_count": 5, "probs": [0.3]}),
    ("Chi2", {"df": [3.0]}),
]


@pytest.mark.parametrize("name,params", REPRS, ids=[f"{n}-{i}" for i, (n, _) in
                                                    enumerate(REPRS)])
def test_repr_matches_torch(name, params):
    r = repr(_ctor(name, jitgrad, **params))
    assert r == repr(_ctor(name, torch, **params)).replace("torch.", "jitgrad.")


def test_repr_of_independent_and_constraints():
    d = jd.Independent(jd.Normal(jitgrad.zeros(2, 3), 1.0), 2)
    assert repr(d) == ("Independent(Normal(loc: jitgrad.Size([2, 3]), scale: "
                       "jitgrad.Size([2, 3])), 2)")
    for name in ("real", "positive", "unit_interval", "simplex", "real_vector",
                 "lower_cholesky", "positive_definite", "nonnegative_integer", "boolean",
                 "one_hot", "nonnegative", "corr_cholesky"):
        assert repr(getattr(constraints, name)) == repr(getattr(torch.distributions.constraints,
                                                                name))
    assert repr(constraints.interval(0.0, 2.5)) == "Interval(lower_bound=0.0, upper_bound=2.5)"
    assert repr(constraints.integer_interval(0, 3)) == repr(
        torch.distributions.constraints.integer_interval(0, 3))


EXPAND = [
    ("Normal", {"loc": np.array([0.0, 1.0]), "scale": np.array([1.0, 2.0])}, (3, 2)),
    ("Uniform", {"low": np.array([0.0]), "high": np.array([2.0])}, (4,)),
    ("Exponential", {"rate": np.array([1.0, 3.0])}, (2, 2)),
    ("Laplace", {"loc": np.array(0.0), "scale": np.array(1.0)}, (3,)),
    ("Bernoulli", {"probs": np.array([0.3, 0.6])}, (5, 2)),
    ("Bernoulli", {"logits": np.array([0.3, 0.6])}, (5, 2)),
    ("Categorical", {"logits": np.array([0.0, 1.0, 2.0])}, (4,)),
    ("OneHotCategorical", {"probs": np.array([0.2, 0.8])}, (3,)),
    ("MultivariateNormal", {"loc": np.zeros(2), "covariance_matrix": np.eye(2) * 2}, (3,)),
    ("Gamma", {"concentration": np.array([2.0]), "rate": np.array([1.0])}, (3,)),
    ("Chi2", {"df": np.array([2.0])}, (3,)),
    ("Beta", {"concentration1": np.array([2.0]), "concentration0": np.array([1.0])}, (2, 1)),
    ("Dirichlet", {"concentration": np.array([1.0, 2.0])}, (3,)),
    ("Poisson", {"rate": np.array([2.0])}, (3,)),
    ("Binomial", {"total_count": np.array([4.0]), "probs": np.array([0.3])}, (3,)),
]


@pytest.mark.parametrize("name,params,shape", EXPAND,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(EXPAND)])
def test_expand_matches_torch(name, params, shape, dh):
    dj, _ = dh.make(jitgrad, name, params, np.float64, grad=False)
    dt, _ = dh.make(torch, name, params, np.float64, grad=False)
    ej, et = dj.expand(shape), dt.expand(shape)
    assert type(ej) is type(dj)
    assert ej.batch_shape == tuple(et.batch_shape) and ej.event_shape == tuple(et.event_shape)
    assert ej._validate_args == dj._validate_args
    s = et.sample((2,))
    dh.assert_close(ej.log_prob(jitgrad.tensor(s.numpy())), et.log_prob(s), np.float64)
    assert ej.sample((2,)).shape == tuple(s.shape)
    for prop in ("mean", "variance"):
        dh.assert_close(getattr(ej, prop), getattr(et, prop), np.float64, prop)


def test_expand_independent_and_subclass_rule():
    d = jd.Independent(jd.Normal(jitgrad.zeros(3), 1.0), 1).expand((4,))
    assert d.batch_shape == (4,) and d.event_shape == (3,)
    assert d.base_dist.batch_shape == (4, 3)

    class MyNormal(jd.Normal):
        def __init__(self, loc):
            super().__init__(loc, 1.0)

    with pytest.raises(NotImplementedError, match="must also define a custom .expand"):
        MyNormal(jitgrad.zeros(2)).expand((3, 2))


@pytest.mark.parametrize("name", ["real", "positive", "nonnegative", "unit_interval",
                                  "boolean", "nonnegative_integer", "positive_integer",
                                  "simplex", "real_vector", "one_hot", "lower_triangular",
                                  "lower_cholesky", "positive_definite",
                                  "positive_semidefinite", "symmetric", "square",
                                  "corr_cholesky"])
def test_constraint_checks_match_torch(name):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 2, 2))
    values = [rng.normal(size=(4, 3)), np.abs(rng.normal(size=(4, 3))), np.array([0.0, 1.0, 0.5]),
              np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([[0.25, 0.75], [0.2, 0.3]]),
              a @ np.swapaxes(a, -1, -2) + np.eye(2), a, np.tril(np.abs(a)) + np.eye(2),
              np.array([[1.0, 0.0], [0.6, 0.8]]), np.array([np.nan, 1.0, 2.0, -1.0])]
    cj, ct = getattr(constraints, name), getattr(torch.distributions.constraints, name)
    assert cj.is_discrete == ct.is_discrete and cj.event_dim == ct.event_dim
    for v in values:
        if v.ndim < ct.event_dim or (ct.event_dim == 2 and v.shape[-1] != v.shape[-2]
                                     and name not in ("square",)):
            continue
        np.testing.assert_array_equal(cj.check(jitgrad.tensor(v)).numpy(),
                                      ct.check(torch.tensor(v)).numpy(), err_msg=str(v))


def test_dependent_constraints():
    assert constraints.is_dependent(jd.Uniform.support)
    assert constraints.is_dependent(jd.Categorical.arg_constraints.get("x",
                                                                       constraints.dependent))
    assert not constraints.is_dependent(constraints.real)
    with pytest.raises(ValueError, match="Cannot determine validity"):
        constraints.dependent.check(jitgrad.zeros(1))
    assert jd.Uniform.support.is_discrete is False and jd.Uniform.support.event_dim == 0
    assert repr(jd.Uniform(0.0, 1.0).support) == repr(torch.distributions.Uniform(0.0,
                                                                                  1.0).support)
    assert jd.Categorical(probs=jitgrad.ones(3)).support.upper_bound == 2


@pytest.mark.parametrize("diag", [-1, 0, 1])
def test_tril_vector_helpers_match_torch(diag):
    from torch.distributions import utils as tu

    from jitgrad.distributions import utils as ju

    m = np.random.default_rng(0).normal(size=(2, 4, 4))
    v = ju.tril_matrix_to_vec(jitgrad.tensor(m), diag)
    np.testing.assert_array_equal(v.numpy(), tu.tril_matrix_to_vec(torch.tensor(m), diag))
    np.testing.assert_array_equal(ju.vec_to_tril_matrix(v, diag).numpy(),
                                  tu.vec_to_tril_matrix(torch.tensor(v.numpy()), diag))
    p = np.array([0.0, 0.3, 1.0])
    np.testing.assert_array_equal(ju.probs_to_logits(jitgrad.tensor(p), True).numpy(),
                                  tu.probs_to_logits(torch.tensor(p), True).numpy())
    np.testing.assert_array_equal(ju.clamp_probs(jitgrad.tensor(p)).numpy(),
                                  tu.clamp_probs(torch.tensor(p)).numpy())
