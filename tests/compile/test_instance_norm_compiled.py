"""``InstanceNorm2d(track_running_stats=True)`` under ``jitgrad.compile``: a compiled training
step gives eager mode's bits (loss, gradients, parameters and running statistics after
several SGD steps), the buffer updates compile to in-place writes of the captured buffers
(one trace, no graph break), and the compiled eval mode reads the running statistics."""

from __future__ import annotations

import warnings

import numpy as np

import jitgrad as jg


def _model():
    jg.manual_seed(0)
    return jg.nn.Sequential(
        jg.nn.Conv2d(2, 3, 3), jg.nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
        jg.nn.ReLU(), jg.nn.Flatten(), jg.nn.Linear(3 * 4 * 4, 2))


def _run(compiled: bool):
    model = _model()
    opt = jg.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    train = jg.compile(step) if compiled else step
    jg.manual_seed(1)
    losses = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph break would warn
        for _ in range(4):
            losses.append(train(jg.randn(3, 2, 6, 6)).item())
        model.eval()
        infer = jg.compile(lambda x: model(x)) if compiled else model
        evals = [infer(jg.randn(3, 2, 6, 6)).detach().numpy() for _ in range(2)]
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    return losses, state, grads, evals, train


def test_compiled_training_steps_equal_eager_bit_for_bit():
    e_losses, e_state, e_grads, e_evals, _ = _run(False)
    c_losses, c_state, c_grads, c_evals, train = _run(True)
    assert c_losses == e_losses
    assert train.stats["traces"] == 1 and train.stats["cache_hits"] == 3
    assert list(c_state) == list(e_state)
    for k in e_state:  # the running statistics moved the same way
        np.testing.assert_array_equal(c_state[k], e_state[k], err_msg=k)
    assert np.abs(c_state["1.running_mean"]).sum() > 0
    for c, e in zip(c_grads, e_grads):
        np.testing.assert_array_equal(c, e)
    for c, e in zip(c_evals, e_evals):
        np.testing.assert_array_equal(c, e)


def test_buffer_updates_compile_to_in_place_writes():
    m = jg.nn.InstanceNorm1d(3, track_running_stats=True)
    f = jg.compile(lambda x: m(x))
    x = jg.randn(2, 3, 5)
    f(x)
    graph = str(f.lower(x)).split("== fusion groups ==")[0]
    assert graph.count("write captured") == 2 and graph.count("version captured") == 2
    rm = m.running_mean.numpy().copy()
    f(x)  # the plan updates the buffers at every call
    assert not np.array_equal(m.running_mean.numpy(), rm)
    eager = jg.nn.InstanceNorm1d(3, track_running_stats=True)
    eager(x)
    eager(x)
    np.testing.assert_array_equal(m.running_mean.numpy(), eager.running_mean.numpy())
    np.testing.assert_array_equal(m.running_var.numpy(), eager.running_var.numpy())
