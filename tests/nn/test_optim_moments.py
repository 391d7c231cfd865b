"""Adamax, NAdam and RAdam beyond the trajectories of test_optim.py (which compare 20 steps of
every option with PyTorch): the capturable branch (the one a compiled step traces) against
the float branch, state layout and state_dict against PyTorch's, continuing from a loaded
state, parameter groups, argument errors as PyTorch words them, and the docstrings."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import jitgrad
from jitgrad.optim import adamax, nadam, radam

RNG = np.random.default_rng(23)
W0 = RNG.standard_normal((4, 3)).astype(np.float32)
B0 = RNG.standard_normal(3).astype(np.float32)

CASES = {
    "Adamax": {"lr": 0.05, "weight_decay": 0.02},
    "NAdam": {"lr": 0.05, "momentum_decay": 0.01},
    "NAdamW": {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True},
    "RAdam": {"lr": 0.05},
    "RAdamW": {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True,
               "maximize": True},
}


def _opt(M, case, params, **extra):
    name = case.removesuffix("W") if case != "Adamax" else case
    kw = dict(CASES[case], **extra)
    if M is not jitgrad:
        kw["foreach"] = False
    return getattr(M.optim, name)(params, **kw)


def _params(M):
    return [M.tensor(W0.copy(), requires_grad=True), M.tensor(B0.copy(), requires_grad=True)]


def _loss(M, w, b):
    x = M.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    return ((x @ w + b).tanh() ** 2).sum() + (w ** 3).mean()


def _run(M, opt, params, steps, closure_loss=_loss):
    for _ in range(steps):
        opt.zero_grad()
        closure_loss(M, *params).backward()
        opt.step()


@pytest.mark.parametrize("case", sorted(CASES))
def test_capturable_branch_equals_the_float_branch(case):
    # a compiled step takes the capturable branch; eager takes the float one (unless asked)
    runs = []
    for capturable in (False, True):
        ps = _params(jitgrad)
        _run(jitgrad, _opt(jitgrad, case, ps, capturable=capturable), ps, 12)
        runs.append([p.detach().numpy() for p in ps])
    for a, b in zip(*runs):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", sorted(CASES))
def test_state_and_state_dict_as_pytorch(torch, case):
    jps, tps = _params(jitgrad), _params(torch)
    jopt, topt = _opt(jitgrad, case, jps), _opt(torch, case, tps)
    _run(jitgrad, jopt, jps, 3)
    _run(torch, topt, tps, 3)
    jsd, tsd = jopt.state_dict(), topt.state_dict()
    assert sorted(jsd["state"]) == sorted(tsd["state"]) == [0, 1]
    for i in (0, 1):
        assert list(jsd["state"][i]) == list(tsd["state"][i])  # same keys, same order
        for key, value in jsd["state"][i].items():
            ref = tsd["state"][i][key]
            assert value.dtype.name == str(ref.dtype).removeprefix("torch."), key
            np.testing.assert_allclose(value.numpy(), ref.numpy(), rtol=1e-5, atol=1e-7,
                                       err_msg=key)
    jg, tg = jsd["param_groups"][0], tsd["param_groups"][0]
    assert set(jg) == set(tg)
    assert {k: v for k, v in jg.items() if k != "foreach"} == \
        {k: v for k, v in tg.items() if k != "foreach"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_loaded_state_continues_the_same_trajectory(case):
    ref = _params(jitgrad)
    _run(jitgrad, _opt(jitgrad, case, ref), ref, 8)
    first = _params(jitgrad)
    opt = _opt(jitgrad, case, first)
    _run(jitgrad, opt, first, 4)
    second = [p.detach().clone().requires_grad_() for p in first]
    opt2 = _opt(jitgrad, case, second)
    opt2.load_state_dict(opt.state_dict())
    _run(jitgrad, opt2, second, 4)
    for a, b in zip(ref, second):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_param_groups_with_own_options_match_pytorch(torch):
    results = []
    for M in (jitgrad, torch):
        w, b = _params(M)
        kw = {} if M is jitgrad else {"foreach": False}
        opt = M.optim.RAdam([{"params": [w]}, {"params": [b], "lr": 0.2,
                                               "betas": (0.5, 0.9)}], lr=0.01, **kw)
        _run(M, opt, (w, b), 10)
        assert opt.param_groups[1]["eps"] == 1e-8
        results.append([p.detach().numpy() for p in (w, b)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_defaults_as_pytorch(torch):
    for name in ("Adamax", "NAdam", "RAdam"):
        ours = getattr(jitgrad.optim, name)([jitgrad.ones(1, requires_grad=True)]).defaults
        theirs = getattr(torch.optim, name)([torch.ones(1, requires_grad=True)]).defaults
        assert ours == {k: (tuple(v) if isinstance(v, list) else v) for k, v in theirs.items()}


@pytest.mark.parametrize("name,kw", [
    ("Adamax", {"lr": -1.0}),
    ("Adamax", {"eps": -0.1}),
    ("Adamax", {"betas": (1.0, 0.9)}),
    ("NAdam", {"betas": (0.9, -0.1)}),
    ("NAdam", {"weight_decay": -1}),
    ("NAdam", {"momentum_decay": -1e-3}),
    ("RAdam", {"lr": -0.5, "eps": -1}),
    ("RAdam", {"betas": (0.9, 1.5), "weight_decay": -1}),
])
def test_argument_errors_as_pytorch(torch, name, kw):
    with pytest.raises(ValueError) as theirs:
        getattr(torch.optim, name)([torch.ones(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError, match="^" + str(theirs.value).replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.") + "$"):
        getattr(jitgrad.optim, name)([jitgrad.ones(2, requires_grad=True)], **kw)


def test_unsupported_option_says_so():
    with pytest.raises(NotImplementedError, match="RAdam: differentiable"):
        jitgrad.optim.RAdam([jitgrad.ones(2, requires_grad=True)], differentiable=True)


def test_step_without_gradients_does_nothing():
    w = jitgrad.ones(3, requires_grad=True)
    opt = jitgrad.optim.NAdam([w])
    opt.step()  # no gradient yet: nothing to do, no state
    assert not opt.state and w.detach().numpy().tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("module", [adamax, nadam, radam])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0
