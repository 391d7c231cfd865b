"""ASGD, Rprop, Adafactor and SparseAdam. Against PyTorch: trajectories step for step in
float64 (to ~1e-12) and float32 (to a few ulp), with every option, two parameter groups and
gradients NumPy computes from the parameters (so only the optimizers' arithmetic differs),
state and state_dict layout, a state torch.save wrote resumed here, learning-rate schedules,
argument errors and SparseAdam's dense-gradient error, word for word. Without PyTorch:
NumPy re-implementations of the documented algorithms, closed-form first steps, convergence
on a quadratic, resuming from a state_dict, compiled training steps equal to eager ones."""

from __future__ import annotations

import doctest
import io

import numpy as np
import pytest
from helpers import import_example

import jitgrad
from jitgrad.optim import adafactor, asgd, rprop, sparse_adam

RNG = np.random.default_rng(17)
W0 = RNG.standard_normal((5, 4))
B0 = RNG.standard_normal(4)
A = RNG.standard_normal((5, 4))


def _grads(w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A smooth, non-separable gradient field of the parameters' current values."""
    return np.sin(3 * w) + A * np.tanh(w) + 0.2 * w - 0.1 * w.sum(0), np.cos(2 * b) + 0.3 * b


CASES = {
    "ASGD": ("ASGD", {"lr": 0.05}),
    "ASGD-averaging-wd": ("ASGD", {"lr": 0.05, "lambd": 0.01, "alpha": 0.6, "t0": 3,
                                   "weight_decay": 0.1}),
    "ASGD-maximize": ("ASGD", {"lr": 0.02, "t0": 1, "maximize": True}),
    "Rprop": ("Rprop", {"lr": 0.05}),
    "Rprop-etas-step_sizes-maximize": ("Rprop", {"lr": 0.05, "etas": (0.3, 1.7),
                                                 "step_sizes": (1e-3, 0.2),
                                                 "maximize": True}),
    "Adafactor": ("Adafactor", {"lr": 0.05}),
    "Adafactor-all": ("Adafactor", {"lr": 0.05, "beta2_decay": -0.5, "eps": (1e-4, 1e-2),
                                    "d": 1.5, "weight_decay": 0.1, "maximize": True}),
    "Adafactor-low-lr": ("Adafactor", {"lr": 1e-3, "eps": (1e-30, 0.5)}),  # rho_t = lr
}


def _params(M, dtype):
    d = getattr(M, dtype)
    return [M.tensor(W0, dtype=d, requires_grad=True), M.tensor(B0, dtype=d, requires_grad=True)]


def _opt(M, name, params, **kw):
    if M is not jitgrad and name != "SparseAdam":
        kw["foreach"] = False  # PyTorch's single-tensor update, the one jitgrad follows
    return getattr(M.optim, name)([{"params": params[:1]}, {"params": params[1:], "lr": 0.03}],
                                  **kw)


def _feed(M, params):
    w, b = (p.detach().numpy() for p in params)
    for p, g in zip(params, _grads(w, b)):
        p.grad = M.tensor(g.astype(w.dtype))


def _run(M, opt, params, steps):
    """``steps`` updates; the parameters after each, flattened."""
    out = []
    for _ in range(steps):
        _feed(M, params)
        opt.step()
        out.append(np.concatenate([p.detach().numpy().ravel() for p in params]))
    return np.array(out)


#: float64: ~1e-12 relative; float32: a few ulp of the values' scale (their size is ~1)
TOL = {"float64": {"rtol": 1e-12, "atol": 1e-14}, "float32": {"rtol": 5e-7, "atol": 5e-7}}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_trajectory_matches_torch(torch, case, dtype):
    name, kw = CASES[case]
    jp, tp = _params(jitgrad, dtype), _params(torch, dtype)
    ours = _run(jitgrad, _opt(jitgrad, name, jp, **kw), jp, 10)
    theirs = _run(torch, _opt(torch, name, tp, **kw), tp, 10)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, err_msg=f"step {i + 1}", **TOL[dtype])


