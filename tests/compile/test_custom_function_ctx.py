"""A custom ``autograd.Function`` that keeps plain values on ``ctx`` (``ctx.scale = s``, the
usual idiom) compiles: the ctx is the traced call's own object, so setting attributes on it
is no side effect on outside state. Results equal eager mode's bit for bit, whether the
whole step is compiled or ``backward()`` runs outside."""

import numpy as np

import jitgrad
from jitgrad import nn

SCALE = [0.5]


class Scale(jitgrad.autograd.Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.s = s
        ctx.shape = x.shape
        return x * s

    @staticmethod
    def backward(ctx, g):
        assert g.shape == ctx.shape
        return g * ctx.s, None


class ClampGrad(jitgrad.autograd.Function):
    """setup_context style, a tuple and a flag on ctx."""

    @staticmethod
    def forward(x, lo, hi):
        return x.clamp(lo, hi)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, lo, hi = inputs
        ctx.bounds = (lo, hi)
        ctx.straight_through = True
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        lo, hi = ctx.bounds
        if ctx.straight_through:
            return g * ((x > lo - 1) & (x < hi + 1)).float(), None, None
        return g, None, None


def _model():
    jitgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def _loss(model, x):
    h = Scale.apply(model(x), SCALE[0])
    return ClampGrad.apply(h, -0.2, 0.2).pow(2).sum()


def test_backward_outside_equals_eager_and_compiles_once():
    x = jitgrad.tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))
    eager, compiled = _model(), _model()
    f = jitgrad.compile(_loss)
    for _ in range(3):
        for m in (eager, compiled):
            m.zero_grad()
        want = _loss(eager, x)
        want.backward()
        got = f(compiled, x)
        got.backward()
        assert got.item() == want.item()
        for pe, pc in zip(eager.parameters(), compiled.parameters()):
            np.testing.assert_array_equal(pc.grad.numpy(), pe.grad.numpy())
    assert f.eager_reason(compiled, x) is None
    assert f.stats["traces"] == 1


def test_whole_step_with_optimizer_and_a_changing_global():
    x = jitgrad.tensor(np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32))
    eager, compiled = _model(), _model()
    opts = [jitgrad.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (eager, compiled)]

    def step(model, opt, x):
        opt.zero_grad()
        loss = _loss(model, x)
        loss.backward()
        opt.step()
        return loss

    f = jitgrad.compile(step)
    try:
        for i in range(4):
            SCALE[0] = 0.5 if i < 2 else 0.25  # read through the global: a guard
            want = step(eager, opts[0], x)
            got = f(compiled, opts[1], x)
            assert got.item() == want.item()
            for pe, pc in zip(eager.parameters(), compiled.parameters()):
                np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy())
    finally:
        SCALE[0] = 0.5
    assert f.eager_reason(compiled, opts[1], x) is None
    # the first step, the step with momentum buffers, the new value of SCALE[0]
    assert f.stats["traces"] == 3


def test_setting_attributes_on_an_outside_object_still_runs_eagerly():
    log = nn.Module()

    class Tagging(jitgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            log.last = 1.0  # an outside object: a side effect eager mode has at every call
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = jitgrad.ones(3, requires_grad=True)
    f = jitgrad.compile(lambda x: Tagging.apply(x).sum())
    f(x).backward()
    assert "last" in (f.eager_reason(x) or "")
