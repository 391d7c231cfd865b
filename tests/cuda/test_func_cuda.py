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
    return _on_host(outs, device)


def _on_host(outs: list, device: str) -> list:
    """The results as host arrays, after checking each lives on ``device``."""
    for o in outs:
        assert o.device.type == device, o
    return [o.cpu().numpy() for o in outs]


def _assert_cuda_matches_cpu(run) -> None:
    for c, g in zip(run("cpu"), run("cuda")):
        np.testing.assert_allclose(g, c, rtol=1e-12, atol=1e-14)


def test_func_on_cuda_matches_cpu():
    _assert_cuda_matches_cpu(_run)


def _per_sample(device):
    """Per-sample gradients through the batched vmap (an MLP with cross-entropy, an
    embedding with MSE): the replay's rules on device tensors."""
    import jitgrad.nn.functional as NF
    from jitgrad.func import _batch_trace

    g = np.random.default_rng(1)
    w1, b1 = (jitgrad.tensor(g.standard_normal(s), device=device) for s in ((5, 3), (5,)))
    w2 = jitgrad.tensor(g.standard_normal((4, 5)), device=device)
    emb = jitgrad.tensor(g.standard_normal((6, 5)), device=device)
    x = jitgrad.tensor(g.standard_normal((4, 3)), device=device)
    t = jitgrad.tensor([0, 3, 1, 2], device=device)
    tok = jitgrad.tensor([[1, 2], [0, 5], [3, 3], [4, 1]], device=device)
    y = jitgrad.tensor(g.standard_normal((4, 2, 4)), device=device)

    def ce(p, a, b):
        h = jitgrad.tanh(NF.linear(a.unsqueeze(0), p[0], p[1]))
        return NF.cross_entropy(NF.linear(h, p[2]), b.unsqueeze(0))

    def mse(p, k, target):
        return NF.mse_loss(NF.linear(NF.embedding(k, p[0]), p[1]), target)

    replays = []
    real = _batch_trace._replay
    _batch_trace._replay = lambda *a: replays.append(1) or real(*a)
    try:
        a = jf.vmap(jf.grad(ce), in_dims=(None, 0, 0))((w1, b1, w2), x, t)
        b = jf.vmap(jf.grad(mse), in_dims=(None, 0, 0))((emb, w2), tok, y)
    finally:
        _batch_trace._replay = real
    assert len(replays) == 2
    return _on_host([*a, *b], device)


def test_batched_vmap_per_sample_gradients_on_cuda_match_cpu():
    _assert_cuda_matches_cpu(_per_sample)
