"""A weight-decay schedule (DINO's, MAE's: ``group["weight_decay"] = wd[it]`` before each
step) under a compiled step: after the trace that sees it change, the value is read at
every call (no retrace per step, no eager fallback), with eager mode's bits (Adam: its
documented bound); a change to or
from zero changes what the step computes, so it retraces."""

import numpy as np
import pytest

import jitgrad
from jitgrad import nn
from jitgrad.nn import functional as F

OPTIMIZERS = {
    "AdamW": lambda ps: jitgrad.optim.AdamW(ps, lr=1e-2),
    "Adam": lambda ps: jitgrad.optim.Adam(ps, lr=1e-2, weight_decay=0.1),
    "SGD": lambda ps: jitgrad.optim.SGD(ps, lr=1e-2, weight_decay=0.1),
    "SGD_momentum": lambda ps: jitgrad.optim.SGD(ps, lr=1e-2, momentum=0.9, nesterov=True,
                                                 weight_decay=0.1),
}


def _schedule(it: int) -> float:
    return 0.0 if it == 12 else 0.04 + 0.36 * it / 20  # (one step without decay)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_schedule_equals_eager_and_stops_retracing(name):
    models = []
    for _ in range(2):
        jitgrad.manual_seed(0)
        models.append(nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6)))
    opts = [OPTIMIZERS[name](m.parameters()) for m in models]

    def step(model, opt, x):
        opt.zero_grad()
        loss = F.mse_loss(model(x), x)
        loss.backward()
        opt.step()
        return loss

    f = jitgrad.compile(step)
    x = jitgrad.tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))
    for it in range(20):
        for opt in opts:
            opt.param_groups[0]["weight_decay"] = _schedule(it)
        want = step(models[0], opts[0], x)
        got = f(models[1], opts[1], x)
        for pe, pc in zip(models[0].parameters(), models[1].parameters()):
            if name.startswith("Adam"):  # the documented bound of Adam's compiled step
                np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(),
                                           rtol=1e-5, atol=1e-6)
            else:
                assert got.item() == want.item(), it
                np.testing.assert_array_equal(pc.detach().numpy(), pe.detach().numpy())
    assert f.eager_reason(models[1], opts[1], x) is None
    # first call, optimizer state made, weight decay seen varying, the step without decay
    # and the first one after it (a zero changes what the step computes)
    assert f.stats["traces"] <= 6
