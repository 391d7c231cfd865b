"""Transforms, ``biject_to`` / ``transform_to`` and ``TransformedDistribution`` without
PyTorch: round trips ``t.inv(t(x)) == x``, outputs inside the codomain,
``log_abs_det_jacobian`` against the log determinant of the Jacobian that jitgrad's
autograd computes, caching, inverses and composition, shapes, and a compiled training
step with a tanh-squashed normal policy and a LogNormal equal to eager."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import jitgrad
import jitgrad.distributions as jd
from jitgrad.autograd.functional import jacobian
from jitgrad.distributions import biject_to, constraints, transform_to
from jitgrad.distributions import transforms as T
from jitgrad.distributions.utils import tril_matrix_to_vec

F64 = jitgrad.float64


def _t(a) -> jitgrad.Tensor:
    return jitgrad.tensor(np.asarray(a, dtype=np.float64))


def _rng():
    return np.random.default_rng(0)


# name -> (transform, an input in its domain of shape (4, 3) or with its event dims)
def _cases():
    r = _rng()
    pos = r.uniform(0.2, 3.0, (4, 3))
    real = r.normal(size=(4, 3))
    return {
        "exp": (T.ExpTransform(), real),
        "affine-number": (T.AffineTransform(1.5, -2.0), real),
        "affine-tensor": (T.AffineTransform(_t(r.normal(size=3)), _t(pos[0])), real),
        "affine-event": (T.AffineTransform(0.5, _t(pos[0]), event_dim=1), real),
        "sigmoid": (T.SigmoidTransform(), real),
        "softplus": (T.SoftplusTransform(), real),
        "tanh": (T.TanhTransform(), real),
        "power": (T.PowerTransform(_t([0.5, 2.0, -1.5])), pos),
        "exp-inverse": (T.ExpTransform().inv, pos),
        "compose": (T.ComposeTransform([T.ExpTransform(), T.AffineTransform(0.5, 3.0),
                                        T.PowerTransform(2.0)]), real),
        "stick-breaking": (T.StickBreakingTransform(), real),
        "independent": (T.IndependentTransform(T.SigmoidTransform(), 1), real),
        "reshape": (T.ReshapeTransform((3,), (3, 1)), real),
        "corr-cholesky": (T.CorrCholeskyTransform(), real),
        "cat": (T.CatTransform([T.ExpTransform(), T.identity_transform], dim=-1,
                               lengths=[2, 1]), real),
        "stack": (T.StackTransform([T.ExpTransform(), T.SigmoidTransform(),
                                    T.AffineTransform(0.0, 2.0)], dim=-1), real),
        "identity": (T.identity_transform, real),
        "cdf-normal": (T.CumulativeDistributionTransform(jd.Normal(_t(0.5), _t(2.0))), real),
    }


CASES = sorted(_cases())


@pytest.mark.parametrize("case", CASES)
def test_round_trip_and_codomain(case):
    t, x = _cases()[case]
    x = _t(x)
    y = t(x)
    assert tuple(y.shape) == tuple(t.forward_shape(x.shape))
    assert tuple(t.inverse_shape(y.shape)) == tuple(x.shape)
    assert bool(t.codomain.check(y).all())
    assert bool(t.domain.check(x).all())
    np.testing.assert_allclose(t.inv(y).numpy(), x.numpy(), rtol=1e-9, atol=1e-9)
    assert t.bijective
    assert t.inv.inv is t


def _event_jacobian(t, x_event):
    """The Jacobian of ``t`` at one event ``x_event`` (a vector), restricted to the output
    coordinates that parameterise the codomain (a square matrix)."""
    def f(v):
        y = t(v)
        if isinstance(t, T.StickBreakingTransform):
            y = y[..., :-1]  # the simplex's free coordinates
        if isinstance(t, T.CorrCholeskyTransform):
            y = tril_matrix_to_vec(y, diag=-1)
        return y.reshape(-1)
    return jacobian(f, x_event)


@pytest.mark.parametrize("case", CASES)
def test_log_abs_det_jacobian_against_autograd(case):
    t, x = _cases()[case]
    x = _t(x).requires_grad_()
    y = t(x)
    ladj = t.log_abs_det_jacobian(x, y)
    # StackTransform's domain counts the stacked dimension as an event dimension (as
    # PyTorch's), but its log-Jacobian is element-wise
    event_dim = 0 if isinstance(t, T.StackTransform) else t.domain.event_dim
    assert tuple(ladj.shape) == tuple(x.shape[:x.dim() - event_dim])
    if event_dim == 0:  # element-wise: the Jacobian is diagonal
        (dy_dx,) = jitgrad.autograd.grad(y.sum(), [x])
        expected = np.log(np.abs(dy_dx.numpy()))
    else:
        expected = [jitgrad.linalg.slogdet(_event_jacobian(t, e.detach())).logabsdet.item()
                    for e in x]
    np.testing.assert_allclose(ladj.detach().numpy(), np.reshape(expected, ladj.shape),
                               rtol=1e-7, atol=1e-9)


def test_inverse_jacobian_is_minus_forward():
    t = T.TanhTransform()
    x = _t(_rng().normal(size=5))
    y = t(x)
    np.testing.assert_allclose(t.inv.log_abs_det_jacobian(y, x).numpy(),
                               -t.log_abs_det_jacobian(x, y).numpy())


def test_cache_returns_the_cached_input():
    x = _t([0.3, -0.2])
    for cache_size, same in ((0, False), (1, True)):
        t = T.TanhTransform(cache_size=cache_size)
        y = t(x)
        assert (t.inv(y) is x) is same
        assert (t(x) is y) is same
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        T.ExpTransform(cache_size=2)
    t = T.ExpTransform()
    assert t.with_cache(0) is t and t.with_cache(1)._cache_size == 1
    c = T.ComposeTransform([T.ExpTransform(), T.AffineTransform(0.0, 2.0)], cache_size=1)
    assert all(p._cache_size == 1 for p in c.parts)
    assert T.AffineTransform(1.0, 2.0).with_cache(1)._cache_size == 1
    with pytest.raises(NotImplementedError, match="with_cache is not implemented"):
        type("MyT", (T.Transform,), {"__init__": lambda self: T.Transform.__init__(self)})(
        ).with_cache(1)


def test_equality_sign_and_repr():
    assert T.ExpTransform() == T.ExpTransform() and T.ExpTransform() != T.SigmoidTransform()
    assert T.ExpTransform().inv == T.ExpTransform().inv
    assert T.AffineTransform(1.0, 2.0) == T.AffineTransform(1.0, 2.0)
    assert T.AffineTransform(_t([1.0]), 2.0) != T.AffineTransform(_t([1.5]), 2.0)
    assert T.ComposeTransform([T.ExpTransform()]) == T.ComposeTransform([T.ExpTransform()])
    assert T.PowerTransform(2.0) == T.PowerTransform(2.0)
    assert T.AffineTransform(0.0, -3.0).sign == -1
    assert T.ComposeTransform([T.AffineTransform(0.0, -1.0), T.ExpTransform(),
                               T.AffineTransform(0.0, -2.0)]).sign == 1
    assert T.ExpTransform().inv.sign == 1
    assert T.PowerTransform(_t([-1.0, 2.0])).sign.tolist() == [-1.0, 1.0]
    with pytest.raises(NotImplementedError):
        T.AbsTransform().sign  # noqa: B018
    assert repr(T.ExpTransform().inv) == "_InverseTransform(ExpTransform())"
    assert repr(T.ComposeTransform([T.ExpTransform(), T.TanhTransform()])) == (
        "ComposeTransform(\n    ExpTransform(),\n    TanhTransform()\n)")
    assert repr(T.IndependentTransform(T.ExpTransform(), 2)) == (
        "IndependentTransform(ExpTransform(), 2)")
    assert T.identity_transform(_t([1.0])).tolist() == [1.0]
    assert T.identity_transform.bijective and T.identity_transform.event_dim == 0


def test_event_dims_of_compositions():
    t = T.ComposeTransform([T.ExpTransform(), T.StickBreakingTransform()])
    assert t.domain.event_dim == 1 and t.codomain.event_dim == 1
    t = T.ComposeTransform([T.ReshapeTransform((4,), (2, 2)), T.ExpTransform()])
    assert t.domain.event_dim == 1 and t.codomain.event_dim == 2
    with pytest.raises(ValueError, match="Please use either"):
        t.event_dim  # noqa: B018
    x = _t(_rng().normal(size=(3, 4)))
    # the ExpTransform's element-wise terms summed over both event dimensions
    np.testing.assert_allclose(t.log_abs_det_jacobian(x, t(x)).numpy(), x.sum(-1).numpy())
    assert T.AffineTransform(0.0, 1.0, event_dim=2).domain.event_dim == 2


def test_shape_errors():
    with pytest.raises(ValueError, match="different numbers of elements"):
        T.ReshapeTransform((2, 3), (5,))
    with pytest.raises(ValueError, match="Shape mismatch"):
        T.ReshapeTransform((2, 3), (6,)).forward_shape((4, 3, 2))
    with pytest.raises(ValueError, match="Too few dimensions"):
        T.StickBreakingTransform().forward_shape(())
    with pytest.raises(ValueError, match="flattened lower-diagonal"):
        T.CorrCholeskyTransform().forward_shape((4,))
    assert T.CorrCholeskyTransform().forward_shape((2, 6)) == (2, 4, 4)
    assert T.CorrCholeskyTransform().inverse_shape((2, 4, 4)) == (2, 6)
    assert tuple(T.AffineTransform(_t(np.zeros((2, 1))), 1.0).forward_shape((3,))) == (2, 3)
    with pytest.raises(ValueError, match="Too few dimensions on input"):
        T.IndependentTransform(T.ExpTransform(), 2)(_t([1.0]))


def test_non_bijective_transforms_are_pseudo_inverses():
    x = _t(_rng().normal(size=(2, 4)))
    for t in (T.AbsTransform(), T.SoftmaxTransform()):
        assert not t.bijective
        y = t(x)
        np.testing.assert_allclose(t(t.inv(y)).numpy(), y.numpy(), rtol=1e-12)
        assert bool(t.codomain.check(y).all())
    lc = T.LowerCholeskyTransform()
    m = _t(_rng().normal(size=(2, 3, 3)))
    L = lc(m)
    assert bool(constraints.lower_cholesky.check(L).all())
    np.testing.assert_allclose(lc.inv(L).numpy(), np.tril(m.numpy()), rtol=1e-12)
    pd = T.PositiveDefiniteTransform()(m)
    assert bool(constraints.positive_definite.check(pd).all())
    np.testing.assert_allclose(T.PositiveDefiniteTransform().inv(pd).numpy(),
                               np.tril(m.numpy()), rtol=1e-9, atol=1e-12)


CONSTRAINTS = [
    ("real", constraints.real, (3,)),
    ("positive", constraints.positive, (3,)),
    ("nonnegative", constraints.nonnegative, (3,)),
    ("greater_than", constraints.greater_than(-2.5), (3,)),
    ("greater_than_eq", constraints.greater_than_eq(1.0), (3,)),
    ("less_than", constraints.less_than(4.0), (3,)),
    ("unit_interval", constraints.unit_interval, (3,)),
    ("interval", constraints.interval(-1.0, 3.0), (3,)),
    ("half_open_interval", constraints.half_open_interval(0.5, 2.0), (3,)),
    ("simplex", constraints.simplex, (2, 3)),
    ("real_vector", constraints.real_vector, (2, 3)),
    ("independent-positive", constraints.independent(constraints.positive, 1), (2, 3)),
    ("corr_cholesky", constraints.corr_cholesky, (2, 3)),
    ("cat", constraints.cat([constraints.positive, constraints.real], dim=-1,
                            lengths=[2, 1]), (2, 3)),
    ("stack", constraints.stack([constraints.positive, constraints.unit_interval,
                                 constraints.real], dim=-1), (2, 3)),
]


@pytest.mark.parametrize("name,constraint,shape", CONSTRAINTS,
                         ids=[c[0] for c in CONSTRAINTS])
def test_biject_to_and_transform_to_land_in_the_constraint(name, constraint, shape):
    x = _t(_rng().normal(size=shape))
    for registry in (biject_to, transform_to):
        t = registry(constraint)
        y = t(x)
        assert bool(constraint.check(y).all()), (registry, y)
        if registry is biject_to or name not in ("simplex",):
            np.testing.assert_allclose(t.inv(y).numpy(), x.numpy(), rtol=1e-8, atol=1e-9)
    assert isinstance(transform_to(constraints.simplex), T.SoftmaxTransform)
    assert isinstance(biject_to(constraints.simplex), T.StickBreakingTransform)


def test_registry_for_matrices_and_errors():
    m = _t(_rng().normal(size=(3, 3)))
    assert bool(constraints.lower_cholesky.check(transform_to(constraints.lower_cholesky)(m)))
    assert bool(constraints.positive_definite.check(
        transform_to(constraints.positive_definite)(m)))
    with pytest.raises(NotImplementedError, match="Cannot transform _LowerCholesky"):
        biject_to(constraints.lower_cholesky)
    with pytest.raises(TypeError, match="Expected constraint to be either"):
        biject_to.register(int, lambda c: T.identity_transform)
    registry = type(biject_to)()

    @registry.register(constraints.positive)
    def _softplus(constraint):
        return T.SoftplusTransform()

    assert isinstance(registry(constraints.positive), T.SoftplusTransform)
    assert isinstance(biject_to(jd.Normal.arg_constraints["scale"]), T.ComposeTransform)


# ------------------------------------------------------------ TransformedDistribution

def test_transformed_normal_is_lognormal():
    loc, scale = _t([0.0, 0.5, -1.0]), _t([1.0, 2.0, 0.5])
    td = jd.TransformedDistribution(jd.Normal(loc, scale), [T.ExpTransform()])
    ln = jd.LogNormal(loc, scale)
    v = _t([[0.5, 1.0, 2.0], [3.0, 0.1, 1.0]])
    np.testing.assert_allclose(td.log_prob(v).numpy(), ln.log_prob(v).numpy(), rtol=1e-12)
    x = v.numpy()
    expected = (-np.log(x * scale.numpy() * np.sqrt(2 * np.pi))
                - (np.log(x) - loc.numpy()) ** 2 / (2 * scale.numpy() ** 2))
    np.testing.assert_allclose(ln.log_prob(v).numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(td.cdf(td.icdf(_t([0.1, 0.5, 0.9]))).numpy(), [0.1, 0.5, 0.9],
                               rtol=1e-9)
    assert td.support is constraints.positive and td.has_rsample
    assert td.batch_shape == (3,) and td.event_shape == ()


def test_decreasing_transform_flips_the_cdf():
    base = jd.Exponential(_t(2.0))
    td = jd.TransformedDistribution(base, [T.AffineTransform(1.0, -1.0)])  # 1 - X
    v = _t([0.0, 0.5, 0.9])
    np.testing.assert_allclose(td.cdf(v).numpy(), np.exp(-2 * (1 - v.numpy())), rtol=1e-12)
    np.testing.assert_allclose(td.icdf(td.cdf(v)).numpy(), v.numpy(), rtol=1e-12)


def test_event_shapes_and_expand():
    base = jd.Normal(jitgrad.zeros(5, 3, dtype=F64), 1.0)
    td = jd.TransformedDistribution(base, [T.StickBreakingTransform()])
    assert td.batch_shape == (5,) and td.event_shape == (4,)
    assert isinstance(td.base_dist, jd.Independent)
    assert td.sample((2,)).shape == (2, 5, 4)
    assert bool(td.support.check(td.sample()).all())
    e = td.expand((2, 5))
    assert e.batch_shape == (2, 5) and e.event_shape == (4,)
    assert e.log_prob(td.sample()).shape == (2, 5)
    r = jd.TransformedDistribution(jd.Normal(jitgrad.zeros(6), 1.0),
                                   [T.ReshapeTransform((6,), (2, 3))])
    assert r.batch_shape == () and r.event_shape == (2, 3)
    assert r.log_prob(jitgrad.zeros(2, 3)).shape == ()
    # a transform with a broadcast parameter expands the base distribution
    a = jd.TransformedDistribution(jd.Normal(0.0, 1.0), [T.AffineTransform(jitgrad.zeros(4),
                                                                           1.0)])
    assert a.batch_shape == (4,) and a.base_dist.batch_shape == (4,)
    with pytest.raises(ValueError, match="transforms must be a Transform or list"):
        jd.TransformedDistribution(base, T.ExpTransform)
    with pytest.raises(ValueError, match="needs to have shape with size at least 2"):
        jd.TransformedDistribution(jd.Normal(jitgrad.zeros(3), 1.0),
                                   [T.ReshapeTransform((2, 2), (4,))])


def test_rsample_gradients_flow():
    loc = jitgrad.tensor([0.2, -0.3], requires_grad=True)
    log_scale = jitgrad.tensor([0.1, -0.5], requires_grad=True)
    d = jd.LogNormal(loc, log_scale.exp())
    jitgrad.manual_seed(3)
    x = d.rsample((1000,))
    assert x.requires_grad and bool((x > 0).all())
    x.mean().backward()
    # d E[x] / d loc = E[x] for the log-normal (reparameterized exp(loc + scale * eps))
    np.testing.assert_allclose(loc.grad.numpy(), x.detach().numpy().mean(0) / 2, rtol=1e-5)
    assert log_scale.grad is not None and np.all(np.isfinite(log_scale.grad.numpy()))
    assert not d.sample((3,)).requires_grad


def test_lognormal_moments_from_samples():
    d = jd.LogNormal(_t([0.0, 0.5]), _t([0.25, 0.5]))
    jitgrad.manual_seed(11)
    s = d.sample((40000,)).numpy()
    se = np.sqrt(d.variance.numpy() / s.shape[0])
    assert np.all(np.abs(s.mean(0) - d.mean.numpy()) < 6 * se)
    np.testing.assert_allclose(d.mode.numpy(), np.exp([0.0 - 0.0625, 0.5 - 0.25]))


def _tanh_normal_policy_step(mu_w, log_std, obs, validate_args=False):
    """A SAC-style squashed Gaussian policy loss: reparameterized tanh(Normal) actions,
    their log probabilities through the cached TanhTransform, and a LogNormal term."""
    mu = obs @ mu_w
    base = jd.Normal(mu, log_std.exp(), validate_args=validate_args)
    policy = jd.TransformedDistribution(base, [jd.transforms.TanhTransform(cache_size=1),
                                               jd.transforms.AffineTransform(0.0, 2.0)],
                                        validate_args=validate_args)
    action = policy.rsample()
    log_pi = policy.log_prob(action).sum(-1)
    scale_prior = jd.LogNormal(0.0, 1.0, validate_args=validate_args)
    noise = jd.LogNormal(mu.mean(0), log_std.exp(), validate_args=validate_args)
    loss = ((log_pi - action.pow(2).sum(-1)).mean()
            - scale_prior.log_prob(log_std.exp()).sum()
            + noise.rsample((3,)).mean() - noise.entropy().sum())
    loss.backward()
    return loss


def test_compiled_transformed_distribution_step_equals_eager():
    r = np.random.default_rng(5)
    mu_w = jitgrad.tensor(r.normal(size=(4, 2)).astype(np.float32) * 0.3, requires_grad=True)
    log_std = jitgrad.tensor([-0.5, 0.2], requires_grad=True)
    obs = jitgrad.tensor(r.normal(size=(8, 4)).astype(np.float32))
    params = [mu_w, log_std]

    def step(obs):
        return _tanh_normal_policy_step(mu_w, log_std, obs)

    def grads():
        out = [p.grad.numpy().copy() for p in params]
        for p in params:
            p.grad = None
        return out

    compiled = jitgrad.compile(step)
    for seed in (1, 2, 3):  # the first call traces, the later ones run the plan
        jitgrad.manual_seed(seed)
        ref = step(obs).item()
        ref_grads = grads()
        jitgrad.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no graph break
            out = compiled(obs).item()
        assert out == ref and math.isfinite(out)
        for a, b in zip(grads(), ref_grads):
            np.testing.assert_array_equal(a, b)
    assert compiled.stats["traces"] == 1
