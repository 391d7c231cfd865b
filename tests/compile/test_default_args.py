"""Default argument values are state a compiled function reads like a closure's: a model and
optimizer given as defaults (``def step(x, y, model=model, opt=opt)``), keyword-only defaults,
the defaults of functions the compiled one calls, and defaults rebound later are guarded;
explicitly passed models and optimizers hit the cache instead of retracing every call."""

from __future__ import annotations

import numpy as np

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.jit.function import compiled_function_of

RNG = np.random.default_rng(0)
X = jg.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
Y = jg.tensor(RNG.integers(0, 3, 5))


def _model():
    jg.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    return m, jg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)


def _step(x, y, m, opt):
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss


def _eager_reference(steps: int):
    m, opt = _model()
    losses = [float(_step(X, Y, m, opt)) for _ in range(steps)]
    return m, losses


def _same(m_ref, m) -> None:
    for p, q in zip(m_ref.parameters(), m.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_model_and_optimizer_as_positional_defaults():
    ref, losses = _eager_reference(5)
    m, opt = _model()

    @jg.compile
    def step(x, y, m=m, opt=opt):
        return _step(x, y, m, opt)

    got = [float(step(X, Y)) for _ in range(5)]
    assert got == losses  # (momentum buffers appear after step 1: a retrace, not stale)
    _same(ref, m)
    assert compiled_function_of(step).stats["traces"] == 2


def test_keyword_only_defaults_and_a_method():
    ref, losses = _eager_reference(4)
    m, opt = _model()

    class Trainer:
        def step(self, x, y, *, m=m, opt=opt):
            return _step(x, y, m, opt)

    c = jg.compile(Trainer().step)
    assert [float(c(X, Y)) for _ in range(4)] == losses
    _same(ref, m)


def test_defaults_of_a_function_the_compiled_one_calls():
    ref, losses = _eager_reference(4)
    m, opt = _model()

    def train(x, y, m=m, opt=opt):
        return _step(x, y, m, opt)

    class Trainer:
        def step(self, x, y, *, m=m, opt=opt):
            return _step(x, y, m, opt)

    m2, opt2 = _model()
    Trainer.step.__kwdefaults__ = {"m": m2, "opt": opt2}
    t = Trainer()
    c1 = jg.compile(lambda x, y: train(x, y))
    c2 = jg.compile(lambda x, y: t.step(x, y))
    got1 = [float(c1(X, Y)) for _ in range(4)]
    got2 = [float(c2(X, Y)) for _ in range(4)]
    assert got1 == losses and got2 == losses
    _same(ref, m)
    _same(ref, m2)


def test_rebinding_the_defaults_retraces():
    def scale_by(x, k=2.0):
        return x * k

    c = jg.compile(scale_by)
    x = jg.arange(3.0)
    assert c(x).tolist() == [0.0, 2.0, 4.0]
    scale_by.__defaults__ = (3.0,)
    assert c(x).tolist() == [0.0, 3.0, 6.0]
    w = jg.ones(3)

    def with_weight(x, *, w=w):
        return x * w

    c2 = jg.compile(with_weight)
    assert c2(x).tolist() == [0.0, 1.0, 2.0]
    with_weight.__kwdefaults__["w"] = jg.full((3,), 5.0)
    assert c2(x).tolist() == [0.0, 5.0, 10.0]


def test_a_config_object_default_of_a_module_forward():
    class Cfg:
        scale = 1.0

    cfg = Cfg()

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 2)

        def forward(self, x, cfg=cfg):
            return self.lin(x) * cfg.scale

    m = Scaled()
    c = jg.compile(m)
    first = c(X).detach().numpy()
    cfg.scale = 3.0
    np.testing.assert_allclose(c(X).detach().numpy(), first * 3.0, rtol=1e-6)


def test_passing_model_and_optimizer_explicitly_hits_the_cache():
    ref, losses = _eager_reference(6)
    m, opt = _model()
    c = jg.compile(_step)
    assert [float(c(X, Y, m, opt)) for _ in range(6)] == losses
    _same(ref, m)
    stats = compiled_function_of(c).stats
    assert stats["traces"] == 2 and stats["cache_hits"] == 4
