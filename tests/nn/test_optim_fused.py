"""``fused=True`` optimizers (SGD, Adam, AdamW, Adagrad): the update runs as one compiled plan
(``Optimizer._fused_step``). Its bits are those of the same step traced inside a compiled
training step; it stays within the documented bound of the unfused eager step and of
PyTorch's fused optimizers; PyTorch's argument errors; guards retrace on a changed option,
not on new gradient tensors; a learning-rate schedule is read at every call."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad

RNG = np.random.default_rng(5)
XS = RNG.standard_normal((12, 16, 6)).astype(np.float32)
YS = RNG.integers(0, 4, (12, 16))

CASES = {
    "SGD": ("SGD", {"lr": 0.1}),
    "SGD-momentum-nesterov-wd": ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True,
                                         "weight_decay": 0.01}),
    "Adam": ("Adam", {"lr": 0.01}),
    "Adam-amsgrad-wd-maximize": ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1,
                                          "maximize": True}),
    "AdamW": ("AdamW", {"lr": 0.01, "betas": (0.8, 0.99)}),
    "Adagrad": ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.01}),
}


def _model(M):
    M.manual_seed(0)
    return M.nn.Sequential(M.nn.Linear(6, 12), M.nn.Tanh(), M.nn.Linear(12, 4))


def _step(M, model, opt, i):
    opt.zero_grad()
    loss = M.nn.functional.cross_entropy(model(M.tensor(XS[i])), M.tensor(YS[i]))
    loss.backward()
    opt.step()
    return loss


def _arrays(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_step_has_the_bits_of_the_compiled_training_step(case):
    """Eager model + fused optimizer == the whole step (unfused optimizer) compiled: both
    run the step's traced tensor ops as fused kernels."""
    name, kw = CASES[case]
    a, b = _model(jitgrad), _model(jitgrad)
    opt_a = getattr(jitgrad.optim, name)(a.parameters(), fused=True, **kw)
    opt_b = getattr(jitgrad.optim, name)(b.parameters(), **kw)
    whole = jitgrad.compile(lambda x, y: _whole(b, opt_b, x, y))
    for i in range(8):
        la = _step(jitgrad, a, opt_a, i)
        lb = whole(jitgrad.tensor(XS[i]), jitgrad.tensor(YS[i]))
        assert la.item() == lb.item()
        for pa, pb in zip(_arrays(a), _arrays(b)):
            np.testing.assert_array_equal(pa, pb, err_msg=f"step {i}")


