"""jitgrad.distributions on a CUDA device: the same values, samples (random numbers are
drawn on the host, so a seed gives the same draws on every device) and gradients as on
the CPU, results on the parameters' device."""

from __future__ import annotations

import numpy as np

import jitgrad
import jitgrad.distributions as D


def _run(device):
    jitgrad.manual_seed(3)
    loc = jitgrad.tensor([0.5, -1.0, 2.0], device=device, requires_grad=True)
    scale = jitgrad.tensor([1.0, 0.5, 2.0], device=device, requires_grad=True)
    logits = jitgrad.tensor([[0.1, 1.0, -0.5], [2.0, 0.0, 0.3]], device=device,
                            requires_grad=True)
    cov = jitgrad.tensor([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 1.5]], device=device,
                         requires_grad=True)
    conc = jitgrad.tensor([0.7, 2.0, 5.0], device=device, requires_grad=True)
    normal = D.Normal(loc, scale)
    x = normal.rsample((4,))
    cat = D.Categorical(logits=logits)
    a = cat.sample((5,))
    mvn = D.MultivariateNormal(loc, cov)
    g = D.Gamma(conc, 2.0).rsample((2,))
    outs = [x, normal.log_prob(x), normal.cdf(x), a, cat.log_prob(a), cat.entropy(),
            mvn.log_prob(mvn.rsample((2,))), D.kl_divergence(normal, D.Normal(0.0, 1.0)), g,
            D.Poisson(conc).sample((3,))]
    for o in outs:
        assert o.device.type == device, o
    total = sum(o.float().sum() for o in outs if o.requires_grad)
    total.backward()
    grads = [t.grad for t in (loc, scale, logits, cov, conc)]
    return [o.detach().cpu().numpy() for o in outs + grads]


def test_distributions_on_cuda_match_cpu():
    for c, g in zip(_run("cpu"), _run("cuda")):
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6)
