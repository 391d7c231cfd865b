"""BatchNorm with ``momentum=None`` (a cumulative moving average, ``1 / batches seen``) takes
its factor as a 0-d float64 tensor, not ``num_batches_tracked.item()``: a compiled forward or
training step compiles (it was a graph break, the whole step eager) and keeps eager mode's
bits, which are those of the Python-float factor."""

import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad import nn


def _model():
    jitgrad.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3, momentum=None), nn.ReLU(),
                         nn.Flatten(), nn.Linear(12, 2))


def _batches(n):
    rng = np.random.default_rng(0)
    return [(jitgrad.tensor(rng.standard_normal((4, 2, 4, 4)).astype(np.float32)),
             jitgrad.tensor(rng.integers(0, 2, 4))) for _ in range(n)]


@pytest.mark.parametrize("whole_step", [False, True])
def test_cumulative_batchnorm_compiles_and_equals_eager(whole_step):
    eager_model, compiled_model = _model(), _model()
    opts = [jitgrad.optim.SGD(m.parameters(), lr=0.1) for m in (eager_model, compiled_model)]

    def step_of(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    eager = step_of(eager_model, opts[0])
    if whole_step:
        compiled = jitgrad.compile(step_of(compiled_model, opts[1]))
    else:
        compiled = step_of(jitgrad.compile(compiled_model), opts[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph break warns
        for x, y in _batches(5):
            assert compiled(x, y).item() == eager(x, y).item()
    bn_e, bn_c = eager_model[1], compiled_model[1]
    assert bn_c.num_batches_tracked.item() == 5
    for name in ("running_mean", "running_var"):
        np.testing.assert_array_equal(getattr(bn_c, name).numpy(), getattr(bn_e, name).numpy())


def test_cumulative_average_equals_the_mean_of_batch_statistics():
    bn = nn.BatchNorm1d(2, momentum=None, dtype=jitgrad.float64)
    rng = np.random.default_rng(1)
    means = []
    for _ in range(4):
        x = jitgrad.tensor(rng.standard_normal((6, 2)))
        means.append(x.numpy().mean(0))
        bn(x)
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean(means, 0), rtol=1e-12)
