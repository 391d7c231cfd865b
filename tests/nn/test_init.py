"""nn.init: bounds and moments of each initialiser, PyTorch's gains and fans, seeded
generators, in-place without recording a graph."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as jnn
from jitgrad.nn import init


def test_calculate_gain_matches_torch(torch):
    for nl, param in (("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                      ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None),
                      ("leaky_relu", math.sqrt(5))):
        assert init.calculate_gain(nl, param) == pytest.approx(
            torch.nn.init.calculate_gain(nl, param))
    with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
        init.calculate_gain("foo")


@pytest.mark.parametrize("fn,kw,check", [
    ("uniform_", {"a": -2.0, "b": 3.0}, lambda a, w: a.min() >= -2 and a.max() <= 3),
    ("normal_", {"mean": 1.0, "std": 2.0},
     lambda a, w: abs(a.mean() - 1) < 0.05 and abs(a.std() - 2) < 0.05),
    ("xavier_uniform_", {"gain": 2.0},
     lambda a, w: np.abs(a).max() <= 2 * math.sqrt(6 / (800 + 1200))),
    ("xavier_normal_", {},
     lambda a, w: abs(a.std() - math.sqrt(2 / (800 + 1200))) < 0.001),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, lambda a, w: np.abs(a).max() <= 1 / math.sqrt(
        800)),
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"},
     lambda a, w: abs(a.std() - math.sqrt(2 / 1200)) < 0.001),
])
def test_initialisers(fn, kw, check):
    w = jitgrad.empty(300, 200, 2, 2, requires_grad=True)
    out = getattr(init, fn)(w, **kw)
    assert out is w and w.grad_fn is None and w.requires_grad
    assert check(w.detach().numpy().astype(np.float64), w)


def test_constants():
    w = jitgrad.empty(3, 2)
    assert (init.ones_(w) == 1).all() and (init.zeros_(w) == 0).all()
    assert (init.constant_(w, 0.5) == 0.5).all()


def test_generator_makes_init_reproducible():
    a, b = jitgrad.empty(4, 5), jitgrad.empty(4, 5)
    init.kaiming_uniform_(a, generator=jitgrad.Generator().manual_seed(7))
    init.kaiming_uniform_(b, generator=jitgrad.Generator().manual_seed(7))
    assert (a == b).all()
    jitgrad.manual_seed(1)
    m1 = jnn.Linear(3, 3)
    jitgrad.manual_seed(1)
    m2 = jnn.Linear(3, 3)
    assert (m1.weight == m2.weight).all() and (m1.bias == m2.bias).all()


def test_fan_errors_like_torch(torch):
    for M in (jitgrad, torch):
        with pytest.raises(ValueError, match="Fan in and fan out can not be computed for "
                                             "tensor with fewer than 2 dimensions"):
            M.nn.init.xavier_uniform_(M.empty(3))
        with pytest.raises(ValueError, match="Mode fan_both not supported"):
            M.nn.init.kaiming_normal_(M.empty(3, 3), mode="fan_both")
