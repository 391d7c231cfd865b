"""Distributions as user scripts use them, written once for ``import jitgrad as torch``
and real PyTorch: a REINFORCE policy-gradient step and a VAE's reparameterized loss give
PyTorch's gradients; under ``jitgrad.compile`` they give eager's results (traced whole
with ``validate_args=False``, run eagerly after a graph break with validation on); and
``import jitgrad`` does not import the package."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from helpers import python_prints  # noqa: E402

import jitgrad  # noqa: E402


def _linear(lib, w, b):
    layer = lib.nn.Linear(w.shape[1], w.shape[0])
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(w))
        layer.bias.copy_(lib.tensor(b))
    return layer


def _policy(lib, rng_seed=0):
    r = np.random.default_rng(rng_seed)
    return lib.nn.Sequential(
        _linear(lib, r.normal(size=(16, 4)).astype(np.float32) * 0.5,
                r.normal(size=16).astype(np.float32) * 0.1),
        lib.nn.Tanh(),
        _linear(lib, r.normal(size=(3, 16)).astype(np.float32) * 0.5,
                r.normal(size=3).astype(np.float32) * 0.1))


def reinforce_loss(torch, policy, obs, actions, returns):
    """A REINFORCE loss with an entropy bonus, as a user writes it."""
    dist = torch.distributions.Categorical(logits=policy(obs))
    logp = dist.log_prob(actions)
    return -(logp * returns).mean() - 0.01 * dist.entropy().mean()


def gaussian_policy_loss(torch, policy, log_std, obs, actions, advantages):
    """A continuous-action policy-gradient loss (diagonal Gaussian policy)."""
    mu = policy(obs)
    dist = torch.distributions.Independent(torch.distributions.Normal(mu, log_std.exp()), 1)
    return -(dist.log_prob(actions) * advantages).mean() - 1e-3 * dist.entropy().mean()


def test_reinforce_step_matches_torch():
    r = np.random.default_rng(1)
    obs = r.normal(size=(32, 4)).astype(np.float32)
    returns = r.normal(size=32).astype(np.float32)
    pj, pt = _policy(jitgrad), _policy(torch)
    with jitgrad.no_grad():  # the actions: drawn by jitgrad's policy, replayed in torch
        actions = jitgrad.distributions.Categorical(logits=pj(jitgrad.tensor(obs))).sample()
    assert actions.shape == (32,) and actions.dtype == jitgrad.int64
    lj = reinforce_loss(jitgrad, pj, jitgrad.tensor(obs), actions, jitgrad.tensor(returns))
    lt = reinforce_loss(torch, pt, torch.tensor(obs), torch.tensor(actions.numpy()),
                        torch.tensor(returns))
    lj.backward()
    lt.backward()
    np.testing.assert_allclose(lj.item(), lt.item(), rtol=1e-5)
    for a, b in zip(pj.parameters(), pt.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_gaussian_policy_step_matches_torch():
    r = np.random.default_rng(2)
    obs = r.normal(size=(16, 4)).astype(np.float32)
    adv = r.normal(size=16).astype(np.float32)
    pj, pt = _policy(jitgrad, 3), _policy(torch, 3)
    sj = jitgrad.full((3,), -0.5, requires_grad=True)
    st = torch.full((3,), -0.5, requires_grad=True)
    with jitgrad.no_grad():
        actions = jitgrad.distributions.Normal(pj(jitgrad.tensor(obs)), sj.exp()).sample()
    lj = gaussian_policy_loss(jitgrad, pj, sj, jitgrad.tensor(obs), actions, jitgrad.tensor(adv))
    lt = gaussian_policy_loss(torch, pt, st, torch.tensor(obs), torch.tensor(actions.numpy()),
                              torch.tensor(adv))
    lj.backward()
    lt.backward()
    np.testing.assert_allclose(lj.item(), lt.item(), rtol=1e-5)
    np.testing.assert_allclose(sj.grad.numpy(), st.grad.numpy(), rtol=1e-4, atol=1e-6)
    for a, b in zip(pj.parameters(), pt.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-6)


class _VAE:
    """A small VAE with a Bernoulli decoder, written against ``lib``'s API."""

    def __init__(self, lib, seed=0):
        r = np.random.default_rng(seed)
        f32 = np.float32
        self.lib = lib
        self.enc = _linear(lib, r.normal(size=(8, 6)).astype(f32) * 0.4, np.zeros(8, f32))
        self.dec = _linear(lib, r.normal(size=(6, 4)).astype(f32) * 0.4, np.zeros(6, f32))

    def parameters(self):
        return [*self.enc.parameters(), *self.dec.parameters()]

    def loss(self, x, validate_args=None):
        torch = self.lib
        D = torch.distributions
        h = self.enc(x)
        mu, logvar = h[:, :4], h[:, 4:]
        q = D.Normal(mu, torch.exp(0.5 * logvar), validate_args=validate_args)
        z = q.rsample()
        recon = D.Bernoulli(logits=self.dec(z), validate_args=validate_args).log_prob(x)
        prior = D.Normal(torch.zeros_like(mu), torch.ones_like(mu),
                         validate_args=validate_args)
        kl = D.kl_divergence(q, prior).sum(-1)
        return (kl - recon.sum(-1)).mean()


def _batch():
    return (np.random.default_rng(4).uniform(size=(10, 6)) > 0.5).astype(np.float32)


