"""Whole training steps under ``jitgrad.compile``: same trajectories as eager, one plan per
signature, retraces only for shape changes, optimizer state and LR schedules captured."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import import_example

import jitgrad
import jitgrad.nn as nn
from jitgrad.compiler import cache
from jitgrad.utils.data import DataLoader, TensorDataset

#: the training step of the digits demo: zero_grad, cross-entropy, backward, optimizer step
make_step = import_example("train_digits").make_step


def _data(n=70, d=12, classes=5, seed=3):
    g = np.random.default_rng(seed)
    x = jitgrad.tensor(g.standard_normal((n, d)).astype(np.float32))
    y = jitgrad.tensor(g.integers(0, classes, n))
    return x, y


def _mlp(d=12, classes=5, dropout=0.0):
    layers = [nn.Linear(d, 32), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers, nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, classes))


def _train(compiled, make_opt, epochs=3, batch_size=16, sched=None, dropout=0.0, seed=0):
    """Train from a fixed seed; returns (params, losses, step function)."""
    x, y = _data()
    jitgrad.manual_seed(seed)
    model = _mlp(dropout=dropout)
    opt = make_opt(model.parameters())
    scheduler = sched(opt) if sched else None
    step = make_step(model, opt)
    if compiled:
        step = jitgrad.compile(step)
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True,
                        generator=jitgrad.Generator().manual_seed(seed))
    losses = []
    for _ in range(epochs):
        for xb, yb in loader:
            losses.append(step(xb, yb).item())
        if scheduler is not None:
            scheduler.step()
    return [p.detach().numpy().copy() for p in model.parameters()], losses, step, model


OPTIMIZERS = {
    "sgd": lambda ps: jitgrad.optim.SGD(ps, lr=0.05),
    "sgd-momentum-nesterov-wd": lambda ps: jitgrad.optim.SGD(
        ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adam": lambda ps: jitgrad.optim.Adam(ps, lr=1e-2),
    "adamw-amsgrad": lambda ps: jitgrad.optim.AdamW(ps, lr=1e-2, amsgrad=True),
    "rmsprop-centered-momentum": lambda ps: jitgrad.optim.RMSprop(ps, lr=1e-3, centered=True,
                                                                  momentum=0.9),
    "adagrad-lr_decay": lambda ps: jitgrad.optim.Adagrad(ps, lr=0.05, lr_decay=0.01),
    "adadelta": lambda ps: jitgrad.optim.Adadelta(ps, weight_decay=1e-3),
    "adamax-wd": lambda ps: jitgrad.optim.Adamax(ps, lr=1e-2, weight_decay=1e-3),
    "nadamw": lambda ps: jitgrad.optim.NAdam(ps, lr=1e-2, weight_decay=1e-2,
                                             decoupled_weight_decay=True),
    # rho_t passes 5 at the sixth step: the traced where() takes both branches
    "radam": lambda ps: jitgrad.optim.RAdam(ps, lr=1e-2),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_compiled_training_equals_eager(name):
    # 70 samples, batch 16: 4 full batches and a short one of 6 per epoch (drop_last=False)
    pe, le, _, _ = _train(False, OPTIMIZERS[name], epochs=20)  # 100 steps
    pc, lc, step, _ = _train(True, OPTIMIZERS[name], epochs=20)
    assert len(le) == 100
    np.testing.assert_allclose(lc, le, rtol=2e-4, atol=1e-5)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    # traces: a first step that creates optimizer state (plain SGD has none), the steady
    # state, and the short last batch once -- not once per epoch
    # (Adagrad creates its state with the optimizer: no first-step trace)
    assert step.stats["traces"] == (2 if name in ("sgd", "adagrad-lr_decay") else 3)
    assert step.stats["calls"] == 100


def test_lr_schedule_does_not_retrace():
    sched = lambda opt: jitgrad.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)  # noqa: E731
    pe, le, _, _ = _train(False, OPTIMIZERS["adam"], epochs=6, sched=sched)
    pc, lc, step, _ = _train(True, OPTIMIZERS["adam"], epochs=6, sched=sched)
    np.testing.assert_allclose(lc, le, rtol=2e-4, atol=1e-5)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert step.stats["traces"] == 3  # the learning rate is read at every call


def test_changed_non_scheduled_hyperparameter_retraces():
    x, y = _data()
    model = _mlp()
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    step = jitgrad.compile(make_step(model, opt))
    for _ in range(3):
        step(x, y)
    assert step.stats["traces"] == 2
    opt.param_groups[0]["momentum"] = 0.9   # baked into the plan: must retrace ...
    step(x, y)
    assert step.stats["traces"] == 3
    assert "optimizer hyper-parameter" in step.last_retrace_reason
    for m in (0.8, 0.7, 0.6):  # ... and, seen changing, is read at every call from then on
        opt.param_groups[0]["momentum"] = m
        step(x, y)
    assert step.stats["traces"] == 4
    opt.param_groups[0]["weight_decay"] = 1e-3   # baked into the plan: must retrace
    step(x, y)
    assert step.stats["traces"] == 5


def test_short_last_batch_reuses_kernels():
    x, y = _data(n=40)
    model = _mlp()
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.1)
    step = jitgrad.compile(make_step(model, opt))
    step(x[:16], y[:16])
    step(x[:16], y[:16])
    before = cache.STATS["modules_written"] + cache.STATS["modules_loaded"]
    step(x[:8], y[:8])
    assert step.stats["traces"] == 2 and "shape changed" in step.last_retrace_reason
    # shape-generic kernels: the new batch size compiled and loaded nothing new
    assert cache.STATS["modules_written"] + cache.STATS["modules_loaded"] == before


def test_dropout_training_and_compiled_eval():
    pe, le, _, me = _train(False, OPTIMIZERS["adam"], epochs=4, dropout=0.3)
    pc, lc, _, mc = _train(True, OPTIMIZERS["adam"], epochs=4, dropout=0.3)
    # the compiled step draws the same dropout masks from the same generator
    np.testing.assert_allclose(lc, le, rtol=2e-4, atol=1e-5)
    x, _ = _data()
    me.eval()
    mc.eval()
    predict = jitgrad.compile(lambda inp: mc(inp))
    with jitgrad.no_grad():
        predict(x)  # the tracing call
        out_c, out_c2 = predict(x), predict(x)
        out_e = me(x)
    np.testing.assert_allclose(out_c.numpy(), out_e.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(out_c.numpy(), out_c2.numpy())  # eval: no dropout
    assert not out_c.requires_grad
    mc.train()  # train/eval mode is guarded: dropout back on means a new trace
    with jitgrad.no_grad():
        predict(x)
    assert predict.stats["traces"] == 2


def test_cnn_step_equals_eager():
    g = np.random.default_rng(0)
    x = jitgrad.tensor(g.random((6, 1, 8, 8)).astype(np.float32))
    y = jitgrad.tensor(g.integers(0, 10, 6))

    def run(compiled):
        jitgrad.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(32, 10))
        opt = jitgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        step = make_step(model, opt)
        if compiled:
            step = jitgrad.compile(step)
        losses = [step(x, y).item() for _ in range(10)]
        return losses, [p.detach().numpy().copy() for p in model.parameters()]

    le, pe = run(False)
    lc, pc = run(True)
    np.testing.assert_allclose(lc, le, rtol=1e-4, atol=1e-6)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_loaded_optimizer_state_is_used_not_the_old_groups():
    """load_state_dict replaces the param-group dicts the plan reads the learning rate from:
    the next call must retrace and use the loaded rate (plain SGD has no state to notice)."""
    x, y = _data()
    jitgrad.manual_seed(0)
    model = _mlp()
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.1)
    step = jitgrad.compile(make_step(model, opt))
    for _ in range(3):
        step(x, y)
    sd = opt.state_dict()
    sd["param_groups"][0]["lr"] = 0.0  # a frozen model from here on
    opt.load_state_dict(sd)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    step(x, y)
    step(x, y)
    for a, p in zip(before, model.parameters()):
        np.testing.assert_array_equal(a, p.detach().numpy())


def test_changed_module_attribute_retraces():
    """A number a module's forward reads (Dropout.p) is baked into the trace: changing it
    retraces instead of running the stale plan."""
    jitgrad.manual_seed(0)
    drop = nn.Dropout(0.5)
    model = nn.Sequential(nn.Linear(8, 8), drop)
    f = jitgrad.compile(lambda inp: model(inp))
    x = jitgrad.ones(4, 8)
    with jitgrad.no_grad():
        f(x)
        f(x)
        drop.p = 0.0
        out = f(x)
    assert f.stats["traces"] == 2
    with jitgrad.no_grad():
        expected = model[0](x)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)