@pytest.mark.parametrize("case", sorted(CASES))
def test_state_and_state_dict_as_torch(torch, case):
    name, kw = CASES[case]
    jp, tp = _params(jitgrad, "float32"), _params(torch, "float32")
    jopt, topt = _opt(jitgrad, name, jp, **kw), _opt(torch, name, tp, **kw)
    _run(jitgrad, jopt, jp, 3)
    _run(torch, topt, tp, 3)
    jsd, tsd = jopt.state_dict(), topt.state_dict()
    assert sorted(jsd["state"]) == sorted(tsd["state"]) == [0, 1]
    for i in (0, 1):
        assert list(jsd["state"][i]) == list(tsd["state"][i])  # same keys, same order
        for key, value in jsd["state"][i].items():
            ref = tsd["state"][i][key]
            assert value.dtype.name == str(ref.dtype).removeprefix("torch."), key
            assert tuple(value.shape) == tuple(ref.shape), key
            np.testing.assert_allclose(value.numpy(), ref.numpy(), rtol=1e-6, atol=1e-7,
                                       err_msg=key)
    for jg, tg in zip(jsd["param_groups"], tsd["param_groups"]):
        assert set(jg) == set(tg)
        assert {k: v for k, v in jg.items() if k != "foreach"} == {
            k: tuple(v) if isinstance(v, list) and k != "params" else v
            for k, v in tg.items() if k != "foreach"}


@pytest.mark.parametrize("case", ["ASGD-averaging-wd", "Rprop-etas-step_sizes-maximize",
                                  "Adafactor-all"])
def test_resumes_a_state_torch_saved(torch, case):
    """PyTorch trains 4 steps and saves its optimizer's state_dict; a fresh optimizer loads
    the file in each library (state entries cast to the parameters' dtype, as PyTorch's)
    and both take 4 more: the same values."""
    name, kw = CASES[case]
    jp, tp = _params(jitgrad, "float64"), _params(torch, "float64")
    topt = _opt(torch, name, tp, **kw)
    _run(torch, topt, tp, 4)
    buf = io.BytesIO()
    torch.save(topt.state_dict(), buf)
    with jitgrad.no_grad():
        for p, q in zip(jp, tp):
            p.copy_(jitgrad.tensor(q.detach().numpy()))
    opts = []
    for M, params in ((jitgrad, jp), (torch, tp)):
        buf.seek(0)
        opts.append(_opt(M, name, params, **kw))
        opts[-1].load_state_dict(M.load(buf))
    np.testing.assert_allclose(_run(jitgrad, opts[0], jp, 4), _run(torch, opts[1], tp, 4),
                               **TOL["float64"])


def test_defaults_as_torch(torch):
    for name in ("ASGD", "Rprop", "Adafactor", "SparseAdam"):
        ours = getattr(jitgrad.optim, name)([jitgrad.ones(1, requires_grad=True)]).defaults
        theirs = getattr(torch.optim, name)([torch.ones(1, requires_grad=True)]).defaults
        assert ours == {k: (tuple(v) if isinstance(v, list) else v) for k, v in theirs.items()}


