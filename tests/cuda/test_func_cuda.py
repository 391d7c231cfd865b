"""jitgrad.func and jitgrad.autograd.functional on a CUDA device: the same values as on the
CPU, results on the inputs' device (vmap's out_dims=None comparison and its empty-batch
path included)."""

from __future__ import annotations

import numpy as np

import jitgrad
import jitgrad.func as jf
from jitgrad.autograd import functional as F

X = np.random.default_rng(0).standard_normal((3, 2))


def _run(device):
    x = jitgrad.tensor(X, device=device)
    f = lambda a: (a.sin() * a).sum()  # noqa: E731
    per_sample, const = jf.vmap(lambda a: (jf.grad(f)(a), jitgrad.ones(2, device=device)),
                                out_dims=(0, None))(x)
    outs = [per_sample, const, jf.vmap(lambda a: a * 2)(jitgrad.zeros(0, 2, device=device)),
            jf.jacrev(lambda a: a.exp() * a.sum())(x[0]),
            jf.jvp(lambda a: a.exp(), (x[0],), (x[1],))[1],
            F.hessian(f, x[0]), F.vjp(lambda a: a.tanh(), x, x)[1]]
    for o in outs:
        assert o.device.type == device, o
    return [o.cpu().numpy() for o in outs]


def test_func_on_cuda_matches_cpu():
    for c, g in zip(_run("cpu"), _run("cuda")):
        np.testing.assert_allclose(g, c, rtol=1e-12, atol=1e-14)
