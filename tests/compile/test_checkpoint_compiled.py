"""``utils.checkpoint`` under ``jitgrad.compile`` with PyTorch's default
``preserve_rng_state=True``: it compiles (no eager fallback), the recomputation draws the
forward's random numbers again as eager mode's restored generator does, and losses,
gradients and the generator's state after the call equal eager mode's bit for bit."""

import numpy as np
import pytest

import jitgrad
from jitgrad import nn
from jitgrad.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.drop(jitgrad.tanh(self.lin(x))) + x


class Net(nn.Module):
    def __init__(self, p: float, reentrant: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(p), Block(p)])
        self.head = nn.Linear(8, 2)
        self.drop = nn.Dropout(p)
        self.reentrant = reentrant

    def forward(self, x):
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=self.reentrant)
        return self.head(self.drop(x))  # a draw after the checkpointed ones


def _pair(p, reentrant):
    jitgrad.manual_seed(0)
    eager = Net(p, reentrant)
    jitgrad.manual_seed(0)
    return eager, Net(p, reentrant)


X = np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32)


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_backward_outside_equals_eager(p, reentrant):
    eager, compiled = _pair(p, reentrant)
    cm = jitgrad.compile(compiled)
    x = jitgrad.tensor(X, requires_grad=True)
    xc = jitgrad.tensor(X, requires_grad=True)
    for step in range(3):
        for m, t in ((eager, x), (compiled, xc)):
            m.zero_grad()
            t.grad = None
        jitgrad.manual_seed(10 + step)
        want = eager(x).square().sum()
        want.backward()
        after_eager = jitgrad.rand(2)
        jitgrad.manual_seed(10 + step)
        got = cm(xc).square().sum()
        got.backward()
        after_compiled = jitgrad.rand(2)
        assert got.item() == want.item()
        np.testing.assert_array_equal(xc.grad.numpy(), x.grad.numpy())
        for pe, pc in zip(eager.parameters(), compiled.parameters()):
            np.testing.assert_array_equal(pc.grad.numpy(), pe.grad.numpy())
        np.testing.assert_array_equal(after_compiled.numpy(), after_eager.numpy())
    reason = cm.forward.eager_reason(xc)
    if reentrant:  # its backward calls backward() inside: a derived backward cannot
        assert "use_reentrant=True" in reason
    else:
        assert reason is None


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_whole_step_equals_eager(p, reentrant):
    eager, compiled = _pair(p, reentrant)
    opts = [jitgrad.optim.SGD(m.parameters(), lr=0.05) for m in (eager, compiled)]

    def step(model, opt, x):
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    f = jitgrad.compile(step)
    x = jitgrad.tensor(X)
    for i in range(3):
        jitgrad.manual_seed(i)
        want = step(eager, opts[0], x)
        jitgrad.manual_seed(i)
        got = f(compiled, opts[1], x)
        assert got.item() == want.item()
        for pe, pc in zip(eager.parameters(), compiled.parameters()):
            np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy())
    assert f.eager_reason(compiled, opts[1], x) is None


def test_a_draw_from_another_generator_in_the_block_runs_eagerly():
    g = jitgrad.Generator().manual_seed(3)
    w = jitgrad.ones(4, requires_grad=True)

    def noisy(t):
        return t * jitgrad.rand(4, generator=g)  # eager: drawn again by the recomputation

    def f(x):
        return checkpoint(noisy, x * w, use_reentrant=False).sum()

    cf = jitgrad.compile(f)
    x = jitgrad.ones(4)
    g.manual_seed(3)
    cf(x).backward()
    got = w.grad.clone()
    w.grad = None
    g.manual_seed(3)
    f(x).backward()
    np.testing.assert_array_equal(got.numpy(), w.grad.numpy())
    assert "other than the default" in (cf.eager_reason(x) or "")