def test_vae_reparameterized_loss_matches_torch(monkeypatch):
    x = _batch()
    vj, vt = _VAE(jitgrad), _VAE(torch)
    jitgrad.manual_seed(9)
    eps = jitgrad.randn(10, 4)  # the noise rsample draws next from this seed
    monkeypatch.setattr(torch.distributions.normal, "_standard_normal",
                        lambda shape, dtype, device: torch.tensor(eps.numpy()))
    jitgrad.manual_seed(9)
    lj, lt = vj.loss(jitgrad.tensor(x)), vt.loss(torch.tensor(x))
    lj.backward()
    lt.backward()
    np.testing.assert_allclose(lj.item(), lt.item(), rtol=1e-5)
    for a, b in zip(vj.parameters(), vt.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-6)


def _grads(params):
    out = [p.grad.numpy().copy() for p in params]
    for p in params:
        p.grad = None
    return out


def test_vae_loss_compiles_whole_and_equals_eager():
    x = jitgrad.tensor(_batch())
    vae = _VAE(jitgrad)

    def step(x):
        loss = vae.loss(x, validate_args=False)
        loss.backward()
        return loss

    compiled = jitgrad.compile(step)
    for seed in (1, 2, 3):  # the first call traces, the later ones run the plan
        jitgrad.manual_seed(seed)
        ref = step(x).item()
        ref_grads = _grads(vae.parameters())
        jitgrad.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no graph break
            out = compiled(x).item()
        assert out == ref
        for a, b in zip(_grads(vae.parameters()), ref_grads):
            np.testing.assert_array_equal(a, b)
    assert compiled.stats["traces"] == 1


def test_compile_with_validation_falls_back_to_eager_correctly():
    x = jitgrad.tensor(_batch())
    vae = _VAE(jitgrad)

    def step(x):
        loss = vae.loss(x)  # validation on: reads the parameters' values
        loss.backward()
        return loss

    jitgrad.manual_seed(4)
    ref = step(x).item()
    ref_grads = _grads(vae.parameters())
    compiled = jitgrad.compile(step)
    jitgrad.manual_seed(4)
    with pytest.warns(UserWarning, match="eagerly"):
        out = compiled(x).item()
    # the traced part of the first call ran on the NumPy references: eager's values to
    # rounding; the later calls run eagerly, bit for bit
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    for a, b in zip(_grads(vae.parameters()), ref_grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    jitgrad.manual_seed(4)
    assert compiled(x).item() == ref
    for a, b in zip(_grads(vae.parameters()), ref_grads):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(Exception, match="value of a tensor"):
        jitgrad.compile(step, fullgraph=True)(x)


def test_compiled_reinforce_step_with_sampling_equals_eager():
    obs = jitgrad.tensor(np.random.default_rng(5).normal(size=(8, 4)).astype(np.float32))
    policy = _policy(jitgrad)

    def step(obs):
        logits = policy(obs)
        dist = jitgrad.distributions.Categorical(logits=logits, validate_args=False)
        actions = dist.sample()
        loss = -(dist.log_prob(actions) * (actions.float() - 1.0)).mean()
        loss.backward()
        return loss, actions

    compiled = jitgrad.compile(step)
    for seed in (0, 1):
        jitgrad.manual_seed(seed)
        ref_loss, ref_actions = step(obs)
        ref_grads = _grads(list(policy.parameters()))
        jitgrad.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loss, actions = compiled(obs)
        np.testing.assert_array_equal(actions.numpy(), ref_actions.numpy())
        assert loss.item() == ref_loss.item()
        for a, b in zip(_grads(list(policy.parameters())), ref_grads):
            np.testing.assert_array_equal(a, b)


def test_invalid_parameters_under_compile_raise_like_eager():
    def f(scale):
        return jitgrad.distributions.Normal(0.0, scale).log_prob(jitgrad.tensor(0.5))

    compiled = jitgrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(jitgrad.tensor(1.0))
        with pytest.raises(ValueError, match="Expected parameter scale"):
            compiled(jitgrad.tensor(-1.0))


def test_import_jitgrad_does_not_import_distributions():
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import jitgrad"],
                       capture_output=True, text=True, check=True)
    assert "jitgrad.distributions" not in r.stderr
    assert "jitgrad.distributed" in r.stderr  # the report lists jitgrad's modules
    words = python_prints(
        "import sys, jitgrad; print(int('jitgrad.distributions' in sys.modules)); "
        "N = jitgrad.distributions.Normal; print(N.__module__); "
        "print(int('jitgrad.distributions' in sys.modules)); "
        "from jitgrad.distributions import Categorical; print(Categorical.__name__); "
        "import jitgrad.distributions as d; print(int(d is jitgrad.distributions))")
    assert words == ["0", "jitgrad.distributions.normal", "1", "Categorical", "1"]
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        jitgrad.no_such_thing  # noqa: B018


def test_host_sampled_distributions_under_compile_equal_eager():
    """Gamma / Beta draws (and gammainc) read the parameters' values on the host: a graph
    break, and the compiled function gives eager's results."""
    c = jitgrad.tensor([0.5, 2.0, 4.0], requires_grad=True)
    D = jitgrad.distributions

    def f(c):
        d = D.Gamma(c, 2.0, validate_args=False)
        x = d.rsample((3,))
        p = d.cdf(jitgrad.tensor([0.5, 1.0, 2.0])).detach()
        return (x * x).sum() + p.sum() + D.Beta(c, c, validate_args=False).rsample().sum()

    compiled = jitgrad.compile(f)
    for seed in (1, 2):
        jitgrad.manual_seed(seed)
        ref = f(c)
        ref.backward()
        g = _grads([c])[0]
        jitgrad.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = compiled(c)
        out.backward()
        np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-6)
        np.testing.assert_allclose(_grads([c])[0], g, rtol=1e-5)
