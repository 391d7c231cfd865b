"""A user object's method named like a mutating container method (a timm-style
``ModelEma.update(model)`` after ``opt.step()``) is judged by what its own frame does, not
by its name: here it only writes tensors in place, so the step compiles and equals eager
mode. ``dict.update`` on outside state is still a graph break."""

import copy

import numpy as np

import jitgrad
from jitgrad import nn


class ModelEma:
    def __init__(self, model, decay=0.9):
        self.module = copy.deepcopy(model)
        self.decay = decay

    def update(self, model):
        with jitgrad.no_grad():
            ema = list(self.module.state_dict().values())
            new = list(model.state_dict().values())
            jitgrad._foreach_mul_(ema, self.decay)
            jitgrad._foreach_add_(ema, new, alpha=1.0 - self.decay)


def _setup():
    jitgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    return model, jitgrad.optim.SGD(model.parameters(), lr=0.1), ModelEma(model)


def step(model, opt, ema, x):
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    ema.update(model)
    return loss


def test_ema_update_compiles_and_equals_eager():
    x = jitgrad.tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))
    eager, compiled = _setup(), _setup()
    f = jitgrad.compile(step)
    for _ in range(3):
        want, got = step(*eager, x), f(*compiled, x)
        assert got.item() == want.item()
        for pe, pc in zip(eager[2].module.parameters(), compiled[2].module.parameters()):
            np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy())
    assert f.eager_reason(*compiled, x) is None


def test_dict_update_on_outside_state_is_still_a_graph_break():
    log: dict = {}

    def f(x):
        log.update(last=1)
        return x * 2

    cf = jitgrad.compile(f)
    cf(jitgrad.ones(2))
    assert "calls .update()" in (cf.eager_reason(jitgrad.ones(2)) or "")
