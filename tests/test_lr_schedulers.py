"""Every ``torch.optim.lr_scheduler`` schedule against PyTorch's: the learning rate (and
the cycled momentum / beta1) after each step, two parameter groups, ``state_dict`` resumed
mid-way into a fresh scheduler, ``step(epoch)``'s closed forms and warning, and the argument
errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")


def _optimizer(M, kind="sgd"):
    a, b = M.zeros(2, requires_grad=True), M.zeros(3, requires_grad=True)
    groups = [{"params": [a]}, {"params": [b], "lr": 0.5}]
    if kind == "adam":
        return M.optim.Adam(groups, lr=0.1)
    return M.optim.SGD(groups, lr=0.1, momentum=0.9)


def _observe(opt) -> list:
    out = []
    for g in opt.param_groups:
        out.append(float(g["lr"]))
        if "momentum" in g:
            out.append(float(g["momentum"]))
        if "betas" in g:
            out.append(float(g["betas"][0]))
    return out


MEMBER = {
    "LambdaLR": lambda L, o: L.LambdaLR(o, lambda e: 0.95 ** e),
    "LambdaLR list": lambda L, o: L.LambdaLR(o, [lambda e: 1.0 / (e + 1), lambda e: 0.9 ** e]),
    "MultiplicativeLR": lambda L, o: L.MultiplicativeLR(o, lambda e: 0.9),
    "MultiStepLR": lambda L, o: L.MultiStepLR(o, [3, 7, 7, 12], gamma=0.5),
    "ConstantLR": lambda L, o: L.ConstantLR(o, factor=0.25, total_iters=4),
    "LinearLR": lambda L, o: L.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=6),
    "ExponentialLR": lambda L, o: L.ExponentialLR(o, gamma=0.8),
    "PolynomialLR": lambda L, o: L.PolynomialLR(o, total_iters=8, power=2.0),
    "StepLR": lambda L, o: L.StepLR(o, step_size=3, gamma=0.5),
    "CosineAnnealingLR": lambda L, o: L.CosineAnnealingLR(o, T_max=6, eta_min=0.01),
    "WarmRestarts": lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01),
    "WarmRestarts T_mult 1": lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=4),
    "CyclicLR": lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=3,
                                        step_size_down=2),
    "CyclicLR triangular2": lambda L, o: L.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                    mode="triangular2"),
    "CyclicLR exp_range": lambda L, o: L.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                  mode="exp_range", gamma=0.9),
    "OneCycleLR": lambda L, o: L.OneCycleLR(o, max_lr=[0.1, 1.0], total_steps=20),
    "OneCycleLR linear 3-phase": lambda L, o: L.OneCycleLR(
        o, max_lr=0.1, epochs=4, steps_per_epoch=5, anneal_strategy="linear",
        three_phase=True, pct_start=0.25),
    "SequentialLR": lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, start_factor=0.1, total_iters=4), L.CosineAnnealingLR(o, T_max=10)],
        milestones=[4]),
    "SequentialLR 3": lambda L, o: L.SequentialLR(
        o, [L.ConstantLR(o, factor=0.5, total_iters=2), L.ExponentialLR(o, gamma=0.9),
            L.StepLR(o, 2)], milestones=[3, 9]),
    "ChainedScheduler": lambda L, o: L.ChainedScheduler(
        [L.ConstantLR(o, factor=0.1, total_iters=2), L.ExponentialLR(o, gamma=0.9)]),
}
STEPS = 19


@pytest.mark.parametrize("optim", ["sgd", "adam"])
@pytest.mark.parametrize("name", sorted(MEMBER))
def test_schedule_matches_torch(name, optim):
    runs = []
    for M in (jitgrad, torch):
        opt = _optimizer(M, optim)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = MEMBER[name](M.optim.lr_scheduler, opt)
        seen = [_observe(opt) + [float(v) for v in sched.get_last_lr()]]
        for _ in range(STEPS):
            opt.step()
            sched.step()
            seen.append(_observe(opt) + [float(v) for v in sched.get_last_lr()])
        runs.append(seen)
    np.testing.assert_allclose(np.array(runs[0]), np.array(runs[1]), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", sorted(MEMBER))
def test_state_dict_resumes_the_schedule(name):
    opt = _optimizer(jitgrad)
    L = jitgrad.optim.lr_scheduler
    sched = MEMBER[name](L, opt)
    for _ in range(7):
        opt.step()
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state
    ahead = []
    for _ in range(6):
        opt.step()
        sched.step()
        ahead.append(_observe(opt))
    # a fresh optimizer and scheduler, resumed from the step-7 states
    opt2 = _optimizer(jitgrad)
    sched2 = MEMBER[name](L, opt2)
    opt3 = _optimizer(jitgrad)
    sched3 = MEMBER[name](L, opt3)
    for _ in range(7):
        opt3.step()
        sched3.step()
    opt2.load_state_dict(opt3.state_dict())
    sched2.load_state_dict(state)
    again = []
    for _ in range(6):
        opt2.step()
        sched2.step()
        again.append(_observe(opt2))
    np.testing.assert_allclose(np.array(again), np.array(ahead), rtol=1e-12)


def test_reduce_lr_on_plateau_matches_torch():
    metrics = [1.0, 0.9, 0.9, 0.91, 0.95, 0.9, 0.89, 0.89, 0.9, 0.95, 1.0, 1.0, 0.5, 0.6, 0.7,
               0.7, 0.7, 0.7, 0.7]
    for kw in (dict(patience=2, factor=0.5), dict(mode="max", patience=1, cooldown=2),
               dict(threshold_mode="abs", threshold=0.05, patience=1, min_lr=[0.05, 0.2]),
               dict(patience=0, factor=0.1, min_lr=0.02, eps=0.0)):
        runs = []
        for M in (jitgrad, torch):
            opt = _optimizer(M)
            sched = M.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
            seen = []
            for m in metrics:
                opt.step()
                sched.step(m)
                seen.append(_observe(opt) + list(sched.get_last_lr()) + [sched.num_bad_epochs])
            runs.append(seen)
        np.testing.assert_allclose(np.array(runs[0]), np.array(runs[1]), rtol=1e-12,
                                   err_msg=str(kw))


@pytest.mark.parametrize("name,epochs", [("StepLR", [5, 2, 9]), ("MultiStepLR", [8, 1, 13]),
                                         ("ExponentialLR", [4, 0, 6]),
                                         ("LinearLR", [3, 9, 0]), ("PolynomialLR", [2, 7, 11]),
                                         ("ConstantLR", [2, 5, 1]),
                                         ("WarmRestarts", [0.5, 7.25, 2, 13])])
def test_step_with_an_epoch_uses_the_closed_form_and_warns(name, epochs):
    runs = []
    for M in (jitgrad, torch):
        opt = _optimizer(M)
        sched = MEMBER[name](M.optim.lr_scheduler, opt)
        seen = []
        for e in epochs:
            opt.step()
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                sched.step(e)
            if name != "WarmRestarts":  # (its own step takes an epoch without warning)
                assert any("epoch parameter" in str(x.message) for x in w)
            seen.append(_observe(opt))
        runs.append(seen)
    np.testing.assert_allclose(np.array(runs[0]), np.array(runs[1]), rtol=1e-12)


def test_stepping_the_scheduler_first_warns_as_torch():
    for M in (jitgrad, torch):
        opt = _optimizer(M)
        sched = M.optim.lr_scheduler.ExponentialLR(opt, 0.9)
        with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before"):
            sched.step()


ERRORS = {
    "lambda count": lambda L, o: L.LambdaLR(o, [lambda e: 1.0]),
    "constant factor": lambda L, o: L.ConstantLR(o, factor=1.5),
    "linear start": lambda L, o: L.LinearLR(o, start_factor=0.0),
    "linear end": lambda L, o: L.LinearLR(o, end_factor=1.5),
    "T_0": lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=0),
    "T_mult": lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0),
    "cyclic mode": lambda L, o: L.CyclicLR(o, 0.1, 1.0, mode="spiral"),
    "cyclic no momentum": lambda L, o: L.CyclicLR(L_opt(o), 0.1, 1.0),
    "one cycle steps": lambda L, o: L.OneCycleLR(o, 0.1),
    "one cycle total": lambda L, o: L.OneCycleLR(o, 0.1, total_steps=0),
    "one cycle pct": lambda L, o: L.OneCycleLR(o, 0.1, total_steps=10, pct_start=1.5),
    "one cycle anneal": lambda L, o: L.OneCycleLR(o, 0.1, total_steps=10,
                                                  anneal_strategy="step"),
    "one cycle max_lr count": lambda L, o: L.OneCycleLR(o, [0.1, 0.2, 0.3], total_steps=10),
    "sequential milestones": lambda L, o: L.SequentialLR(o, [L.StepLR(o, 2)], milestones=[2]),
    "sequential empty": lambda L, o: L.SequentialLR(o, [], milestones=[]),
    "chained empty": lambda L, o: L.ChainedScheduler([]),
    "plateau factor": lambda L, o: L.ReduceLROnPlateau(o, factor=1.0),
    "plateau mode": lambda L, o: L.ReduceLROnPlateau(o, mode="up"),
    "plateau threshold mode": lambda L, o: L.ReduceLROnPlateau(o, threshold_mode="pct"),
    "plateau min_lr": lambda L, o: L.ReduceLROnPlateau(o, min_lr=[0.1]),
}


def L_opt(opt):  # noqa: N802 - an optimizer without momentum or betas, in the same library
    M = jitgrad if isinstance(opt, jitgrad.optim.Optimizer) else torch
    return M.optim.Adagrad([M.zeros(1, requires_grad=True)], lr=0.1)


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_torch(case):
    with pytest.raises(Exception) as t_err:
        ERRORS[case](torch.optim.lr_scheduler, _optimizer(torch))
    with pytest.raises(type(t_err.value)) as j_err:
        ERRORS[case](jitgrad.optim.lr_scheduler, _optimizer(jitgrad))
    assert str(j_err.value) == str(t_err.value)


def test_one_cycle_past_its_end_raises_torchs_error():
    msgs = []
    for M in (jitgrad, torch):
        opt = _optimizer(M)
        sched = M.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=3)
        for _ in range(3):
            opt.step()
            sched.step()
        with pytest.raises(ValueError) as err:
            sched.step()
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


def test_a_scheduled_compiled_training_step():
    """A compiled step reads the learning rate each call: the schedule applies."""
    w = jitgrad.ones(3, requires_grad=True)
    opt = jitgrad.optim.SGD([w], lr=1.0)
    sched = jitgrad.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e)

    @jitgrad.compile
    def step():
        opt.zero_grad()
        (w * 1.0).sum().backward()
        opt.step()

    expected = 1.0
    for e in range(4):
        step()
        expected -= 0.5 ** e
        sched.step()
        assert math.isclose(w[0].item(), expected, rel_tol=1e-6)
