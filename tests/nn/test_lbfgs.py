"""``optim.LBFGS`` against PyTorch's: the iterates, losses and evaluation counts of the fixed
step and the strong-Wolfe line search (Rosenbrock; a small network with several parameters,
one without a gradient), the history limit, the stopping rules, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
from jitgrad.optim.lbfgs import cubic_minimum

torch = pytest.importorskip("torch")


def _rosenbrock_run(M, steps=3, **kw):
    x = M.tensor(np.array([-1.2, 1.0, 0.5, -0.3]), dtype=M.float64, requires_grad=True)
    opt = M.optim.LBFGS([x], **kw)

    def closure():
        opt.zero_grad()
        loss = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
        loss.backward()
        return loss

    out = []
    for _ in range(steps):
        loss = opt.step(closure)
        st = opt.state[x]
        out.append([loss.item(), *x.tolist(), st["func_evals"], st["n_iter"]])
    return np.array(out)


CONFIGS = [dict(), dict(line_search_fn="strong_wolfe"),
           dict(history_size=3, max_iter=7, lr=0.5),
           dict(history_size=2, max_iter=30, max_eval=12, line_search_fn="strong_wolfe"),
           dict(lr=0.1, tolerance_change=1e-3)]


@pytest.mark.parametrize("kw", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_rosenbrock_matches_torch(kw):
    np.testing.assert_allclose(_rosenbrock_run(jitgrad, **kw), _rosenbrock_run(torch, **kw),
                               rtol=1e-10, atol=1e-12)


def _network_run(M, line_search):
    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((6, 3)) * 0.5, rng.standard_normal(6) * 0.1
    w2 = rng.standard_normal((1, 6)) * 0.5
    x, y = rng.standard_normal((20, 3)), rng.standard_normal((20, 1))
    params = [M.tensor(a, requires_grad=True) for a in (w1, b1, w2)]
    unused = M.zeros(2, dtype=M.float64, requires_grad=True)  # never gets a gradient
    opt = M.optim.LBFGS(params + [unused], line_search_fn=line_search, max_iter=15)
    xt, yt = M.tensor(x), M.tensor(y)

    def closure():
        opt.zero_grad()
        h = (xt @ params[0].T + params[1]).tanh()
        loss = ((h @ params[2].T - yt) ** 2).mean()
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(4)]
    return losses, [p.detach().numpy() for p in params], opt.state[params[0]]["func_evals"]


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_a_small_network_fit_matches_torch(line_search):
    j_losses, j_params, j_evals = _network_run(jitgrad, line_search)
    t_losses, t_params, t_evals = _network_run(torch, line_search)
    np.testing.assert_allclose(j_losses, t_losses, rtol=1e-9)
    for a, b in zip(j_params, t_params):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    assert j_evals == t_evals and j_losses[-1] < j_losses[0]


def test_at_the_optimum_a_step_evaluates_once():
    x = jitgrad.tensor([2.0, 2.0], dtype=jitgrad.float64, requires_grad=True)
    opt = jitgrad.optim.LBFGS([x])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = ((x - 2.0) ** 2).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 0.0 and len(calls) == 1
    assert x.tolist() == [2.0, 2.0]


def test_cubic_minimum():
    # f = (x - 1)^2 at 0 and 3: the cubic through them is the parabola, minimum 1
    assert abs(cubic_minimum(0.0, 1.0, -2.0, 3.0, 4.0, 4.0) - 1.0) < 1e-12
    # bounds clip it
    assert cubic_minimum(0.0, 1.0, -2.0, 3.0, 4.0, 4.0, bounds=(1.5, 2.0)) == 1.5


def test_errors_match_torch():
    for call in (lambda M: M.optim.LBFGS([{"params": [M.zeros(1, requires_grad=True)]},
                                          {"params": [M.zeros(1, requires_grad=True)]}]),
                 lambda M: M.optim.LBFGS([M.zeros(1, requires_grad=True)], lr=-1.0)):
        with pytest.raises(ValueError) as t_err:
            call(torch)
        with pytest.raises(ValueError) as j_err:
            call(jitgrad)
        assert str(j_err.value) == str(t_err.value)


def test_docstring_example():
    import doctest

    from jitgrad.optim import lbfgs

    assert doctest.testmod(lbfgs).failed == 0