@pytest.mark.parametrize("name,kw", [
    ("ASGD", {"lr": -1.0}),
    ("ASGD", {"weight_decay": -0.5}),
    ("Rprop", {"lr": -0.1, "etas": (2.0, 3.0)}),
    ("Rprop", {"etas": (0.5, 0.9)}),
    ("Rprop", {"etas": (0.0, 1.2)}),
    ("Adafactor", {"lr": -1.0}),
    ("Adafactor", {"beta2_decay": 0.5}),
    ("Adafactor", {"eps": (-1.0, 1e-3)}),
    ("Adafactor", {"eps": (None, -1e-3)}),
    ("Adafactor", {"d": 0.5}),
    ("Adafactor", {"weight_decay": -0.1}),
    ("SparseAdam", {"lr": 0.0}),
    ("SparseAdam", {"eps": 0.0}),
    ("SparseAdam", {"betas": (0.9, 1.0)}),
])
def test_argument_errors_as_torch(torch, name, kw):
    with pytest.raises(ValueError) as theirs:
        getattr(torch.optim, name)([torch.ones(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError) as ours:
        getattr(jitgrad.optim, name)([jitgrad.ones(2, requires_grad=True)], **kw)
    assert str(ours.value) == str(theirs.value)


def test_sparse_adam_raises_torchs_error_for_a_dense_gradient(torch):
    errors = []
    for M in (jitgrad, torch):
        w = M.ones(3, requires_grad=True)
        opt = M.optim.SparseAdam([w], lr=0.1)
        opt.step()  # no gradient: nothing to do
        w.grad = M.ones(3)
        with pytest.raises(RuntimeError) as err:
            opt.step()
        errors.append(str(err.value))
        assert not opt.state
    assert errors[0] == errors[1]


@pytest.mark.parametrize("name,sched,kw", [
    ("ASGD", "StepLR", {"step_size": 2, "gamma": 0.5}),
    ("Adafactor", "CosineAnnealingLR", {"T_max": 5}),
    ("Rprop", "ExponentialLR", {"gamma": 0.5}),  # (Rprop reads lr once: its first step sizes)
])
def test_lr_schedules_drive_them_as_torch(torch, name, sched, kw):
    runs = []
    for M in (jitgrad, torch):
        params = _params(M, "float64")
        opt = _opt(M, name, params, lr=0.1)
        s = getattr(M.optim.lr_scheduler, sched)(opt, **kw)
        out = []
        for _ in range(8):
            out.append(_run(M, opt, params, 1)[0])
            s.step()
        runs.append((np.array(out), [g["lr"] for g in opt.param_groups]))
    np.testing.assert_allclose(runs[0][0], runs[1][0], **TOL["float64"])
    assert runs[0][1] == pytest.approx(runs[1][1], rel=1e-15)


# ------------------------------------------------------------------- without torch
def _ref_asgd(theta, steps, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0,
              maximize=False):
    """PyTorch's documented ASGD, in NumPy: returns the last iterate and ``ax``."""
    eta, mu, ax = float(np.float32(lr)), 1.0, theta.copy()
    for t in range(1, steps + 1):
        g = _grad_q(theta)
        g = -g if maximize else g
        g = g + weight_decay * theta
        theta = theta * (1 - lambd * eta) - eta * g
        ax = theta.copy() if mu == 1 else ax + (theta - ax) * mu
        # (state entries of the default dtype, float32, as PyTorch's)
        eta = float(np.float32(lr / (1 + lambd * lr * t) ** alpha))
        mu = float(np.float32(1 / max(1, t - t0)))
    return theta, ax


def _ref_rprop(theta, steps, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50),
               maximize=False):
    prev, size = np.zeros_like(theta), np.full_like(theta, lr)
    for _ in range(steps):
        g = _grad_q(theta)
        g = -g if maximize else g
        s = np.sign(g * prev)
        size = np.clip(size * np.where(s > 0, etas[1], np.where(s < 0, etas[0], 1.0)),
                       *step_sizes)
        g = np.where(s < 0, 0.0, g)
        theta = theta - np.sign(g) * size
        prev = g
    return theta


def _ref_adafactor(theta, steps, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                   weight_decay=0.0, maximize=False):
    """The documented algorithm for a matrix (factored second moment)."""
    eps1 = np.finfo(theta.dtype).eps if eps[0] is None else eps[0]
    r, c = np.zeros((theta.shape[0], 1)), np.zeros((1, theta.shape[1]))
    for t in range(1, steps + 1):
        g = _grad_q(theta)
        g = -g if maximize else g
        beta2 = 1 - t ** beta2_decay
        rho = min(lr, 1 / np.sqrt(t))
        alpha = max(eps[1], np.sqrt(np.mean(theta ** 2))) * rho
        theta = theta - lr * weight_decay * theta
        r = beta2 * r + (1 - beta2) * np.mean(g * g, axis=1, keepdims=True)
        c = beta2 * c + (1 - beta2) * np.mean(g * g, axis=0, keepdims=True)
        v = r @ c / max(np.mean(r), eps1)
        u = g / np.sqrt(np.maximum(v, eps1 * eps1))
        u = u / max(1.0, np.sqrt(np.mean(u ** 2)) / d)
        theta = theta - alpha * u
    return theta


Q = RNG.standard_normal((4, 4))
Q = Q @ Q.T + np.eye(4)  # positive definite
TARGET = RNG.standard_normal((4, 3))


def _grad_q(theta):
    """The gradient of the quadratic ``0.5 * tr((X - T)' Q (X - T))``."""
    return Q @ (theta - TARGET)


REF_CASES = {
    "asgd": ("ASGD", _ref_asgd, {"lr": 0.05, "lambd": 0.01, "t0": 4, "weight_decay": 0.1}),
    "asgd-maximize": ("ASGD", _ref_asgd, {"lr": 0.01, "alpha": 0.5, "maximize": True}),
    "rprop": ("Rprop", _ref_rprop, {"lr": 0.05}),
    "rprop-all": ("Rprop", _ref_rprop, {"lr": 0.1, "etas": (0.4, 1.5), "step_sizes": (1e-3, 0.3),
                                        "maximize": True}),
    "adafactor": ("Adafactor", _ref_adafactor, {"lr": 0.05}),
    "adafactor-all": ("Adafactor", _ref_adafactor, {"lr": 0.05, "beta2_decay": -0.6,
                                                    "eps": (1e-6, 1e-2), "d": 1.2,
                                                    "weight_decay": 0.05,
                                                    "maximize": True}),
}


@pytest.mark.parametrize("case", sorted(REF_CASES))
def test_matches_the_documented_algorithm(case):
    name, ref, kw = REF_CASES[case]
    theta0 = W0[:4, :3].copy()
    w = jitgrad.tensor(theta0, requires_grad=True)
    opt = getattr(jitgrad.optim, name)([w], **kw)
    for _ in range(25):
        w.grad = jitgrad.tensor(_grad_q(w.detach().numpy()))
        opt.step()
    expected = ref(theta0, 25, **kw)
    if name == "ASGD":
        expected, ax = expected
        np.testing.assert_allclose(opt.state[w]["ax"].numpy(), ax, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w.detach().numpy(), expected, rtol=1e-11, atol=1e-14)
    assert opt.state[w]["step"].item() == 25.0


def test_asgd_average_is_the_mean_of_the_iterates_after_t0():
    w = jitgrad.tensor(W0[:4, :3].copy(), requires_grad=True)
    opt = jitgrad.optim.ASGD([w], lr=0.05, lambd=0.0, t0=3)
    iterates = []
    for _ in range(9):
        w.grad = jitgrad.tensor(_grad_q(w.detach().numpy()))
        opt.step()
        iterates.append(w.detach().numpy().copy())
    # mu = 1 / (t - t0) from step t0 + 2 on: ax averages the iterates since step t0 + 2
    np.testing.assert_allclose(opt.state[w]["ax"].numpy(), np.mean(iterates[4:], axis=0),
                               rtol=1e-6)
    assert opt.state[w]["mu"].item() == pytest.approx(1 / 6)


def test_closed_form_first_steps():
    g = np.array([2.0, -4.0, 0.0])

    def first(name, **kw):
        w = jitgrad.tensor([1.0, -2.0, 3.0], dtype=jitgrad.float64, requires_grad=True)
        w.grad = jitgrad.tensor(g)
        opt = getattr(jitgrad.optim, name)([w], **kw)
        opt.step()
        return w.detach().numpy(), opt.state[w]

    w, st = first("ASGD", lr=0.1, lambd=0.5, alpha=0.5, weight_decay=0.2)
    eta = float(np.float32(0.1))  # (a float32 state entry, as PyTorch's)
    np.testing.assert_allclose(w, np.array([1.0, -2.0, 3.0]) * (1 - 0.5 * eta)
                               - eta * (g + 0.2 * np.array([1.0, -2.0, 3.0])), rtol=1e-15)
    assert st["eta"].item() == pytest.approx(0.1 / (1 + 0.05) ** 0.5, rel=1e-7)
    w, st = first("Rprop", lr=0.25)  # first step: no sign history, moves by lr
    np.testing.assert_array_equal(w, [0.75, -1.75, 3.0])
    np.testing.assert_array_equal(st["step_size"].numpy(), [0.25] * 3)
    w, st = first("Adafactor", lr=0.1, eps=(1e-30, 1e-3))  # a vector: variance = g**2
    rms = np.sqrt(np.mean(np.array([1.0, 4.0, 9.0])))
    upd = np.array([1.0, -1.0, 0.0])  # g / sqrt(g**2) (0 where g is 0); RMS < 1: no clip
    np.testing.assert_allclose(w, np.array([1.0, -2.0, 3.0]) - 0.1 * rms * upd, rtol=1e-14)
    np.testing.assert_array_equal(st["variance"].numpy(), g ** 2)


@pytest.mark.parametrize("name,kw,steps", [
    ("ASGD", {"lr": 0.05, "t0": 100}, 300),
    ("Rprop", {"lr": 0.01}, 100),
    ("Adafactor", {"lr": 0.1}, 300),
])
def test_converges_on_a_quadratic(name, kw, steps):
    w = jitgrad.zeros(4, 3, dtype=jitgrad.float64, requires_grad=True)
    opt = getattr(jitgrad.optim, name)([w], **kw)
    for _ in range(steps):
        opt.zero_grad()
        diff = w - jitgrad.tensor(TARGET)
        (0.5 * (diff * (jitgrad.tensor(Q) @ diff)).sum()).backward()
        opt.step()
    np.testing.assert_allclose(w.detach().numpy(), TARGET, atol=2e-2)
    if name == "ASGD":  # the average of the last 200 iterates is there too
        np.testing.assert_allclose(opt.state[w]["ax"].numpy(), TARGET, atol=2e-2)


@pytest.mark.parametrize("case", sorted(CASES))
def test_loaded_state_continues_the_same_trajectory(case):
    name, kw = CASES[case]
    ref = _params(jitgrad, "float32")
    straight = _run(jitgrad, _opt(jitgrad, name, ref, **kw), ref, 8)
    first = _params(jitgrad, "float32")
    opt = _opt(jitgrad, name, first, **kw)
    _run(jitgrad, opt, first, 4)
    second = [p.detach().clone().requires_grad_() for p in first]
    opt2 = _opt(jitgrad, name, second, **kw)
    opt2.load_state_dict(opt.state_dict())
    np.testing.assert_array_equal(_run(jitgrad, opt2, second, 4), straight[4:])


def test_asgd_capturable_branch_equals_the_float_branch():
    runs = []
    for capturable in (False, True):
        ps = _params(jitgrad, "float32")
        runs.append(_run(jitgrad, _opt(jitgrad, "ASGD", ps, capturable=capturable,
                                       **CASES["ASGD-averaging-wd"][1]), ps, 10))
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-6, atol=1e-7)


