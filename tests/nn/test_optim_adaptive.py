"""RMSprop, Adagrad and Adadelta against NumPy re-implementations of the algorithms PyTorch
documents (``torch.optim.*`` pages: the pseudo-code of each, every option), in float64 on a
least-squares problem whose gradients NumPy computes; argument errors; state layout; the
docstring examples. (Trajectories against PyTorch itself: test_optim.py; compiled steps:
test_compiled_training.py.)"""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import jitgrad
from jitgrad.optim import adadelta, adagrad, rmsprop

RNG = np.random.default_rng(5)
A = RNG.normal(size=(6, 4))
B = RNG.normal(size=6)
THETA0 = RNG.normal(size=4)


def _grad(theta, maximize=False, weight_decay=0.0):
    """The least-squares gradient, negated (``maximize``), plus ``weight_decay * theta``."""
    g = 2.0 * A.T @ (A @ theta - B)
    g = -g if maximize else g
    return g + weight_decay * theta if weight_decay else g


def _ref_adadelta(theta, steps, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    v, u = np.zeros_like(theta), np.zeros_like(theta)
    for _ in range(steps):
        g = _grad(theta, maximize, weight_decay)
        v = rho * v + (1 - rho) * g * g
        dx = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u = rho * u + (1 - rho) * dx * dx
        theta = theta - lr * dx
    return theta


def _ref_rmsprop(theta, steps, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, maximize=False):
    v, b, g_ave = (np.zeros_like(theta) for _ in range(3))
    for _ in range(steps):
        g = _grad(theta, maximize, weight_decay)
        v = alpha * v + (1 - alpha) * g * g
        vt = v
        if centered:
            g_ave = g_ave * alpha + (1 - alpha) * g
            vt = vt - g_ave * g_ave
        if momentum > 0:
            b = momentum * b + g / (np.sqrt(vt) + eps)
            theta = theta - lr * b
        else:
            theta = theta - lr * g / (np.sqrt(vt) + eps)
    return theta


def _ref_adagrad(theta, steps, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10, maximize=False):
    s = np.full_like(theta, initial_accumulator_value)
    for t in range(1, steps + 1):
        clr = lr / (1 + (t - 1) * lr_decay)
        g = _grad(theta, maximize, weight_decay)
        s = s + g * g
        theta = theta - clr * g / (np.sqrt(s) + eps)
    return theta


CASES = {
    "adadelta": ("Adadelta", _ref_adadelta, {}),
    "adadelta-all": ("Adadelta", _ref_adadelta, {"lr": 0.5, "rho": 0.8, "eps": 1e-4,
                                                  "weight_decay": 0.1}),
    "adadelta-maximize": ("Adadelta", _ref_adadelta, {"maximize": True}),
    "rmsprop": ("RMSprop", _ref_rmsprop, {}),
    "rmsprop-momentum": ("RMSprop", _ref_rmsprop, {"momentum": 0.9, "alpha": 0.9}),
    "rmsprop-centered": ("RMSprop", _ref_rmsprop, {"centered": True, "weight_decay": 0.05}),
    "rmsprop-all": ("RMSprop", _ref_rmsprop, {"centered": True, "momentum": 0.5,
                                              "maximize": True, "eps": 1e-6}),
    "adagrad": ("Adagrad", _ref_adagrad, {}),
    "adagrad-decay": ("Adagrad", _ref_adagrad, {"lr": 0.1, "lr_decay": 0.05,
                                                "initial_accumulator_value": 0.3}),
    "adagrad-all": ("Adagrad", _ref_adagrad, {"weight_decay": 0.2, "maximize": True,
                                              "eps": 1e-3}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_the_documented_algorithm(case):
    name, ref, kw = CASES[case]
    w = jitgrad.tensor(THETA0.copy(), dtype=jitgrad.float64, requires_grad=True)
    opt = getattr(jitgrad.optim, name)([w], **kw)
    for _ in range(30):
        w.grad = jitgrad.tensor(_grad(w.detach().numpy()))
        opt.step()
    np.testing.assert_allclose(w.detach().numpy(), ref(THETA0.copy(), 30, **kw), rtol=1e-11,
                               atol=1e-13)
    assert opt.state[w]["step"].item() == 30.0


def test_state_layout_as_pytorch():
    w = jitgrad.ones(3, requires_grad=True)
    assert sorted(jitgrad.optim.Adagrad([w], initial_accumulator_value=0.5).state[w]) == \
        ["step", "sum"]  # created with the optimizer
    w.grad = jitgrad.ones(3)
    opt = jitgrad.optim.RMSprop([w], momentum=0.9, centered=True)
    opt.step()
    assert sorted(opt.state[w]) == ["grad_avg", "momentum_buffer", "square_avg", "step"]
    opt = jitgrad.optim.Adadelta([w])
    opt.step()
    assert sorted(opt.state[w]) == ["acc_delta", "square_avg", "step"]
    assert opt.state_dict()["param_groups"][0]["rho"] == 0.9


@pytest.mark.parametrize("name,kw,msg", [
    ("Adadelta", {"lr": -1.0}, "Invalid learning rate: -1.0"),
    ("Adadelta", {"rho": 1.5}, "Invalid rho value: 1.5"),
    ("Adadelta", {"eps": -1e-6}, "Invalid epsilon value: -1e-06"),
    ("Adadelta", {"weight_decay": -1}, "Invalid weight_decay value: -1"),
    ("RMSprop", {"momentum": -0.5}, "Invalid momentum value: -0.5"),
    ("RMSprop", {"alpha": -0.1}, "Invalid alpha value: -0.1"),
    ("Adagrad", {"lr_decay": -1}, "Invalid lr_decay value: -1"),
    ("Adagrad", {"initial_accumulator_value": -1},
     "Invalid initial_accumulator_value value: -1"),
])
def test_argument_errors(name, kw, msg):
    with pytest.raises(ValueError, match=msg):
        getattr(jitgrad.optim, name)([jitgrad.ones(2, requires_grad=True)], **kw)


def test_unsupported_options_say_so():
    with pytest.raises(NotImplementedError, match="differentiable=True is not supported"):
        jitgrad.optim.Adagrad([jitgrad.ones(2, requires_grad=True)], differentiable=True)


@pytest.mark.parametrize("module", [adadelta, adagrad, rmsprop])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0
