"""``compiler/shared_patches.py``: a plan lowers a convolution's input once for its forward
and its weight gradient, keeping eager mode's bits; within its budget (the first
convolutions get it); not across convolutions of another geometry on the same input."""

from __future__ import annotations

import numpy as np
from helpers import cross_entropy_step

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.ops import conv as C

F32 = np.float32


def _arr(t):
    return t.detach().numpy().copy()


def _cnn_step(seed: int):
    """The digits CNN's step (two conv blocks, SGD with momentum) and its data."""
    jitgrad.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64, 10))
    step = cross_entropy_step(model, jitgrad.optim.SGD(model.parameters(), lr=0.05,
                                                        momentum=0.9))
    rng = np.random.default_rng(seed)
    x = jitgrad.tensor(rng.random((12, 1, 8, 8)).astype(F32))
    y = jitgrad.tensor(rng.integers(0, 10, 12))
    return step, model, x, y


def _run(step, model, x, y, n):
    out = []
    for _ in range(n):
        loss = step(x, y)
        out.append([_arr(loss)] + [_arr(p) for p in model.parameters()]
                   + [_arr(p.grad) for p in model.parameters()])
    return out


def _assert_same_bits(got, want):
    for a, b in zip(got, want, strict=True):
        for u, v in zip(a, b, strict=True):
            assert u.tobytes() == v.tobytes()


def _shared(compiled, *args) -> int:
    return compiled.lower(*args).entry.plan.shared_patches


def test_training_step_shares_both_convolutions_with_eager_bits():
    eager = _run(*_cnn_step(0), 3)
    step, model, x, y = _cnn_step(0)
    compiled = jitgrad.compile(step)
    _assert_same_bits(_run(compiled, model, x, y, 3), eager)
    assert _shared(compiled, x, y) == 2


def test_budget_goes_to_the_first_convolutions(monkeypatch):
    eager = _run(*_cnn_step(1), 2)
    first = C._patch_elements((12, 1, 8, 8), (8, 1, 3, 3),
                              {"stride": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)})
    for budget, shared in ((first, 1), (first - 1, 0)):
        monkeypatch.setattr(C, "SHARED_PATCHES_MAX", budget)
        step, model, x, y = _cnn_step(1)
        compiled = jitgrad.compile(step)
        _assert_same_bits(_run(compiled, model, x, y, 2), eager)
        assert _shared(compiled, x, y) == shared


def test_convolutions_of_another_geometry_on_the_same_input():
    """Two convolutions of one input (stride 1 and 2): each weight gradient uses the patches
    of its own forward, never the other's."""
    rng = np.random.default_rng(2)
    x = jitgrad.tensor(rng.standard_normal((3, 2, 9, 9)).astype(F32))
    w1 = jitgrad.tensor(rng.standard_normal((4, 2, 3, 3)).astype(F32), requires_grad=True)
    w2 = jitgrad.tensor(rng.standard_normal((4, 2, 3, 3)).astype(F32), requires_grad=True)

    def step(x):
        w1.grad = w2.grad = None
        a = F.conv2d(x, w1, padding=1)
        b = F.conv2d(x, w2, stride=2)
        loss = (a * a).sum() + (b * b * b).sum()
        loss.backward()
        return loss

    eager = [[_arr(step(x)), _arr(w1.grad), _arr(w2.grad)]]
    compiled = jitgrad.compile(step)
    for _ in range(3):
        _assert_same_bits([[_arr(compiled(x)), _arr(w1.grad), _arr(w2.grad)]], eager)
    assert _shared(compiled, x) == 2