def _whole(model, opt, x, y):
    opt.zero_grad()
    loss = jitgrad.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_step_stays_near_the_eager_step(case):
    name, kw = CASES[case]
    a, b = _model(jitgrad), _model(jitgrad)
    opt_a = getattr(jitgrad.optim, name)(a.parameters(), fused=True, **kw)
    opt_b = getattr(jitgrad.optim, name)(b.parameters(), **kw)
    for i in range(12):
        _step(jitgrad, a, opt_a, i)
        _step(jitgrad, b, opt_b, i)
    for pa, pb in zip(_arrays(a), _arrays(b)):
        np.testing.assert_allclose(pa, pb, rtol=1e-5, atol=1e-6)
    # the state PyTorch's optimizer keeps, of the same dtypes and values
    for p, q in zip(a.parameters(), b.parameters()):
        sa, sb = opt_a.state[p], opt_b.state[q]
        assert list(sa) == list(sb)
        for k in sa:
            assert sa[k].dtype == sb[k].dtype, k
            np.testing.assert_allclose(sa[k].numpy(), sb[k].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_step_matches_torch_fused(torch, H, case):
    name, kw = CASES[case]
    jm, tm = _model(jitgrad), _model(torch)
    H.copy_params(jm, tm, torch)
    jopt = getattr(jitgrad.optim, name)(jm.parameters(), fused=True, **kw)
    topt = getattr(torch.optim, name)(tm.parameters(), fused=True, **kw)
    for i in range(12):
        _step(jitgrad, jm, jopt, i)
        _step(torch, tm, topt, i)
    tparams = dict(tm.named_parameters())
    for pname, p in jm.named_parameters():
        H.assert_close(p, tparams[pname], rtol=2e-5, atol=2e-6, msg=pname)


def test_fused_step_reads_the_scheduled_rate_and_traces_once():
    m = _model(jitgrad)
    opt = jitgrad.optim.AdamW(m.parameters(), lr=0.01, fused=True)
    sched = jitgrad.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    ref = _model(jitgrad)
    ropt = jitgrad.optim.AdamW(ref.parameters(), lr=0.01)
    rsched = jitgrad.optim.lr_scheduler.StepLR(ropt, step_size=2, gamma=0.5)
    for i in range(8):
        _step(jitgrad, m, opt, i)
        sched.step()
        _step(jitgrad, ref, ropt, i)
        rsched.step()
    for pa, pb in zip(_arrays(m), _arrays(ref)):
        np.testing.assert_allclose(pa, pb, rtol=1e-5, atol=1e-6)
    stats = opt._fused_step().stats
    # the first call creates the state (its plan runs that call only); then one plan
    assert stats["traces"] == 2 and stats["retraces"] == 0, stats


def test_changed_option_and_new_parameter_grads_are_seen():
    m = _model(jitgrad)
    opt = jitgrad.optim.SGD(m.parameters(), lr=0.1, fused=True)
    ref = _model(jitgrad)
    ropt = jitgrad.optim.SGD(ref.parameters(), lr=0.1, fused=True)
    for i in range(3):
        _step(jitgrad, m, opt, i)
        _step(jitgrad, ref, ropt, i)
    opt.param_groups[0]["momentum"] = 0.9  # a baked option: the guards retrace
    ropt.param_groups[0]["momentum"] = 0.9
    w = list(m.parameters())[0]
    for i in range(3, 6):
        _step(jitgrad, m, opt, i)
        _step(jitgrad, ref, ropt, i)
    assert "momentum_buffer" in opt.state[w]
    # a parameter without a gradient is left alone
    opt.zero_grad()
    before = w.detach().numpy().copy()
    opt.step()
    np.testing.assert_array_equal(w.detach().numpy(), before)
    for pa, pb in zip(_arrays(m), _arrays(ref)):
        np.testing.assert_array_equal(pa, pb)


def test_mixed_groups_fuse_only_their_own():
    m = _model(jitgrad)
    first, second = list(m.parameters())[:2], list(m.parameters())[2:]
    opt = jitgrad.optim.Adam([{"params": first, "fused": True}, {"params": second}], lr=0.01)
    ref = _model(jitgrad)
    r_first, r_second = list(ref.parameters())[:2], list(ref.parameters())[2:]
    ropt = jitgrad.optim.Adam([{"params": r_first}, {"params": r_second}], lr=0.01)
    _step(jitgrad, m, opt, 0)
    _step(jitgrad, ref, ropt, 0)
    # the unfused group took the eager step (same gradients: its bits) ...
    for pa, pb in zip(second, r_second):
        np.testing.assert_array_equal(pa.detach().numpy(), pb.detach().numpy())
    assert "exp_avg" in opt.state[first[0]] and "exp_avg" in opt.state[second[0]]
    for i in range(1, 4):
        _step(jitgrad, m, opt, i)
        _step(jitgrad, ref, ropt, i)
    # ... and the fused one's stay within the bound
    for pa, pb in zip(first + second, r_first + r_second):
        np.testing.assert_allclose(pa.detach().numpy(), pb.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad"])
def test_fused_argument_errors_are_pytorch_s(name):
    p = [jitgrad.ones(2, requires_grad=True)]
    cls = getattr(jitgrad.optim, name)
    with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
        cls(p, lr=0.1, fused=True, differentiable=True)
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
        cls(p, lr=0.1, fused=True, foreach=True)
    with pytest.raises(NotImplementedError, match="differentiable=True is not supported"):
        cls(p, lr=0.1, differentiable=True)


def test_hoisted_numbers_let_one_pass_update_a_parameter():
    """An Adam update (the bias corrections from the step tensor between the moments and
    the parameter update) fuses into one loop per parameter once the 0-d equations are
    computed first."""
    m = jitgrad.nn.Linear(64, 32)
    opt = jitgrad.optim.Adam(m.parameters(), lr=0.01)

    def step(x):
        opt.zero_grad()
        m(x).square().mean().backward()
        opt.step()

    f = jitgrad.compile(step)
    x = jitgrad.tensor(RNG.standard_normal((8, 64)).astype(np.float32))
    for _ in range(3):
        f(x)
    groups = [g for g in f.lower(x).fusion_groups if "addcdiv" in g]
    assert len(groups) == 2  # weight and bias: one loop each ...
    for g in groups:  # ... which computes the moments and the update
        assert "lerp" in g and "sqrt" in g, g



def test_fused_state_dict_round_trip_continues_the_same_trajectory():
    m = _model(jitgrad)
    opt = jitgrad.optim.AdamW(m.parameters(), lr=0.01, fused=True)
    for i in range(3):
        _step(jitgrad, m, opt, i)
    m2 = _model(jitgrad)
    m2.load_state_dict(m.state_dict())
    opt2 = jitgrad.optim.AdamW(m2.parameters(), lr=0.01, fused=True)
    opt2.load_state_dict(opt.state_dict())
    for i in range(3, 6):
        _step(jitgrad, m, opt, i)
        _step(jitgrad, m2, opt2, i)
    for pa, pb in zip(_arrays(m), _arrays(m2)):
        np.testing.assert_array_equal(pa, pb)
    assert opt.state_dict()["param_groups"][0]["fused"] is True