def test_options_and_unsupported_ones():
    p = [jitgrad.ones(2, requires_grad=True)]
    for name in ("ASGD", "Rprop"):
        opt = getattr(jitgrad.optim, name)(p, foreach=True)  # accepted: one update either way
        assert opt.param_groups[0]["foreach"] is True
        with pytest.raises(NotImplementedError, match=f"{name}: differentiable=True is not "
                                                      "supported"):
            getattr(jitgrad.optim, name)(p, differentiable=True)
    assert jitgrad.optim.Adafactor(p, foreach=True).defaults["eps"] == (None, 1e-3)
    with pytest.raises(TypeError):
        jitgrad.optim.Adafactor(p, differentiable=True)  # not an argument, as PyTorch's


def test_sparse_adam_without_torch():
    w = jitgrad.ones(2, requires_grad=True)
    opt = jitgrad.optim.SparseAdam([w], lr=0.1, betas=[0.8, 0.9], maximize=True)
    assert opt.param_groups[0]["betas"] == (0.8, 0.9)
    opt.load_state_dict(opt.state_dict())
    w.grad = jitgrad.ones(2)
    with pytest.raises(RuntimeError, match="^SparseAdam does not support dense gradients, "
                                           "please consider Adam instead$"):
        opt.step()
    for kw, msg in (({"lr": 0.0}, "Invalid learning rate: 0.0"),
                    ({"eps": -1.0}, "Invalid epsilon value: -1.0"),
                    ({"betas": (1.0, 0.9)}, "Invalid beta parameter at index 0: 1.0")):
        with pytest.raises(ValueError, match=f"^{msg}$"):
            jitgrad.optim.SparseAdam([w], **kw)


