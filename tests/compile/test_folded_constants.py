"""Small constant subgraphs are folded when a plan is built (``passes.fold_constants``). They
are evaluated with eager mode's kernels, so a transcendental of constants (a sinusoidal
timestep embedding's ``exp(-log(P) * arange(half) / half)``) has eager mode's bits, not
the NumPy reference's. Found by the stop-50 architecture probe: a DDPM U-Net's time
embedding gradients were 8e-7 off under compile."""

import math

import numpy as np
import pytest

import jitgrad
from jitgrad import nn

T = jitgrad.tensor(np.array([3, 250, 999, 17]))


def frequencies(t):
    return jitgrad.exp(-math.log(10000) * jitgrad.arange(start=0, end=8,
                                                         dtype=jitgrad.float32) / 8)


def embedding(t):
    freqs = frequencies(t)
    args = t[:, None].float() * freqs[None]
    return jitgrad.cat([jitgrad.cos(args), jitgrad.sin(args), args.tanh(),
                        jitgrad.sigmoid(args / 1000)], dim=-1)


@pytest.mark.parametrize("fn", [frequencies, embedding], ids=lambda f: f.__name__)
def test_folded_values_equal_eager(fn):
    cf = jitgrad.compile(fn)
    want = fn(T).numpy()
    for _ in range(2):
        np.testing.assert_array_equal(cf(T).numpy(), want)


def test_time_embedding_gradients_equal_eager():
    jitgrad.manual_seed(0)
    te = nn.Sequential(nn.Linear(32, 64), nn.SiLU(), nn.Linear(64, 64))

    def loss(t):
        return te(embedding(t)).square().mean()

    def grads(f):
        te.zero_grad()
        f(T).backward()
        return [p.grad.numpy().copy() for p in te.parameters()]

    want = grads(loss)
    cf = jitgrad.compile(loss)
    for _ in range(2):
        for g, w in zip(grads(cf), want):
            np.testing.assert_array_equal(g, w)
