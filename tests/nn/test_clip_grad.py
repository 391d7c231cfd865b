"""``nn.utils.clip_grad_norm_`` / ``clip_grad_value_`` (and ``get_total_norm``,
``clip_grads_with_norm_``): PyTorch's values, in-place effects, warnings and errors, eagerly
and inside a compiled training step."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as nn
from jitgrad.nn.utils import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)


def _params(grads):
    ps = []
    for g in grads:
        p = jitgrad.zeros(*np.shape(g), requires_grad=True)
        if g is not None:
            p.grad = jitgrad.tensor(np.asarray(g, dtype=np.float32))
        ps.append(p)
    return ps


def test_clip_grad_norm_scales_and_returns_the_total_norm():
    ps = _params([[3.0, 0.0], [[0.0], [4.0]]])
    grads = [p.grad for p in ps]
    total = clip_grad_norm_(ps, max_norm=1.0)
    assert total.item() == pytest.approx(5.0)
    coef = 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose(ps[0].grad.numpy(), [3.0 * coef, 0.0], rtol=1e-6)
    np.testing.assert_allclose(ps[1].grad.numpy(), [[0.0], [4.0 * coef]], rtol=1e-6)
    assert all(p.grad is g for p, g in zip(ps, grads))  # in place


def test_clip_grad_norm_never_scales_up_and_skips_missing_grads():
    ps = _params([[0.3, 0.4]])
    ps.append(jitgrad.zeros(2, requires_grad=True))  # no grad
    total = clip_grad_norm_(iter(ps), max_norm=10.0, norm_type="inf", foreach=True)
    assert total.item() == pytest.approx(0.4)
    np.testing.assert_allclose(ps[0].grad.numpy(), [0.3, 0.4], rtol=1e-6)
    assert ps[1].grad is None
    assert clip_grad_norm_(ps[0], 1.0, norm_type=1).item() == pytest.approx(0.7)


def test_clip_grad_norm_empty():
    assert clip_grad_norm_([], 1.0).item() == 0.0
    with pytest.warns(UserWarning, match="`parameters` is an empty generator"):
        clip_grad_norm_((p for p in []), 1.0)


def test_error_if_nonfinite_leaves_grads_unchanged():
    ps = _params([[1.0, math.inf]])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from "
                       "`parameters` is non-finite, so it cannot be clipped. To disable this "
                       "error and scale the gradients by the non-finite norm anyway, set "
                       "`error_if_nonfinite=False`"):
        clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(ps[0].grad.numpy(), [1.0, math.inf])
    assert math.isinf(clip_grad_norm_(ps, 1.0).item())


def test_deprecated_clip_grad_norm_warns():
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now deprecated"):
        clip_grad_norm(_params([[1.0]]), 1.0)


def test_total_norm_and_clip_with_norm():
    ps = _params([[1.0, 2.0], [2.0]])
    total = get_total_norm([p.grad for p in ps])
    assert total.item() == pytest.approx(3.0)
    clip_grads_with_norm_(ps, 1.5, total)
    np.testing.assert_allclose(ps[1].grad.numpy(), [2.0 * 1.5 / (3.0 + 1e-6)], rtol=1e-6)


def test_clip_grad_value():
    ps = _params([[-3.0, 0.5, 2.0]])
    assert clip_grad_value_(ps, 1) is None
    np.testing.assert_array_equal(ps[0].grad.numpy(), [-1.0, 0.5, 1.0])


def test_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    grads = [rng.normal(size=(3, 4)), rng.normal(size=(5,)) * 3, rng.normal(size=())]
    for norm_type in (2.0, 1.0, float("inf"), 3.0):
        for max_norm in (0.5, 100.0):
            jp = _params(grads)
            tp = [torch.zeros(np.shape(g), requires_grad=True) for g in grads]
            for p, g in zip(tp, grads):
                p.grad = torch.tensor(np.asarray(g, dtype=np.float32))
            jt = clip_grad_norm_(jp, max_norm, norm_type)
            tt = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type)
            np.testing.assert_allclose(jt.numpy(), tt.numpy(), rtol=1e-6)
            for a, b in zip(jp, tp):
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)
    jp, tp = _params(grads), [torch.zeros(np.shape(g), requires_grad=True) for g in grads]
    for p, g in zip(tp, grads):
        p.grad = torch.tensor(np.asarray(g, dtype=np.float32))
    clip_grad_value_(jp, 0.7)
    torch.nn.utils.clip_grad_value_(tp, 0.7)
    for a, b in zip(jp, tp):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_clipping_inside_a_compiled_step_equals_eager():
    def make():
        jitgrad.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        return model, jitgrad.optim.SGD(model.parameters(), lr=0.1)

    x = jitgrad.tensor(np.random.default_rng(3).normal(size=(16, 4)).astype(np.float32))
    y = jitgrad.tensor(np.random.default_rng(4).normal(size=(16, 1)).astype(np.float32))
    results = []
    for compiled in (False, True):
        model, opt = make()

        def step(model=model, opt=opt):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean() * 50.0
            loss.backward()
            norm = clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            return loss, norm

        f = jitgrad.compile(step) if compiled else step
        out = [tuple(t.item() for t in f()) for _ in range(3)]
        results.append((out, [p.detach().numpy().copy() for p in model.parameters()]))
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(a, b)