def test_adafactor_state_shapes():
    conv = jitgrad.zeros(6, 3, 2, 5, requires_grad=True)  # factored over the last two dims
    bias = jitgrad.zeros(6, requires_grad=True)
    scalar = jitgrad.zeros((), requires_grad=True)
    opt = jitgrad.optim.Adafactor([conv, bias, scalar])
    for p in (conv, bias, scalar):
        p.grad = jitgrad.ones(p.shape)
    opt.step()
    assert list(opt.state[conv]) == ["step", "row_var", "col_var"]
    assert tuple(opt.state[conv]["row_var"].shape) == (6, 3, 2, 1)
    assert tuple(opt.state[conv]["col_var"].shape) == (6, 3, 1, 5)
    assert list(opt.state[bias]) == ["step", "variance"]
    assert tuple(opt.state[scalar]["variance"].shape) == ()
    assert np.isfinite(conv.detach().numpy()).all()


# ------------------------------------------------------------------- compiled steps
make_step = import_example("train_digits").make_step

COMPILED = {
    "asgd": lambda ps: jitgrad.optim.ASGD(ps, lr=0.05, lambd=1e-3, t0=10, weight_decay=1e-3),
    "rprop": lambda ps: jitgrad.optim.Rprop(ps, lr=1e-3),
    "adafactor": lambda ps: jitgrad.optim.Adafactor(ps, lr=1e-2, weight_decay=1e-3),
}


