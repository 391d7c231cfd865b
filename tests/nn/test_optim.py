"""Optimizers and schedulers against PyTorch: 20-step trajectories for every option (same
model, weights and data), param groups, zero_grad, step(closure), state_dict round trips,
learning-rate schedules, bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as jnn

RNG = np.random.default_rng(11)
XS = RNG.standard_normal((20, 8, 4)).astype(np.float32)
YS = RNG.integers(0, 3, (20, 8))

OPTIONS = {
    "SGD": ("SGD", {"lr": 0.1}),
    "SGD-momentum": ("SGD", {"lr": 0.1, "momentum": 0.9}),
    "SGD-dampening": ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.3}),
    "SGD-nesterov": ("SGD", {"lr": 0.1, "momentum": 0.8, "nesterov": True}),
    "SGD-weight_decay": ("SGD", {"lr": 0.1, "weight_decay": 0.05}),
    "SGD-maximize": ("SGD", {"lr": 0.01, "momentum": 0.5, "maximize": True}),
    "SGD-all": ("SGD", {"lr": 0.05, "momentum": 0.7, "nesterov": True, "weight_decay": 0.01}),
    "Adam": ("Adam", {"lr": 0.01}),
    "Adam-betas-eps": ("Adam", {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6}),
    "Adam-weight_decay": ("Adam", {"lr": 0.01, "weight_decay": 0.1}),
    "Adam-amsgrad": ("Adam", {"lr": 0.01, "amsgrad": True}),
    "Adam-maximize": ("Adam", {"lr": 0.01, "maximize": True}),
    "AdamW": ("AdamW", {"lr": 0.01}),
    "AdamW-amsgrad-wd": ("AdamW", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.3}),
    "Adamax": ("Adamax", {}),
    "Adamax-all": ("Adamax", {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6,
                              "weight_decay": 0.05, "maximize": True}),
    "NAdam": ("NAdam", {"lr": 0.01}),
    "NAdam-momentum_decay-wd": ("NAdam", {"lr": 0.01, "momentum_decay": 0.01,
                                          "weight_decay": 0.05}),
    "NAdamW-maximize": ("NAdam", {"lr": 0.01, "weight_decay": 0.1,
                                  "decoupled_weight_decay": True, "maximize": True}),
    "RAdam": ("RAdam", {"lr": 0.01}),
    "RAdam-short-sma": ("RAdam", {"lr": 0.01, "betas": (0.9, 0.9), "weight_decay": 0.05}),
    "RAdamW-maximize": ("RAdam", {"lr": 0.01, "weight_decay": 0.1,
                                  "decoupled_weight_decay": True, "maximize": True}),
    "RMSprop": ("RMSprop", {"lr": 0.01}),
    "RMSprop-centered-momentum-wd": ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.9,
                                                 "weight_decay": 0.01}),
    "RMSprop-maximize": ("RMSprop", {"lr": 0.001, "maximize": True, "alpha": 0.9}),
    "Adagrad": ("Adagrad", {"lr": 0.1}),
    "Adagrad-decay-init-wd": ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.01,
                                          "initial_accumulator_value": 0.1}),
    "Adadelta": ("Adadelta", {}),
    "Adadelta-all": ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.01,
                                  "maximize": True}),
}


def _model(M):
    M.manual_seed(0)
    return M.nn.Sequential(M.nn.Linear(4, 8), M.nn.Tanh(), M.nn.Linear(8, 3))


def _train(M, model, opt, steps=20, start=0):
    for i in range(start, start + steps):
        opt.zero_grad()
        loss = M.nn.functional.cross_entropy(model(M.tensor(XS[i])), M.tensor(YS[i]))
        loss.backward()
        opt.step()
    return loss


def _pair(torch, H, name, kw):
    jm, tm = _model(jitgrad), _model(torch)
    H.copy_params(jm, tm, torch)
    return (jm, getattr(jitgrad.optim, name)(jm.parameters(), **kw),
            tm, getattr(torch.optim, name)(tm.parameters(), foreach=False, **kw))


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_trajectory_matches_torch(torch, H, case):
    name, kw = OPTIONS[case]
    jm, jopt, tm, topt = _pair(torch, H, name, kw)
    for i in range(20):
        _train(jitgrad, jm, jopt, 1, i)
        _train(torch, tm, topt, 1, i)
        tparams = dict(tm.named_parameters())
        for pname, p in jm.named_parameters():
            H.assert_close(p, tparams[pname], rtol=2e-5, atol=2e-6, msg=f"step {i} {pname}")


def test_adam_capturable_equals_the_float_path():
    ms = []
    for capturable in (False, True):
        m = _model(jitgrad)
        _train(jitgrad, m, jitgrad.optim.Adam(m.parameters(), lr=0.01, amsgrad=True,
                                              capturable=capturable), 10)
        ms.append(m)
    for a, b in zip(ms[0].parameters(), ms[1].parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_param_groups_with_own_options_match_torch(torch, H):
    jm, tm = _model(jitgrad), _model(torch)
    H.copy_params(jm, tm, torch)
    opts = []
    for M, m in ((jitgrad, jm), (torch, tm)):
        opt = M.optim.SGD([{"params": m[0].parameters()}], lr=0.1, momentum=0.9)
        opt.add_param_group({"params": m[2].parameters(), "lr": 0.01, "nesterov": True})
        opts.append(opt)
        _train(M, m, opt, 5)
    assert [g["lr"] for g in opts[0].param_groups] == [0.1, 0.01]
    assert opts[0].param_groups[1]["momentum"] == 0.9 and opts[0].param_groups[1]["nesterov"]
    for (n, p), tp in zip(jm.named_parameters(), tm.parameters()):
        H.assert_close(p, tp, rtol=2e-5, atol=2e-6, msg=n)


def test_state_dict_round_trip_continues_the_same_trajectory(torch):
    for name, kw in (("SGD", {"lr": 0.1, "momentum": 0.9}), ("AdamW", {"lr": 0.01,
                                                                        "amsgrad": True})):
        ref = _model(jitgrad)
        ref_opt = getattr(jitgrad.optim, name)(ref.parameters(), **kw)
        _train(jitgrad, ref, ref_opt, 20)

        m = _model(jitgrad)
        opt = getattr(jitgrad.optim, name)(m.parameters(), **kw)
        _train(jitgrad, m, opt, 10)
        msd, osd = m.state_dict(), opt.state_dict()
        m2 = _model(jitgrad)
        m2.load_state_dict(msd)
        opt2 = getattr(jitgrad.optim, name)(m2.parameters(), **kw)
        opt2.load_state_dict(osd)
        _train(jitgrad, m2, opt2, 10, start=10)
        for a, b in zip(ref.parameters(), m2.parameters()):
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())

        tm = _model(torch)
        topt = getattr(torch.optim, name)(tm.parameters(), **kw)
        _train(torch, tm, topt, 1)
        tsd = topt.state_dict()
        assert sorted(osd) == sorted(tsd)
        assert sorted(osd["state"]) == sorted(tsd["state"])
        assert sorted(osd["state"][0]) == sorted(tsd["state"][0])
        assert osd["param_groups"][0]["params"] == tsd["param_groups"][0]["params"]
        assert set(osd["param_groups"][0]) <= set(tsd["param_groups"][0])


def test_zero_grad_and_closure():
    m = _model(jitgrad)
    opt = jitgrad.optim.SGD(m.parameters(), lr=0.1)

    def closure():
        opt.zero_grad()
        loss = m(jitgrad.tensor(XS[0])).pow(2).mean()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.grad_fn is not None and m[0].weight.grad is not None
    opt.zero_grad(set_to_none=False)
    assert m[0].weight.grad is not None and not m[0].weight.grad.numpy().any()
    opt.zero_grad()
    assert m[0].weight.grad is None
    m.zero_grad()
    opt.step()  # no gradients: nothing changes, no state
    assert not opt.state


def test_optimizer_repr_and_errors(torch):
    p = jnn.Parameter(jitgrad.ones(2))
    assert "Parameter Group 0" in repr(jitgrad.optim.SGD([p], lr=0.1))
    for M in (jitgrad, torch):
        q = M.nn.Parameter(M.ones(2))
        with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
            M.optim.SGD([], lr=0.1)
        with pytest.raises(ValueError, match="Invalid learning rate: -1"):
            M.optim.Adam([q], lr=-1)
        with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero "
                                             "dampening"):
            M.optim.SGD([q], lr=0.1, nesterov=True)
        with pytest.raises(ValueError, match="some parameters appear in more than one "
                                             "parameter group"):
            M.optim.SGD([{"params": [q]}, {"params": [q]}], lr=0.1)
        with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
            M.optim.SGD([q * 2], lr=0.1)
        with pytest.raises(TypeError, match="params argument given to the optimizer should be "
                                            "an iterable of Tensors or dicts"):
            M.optim.SGD(q, lr=0.1)


# ----------------------------------------------------------------------- schedulers
@pytest.mark.parametrize("sched,kw", [("StepLR", {"step_size": 3, "gamma": 0.5}),
                                      ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.001}),
                                      ("CosineAnnealingLR", {"T_max": 5})])
def test_schedules_match_torch(torch, sched, kw):
    lrs = []
    for M in (jitgrad, torch):
        p = M.nn.Parameter(M.ones(1))
        opt = M.optim.SGD([{"params": [p]}, {"params": [M.nn.Parameter(M.ones(1))], "lr": 0.5}],
                          lr=0.1)
        s = getattr(M.optim.lr_scheduler, sched)(opt, **kw)
        out = []
        for _ in range(25):
            opt.step()
            s.step()
            out.append(s.get_last_lr() + [g["lr"] for g in opt.param_groups])
        lrs.append(out)
    np.testing.assert_allclose(np.array(lrs[0]), np.array(lrs[1]), rtol=1e-12, atol=1e-15)


def test_scheduler_state_dict_and_order_warning(torch):
    p = jnn.Parameter(jitgrad.ones(1))
    opt = jitgrad.optim.SGD([p], lr=1.0)
    s = jitgrad.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before "
                                         "`optimizer.step\\(\\)`"):
        s.step()
    sd = s.state_dict()
    s2 = jitgrad.optim.lr_scheduler.StepLR(jitgrad.optim.SGD([p], lr=1.0), step_size=5)
    s2.load_state_dict(sd)
    assert s2.step_size == 2 and s2.last_epoch == 1