def _train(compiled, make_opt, steps=24, sched=None):
    g = np.random.default_rng(3)
    xs = g.standard_normal((steps, 16, 12)).astype(np.float32)
    ys = g.integers(0, 5, (steps, 16))
    jitgrad.manual_seed(0)
    model = jitgrad.nn.Sequential(jitgrad.nn.Linear(12, 16), jitgrad.nn.Tanh(),
                                  jitgrad.nn.Linear(16, 5))
    opt = make_opt(model.parameters())
    scheduler = sched(opt) if sched else None
    step = make_step(model, opt)
    if compiled:
        step = jitgrad.compile(step, fullgraph=True)  # no graph break: no .item() traced
    losses = []
    for i in range(steps):
        n = 16 if i % 4 else 9  # a short batch now and then: one more trace, not more
        losses.append(step(jitgrad.tensor(xs[i, :n]), jitgrad.tensor(ys[i, :n])).item())
        if scheduler is not None:
            scheduler.step()
    return [p.detach().numpy().copy() for p in model.parameters()], losses, step


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_training_equals_eager(name):
    pe, le, _ = _train(False, COMPILED[name])
    pc, lc, step = _train(True, COMPILED[name])
    np.testing.assert_allclose(lc, le, rtol=2e-5, atol=1e-6)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    # the first step (creating the state, short batch), the short batch, the full batch
    assert step.stats["traces"] == 3 and step.stats["calls"] == 24


def test_compiled_asgd_reads_the_scheduled_rate_without_retracing():
    sched = lambda opt: jitgrad.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.7)  # noqa: E731
    pe, le, _ = _train(False, COMPILED["asgd"], sched=sched)
    pc, lc, step = _train(True, COMPILED["asgd"], sched=sched)
    np.testing.assert_allclose(lc, le, rtol=2e-5, atol=1e-6)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    assert step.stats["traces"] == 3


@pytest.mark.parametrize("module", [asgd, rprop, adafactor, sparse_adam])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0
