"""A compiled call that raises leaves what eager mode leaves.

A plan sets leaves' ``.grad``s and writes back in-place results at its end, so a plan that
raised part-way (a target out of range, a failed value check) used to leave the previous
step's ``.grad``s where eager mode's ``zero_grad()`` had set None. Such a call now runs
again eagerly when its plan had changed nothing outside it yet (``Plan.committed``): eager
mode's error, with eager mode's effects up to it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F

GOOD = jg.tensor([0, 1, 2, 0, 1])
BAD = jg.tensor([0, 1, 3, 0, 1])


def _model_and_opt():
    jg.manual_seed(0)
    model = jg.nn.Linear(4, 3)
    return model, jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _state(model, opt) -> list:
    out = []
    for p in model.parameters():
        out += [p.detach().numpy().copy(), None if p.grad is None else p.grad.numpy().copy(),
                p._version]
        st = opt.state.get(p, {})
        out.append(None if "momentum_buffer" not in st else
                   st["momentum_buffer"].numpy().copy())
    return out


def _assert_same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y


def _step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _run_steps(compiled: bool, call) -> tuple:
    """Two good steps, one with a bad target, one more good step: the error and the state
    after the bad call and at the end."""
    model, opt = _model_and_opt()
    step = _step(model, opt)
    f = jg.compile(step) if compiled else step
    x = jg.randn(5, 4, generator=jg.Generator().manual_seed(1))
    call(f, x, GOOD)
    call(f, x, GOOD)
    with pytest.raises(IndexError) as err:
        call(f, x, BAD)
    after_error = _state(model, opt)
    loss = call(f, x, GOOD)
    return str(err.value), after_error, _state(model, opt), loss.item()


@pytest.mark.parametrize("how", ["positional", "keywords"])  # the generated path, the generic
def test_a_step_raising_after_zero_grad_leaves_the_grads_none_as_eager(how):
    call = (lambda f, x, y: f(x, y)) if how == "positional" else (lambda f, x, y: f(x=x, y=y))
    msg_e, err_e, end_e, loss_e = _run_steps(False, call)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # eager mode raises too: no warning
        msg_c, err_c, end_c, loss_c = _run_steps(True, call)
    assert msg_c == msg_e == "Target 3 is out of bounds."
    assert err_e[1] is None  # (zero_grad ran before the error)
    _assert_same(err_c, err_e)
    _assert_same(end_c, end_e)
    assert loss_c == loss_e


def test_a_loss_compiled_alone_raises_eager_error_and_changes_nothing():
    """The joint forward+backward plan of a loss (backward called outside) raises too."""
    jg.manual_seed(0)
    w = jg.randn(4, 3, requires_grad=True)

    def loss_fn(x, y):
        return F.cross_entropy(x @ w, y)

    f = jg.compile(loss_fn)
    x = jg.randn(5, 4)
    f(x, GOOD).backward()
    one = w.grad.numpy().copy()
    for _ in range(2):
        f(x, GOOD).backward()
    g = w.grad.numpy().copy()
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        f(x, BAD)
    np.testing.assert_array_equal(w.grad.numpy(), g)
    assert f.stats["eager_after_error"] == 1 and f.stats["cache_hits"] == 3
    w.grad = None
    f(x, GOOD).backward()  # compiled again
    np.testing.assert_array_equal(w.grad.numpy(), one)
    assert f.stats["cache_hits"] == 4


def test_a_write_before_a_step_that_may_raise_is_not_made_in_place():
    """``b.add_(1)`` ahead of a loss that may raise is written back at the plan's end, not
    by its kernel in place: the raising call runs again eagerly, and ``b`` is written once
    per call with eager mode's version count."""
    results = []
    for compiled in (False, True):
        jg.manual_seed(0)
        w = jg.randn(4, 3, requires_grad=True)
        b = jg.zeros(3)

        def step(x, y, w=w, b=b):
            with jg.no_grad():
                b.add_(1.0)
            return F.cross_entropy(x @ w + b, y)

        f = jg.compile(step) if compiled else step
        x = jg.randn(5, 4)
        f(x, GOOD)
        f(x, GOOD)
        with pytest.raises(IndexError, match="Target 3 is out of bounds"):
            f(x, BAD)
        results.append((b.numpy().copy(), b._version))
        if compiled:
            assert f.stats["eager_after_error"] == 1
    assert results[0][0].tolist() == [3.0, 3.0, 3.0]
    np.testing.assert_array_equal(results[1][0], results[0][0])
    assert results[1][1] == results[0][1]


def test_a_value_that_may_raise_is_computed_even_when_unused():
    """Dead-code elimination keeps what may raise (an NLL of a target out of range whose
    value is dropped): the compiled call raises where eager mode does."""
    f = jg.compile(lambda x, y: (F.nll_loss(x, y), x.sum())[1])
    x = jg.randn(5, 3)
    assert f(x, GOOD).item() == x.sum().item()
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        f(x, BAD)


def test_a_plan_error_eager_mode_does_not_raise_warns_and_returns_eager_result():
    def fn(x):
        return (x * 2).sum()

    f = jg.compile(fn)
    x = jg.arange(4.0)
    f(x)
    f(x)
    entry = next(iter(f._entries.values()))[0]

    def broken(flat):
        raise RuntimeError("a kernel failed")

    entry.run, f._fast = broken, None
    with pytest.warns(RuntimeWarning, match="raised RuntimeError: a kernel failed, where "
                                            "eager mode does not"):
        assert f(x).item() == 12.0


def _raising_sequence(compiled: bool, make, targets) -> tuple:
    """Calls of ``make()``'s step over ``targets`` (the third raises): the error, and what
    the caller sees after each call and at the end (a draw of the default generator too)."""
    jg.manual_seed(0)
    model, opt, step = make()
    f = jg.compile(step) if compiled else step
    x = jg.randn(5, 4, generator=jg.Generator().manual_seed(1))
    seen, err = [], None
    for y in targets:
        try:
            f(x, y)
        except IndexError as e:
            err = str(e)
        seen.append(_state(model, opt) + [
            b.numpy().copy() if b.dtype.is_floating_point else int(b) for b in model.buffers()])
    seen.append(jg.rand(3).numpy())
    return err, seen, (f.stats if compiled else None)


def _dropout_model():
    model = jg.nn.Sequential(jg.nn.Linear(4, 3), jg.nn.Dropout(0.5))
    opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, opt, _step(model, opt)


def _batch_norm_model():
    model = jg.nn.Sequential(jg.nn.Linear(4, 3), jg.nn.BatchNorm1d(3))
    opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, opt, _step(model, opt)


def _adam_model():  # (Adam's step counters: written before the loss, by a hoisted group)
    model = jg.nn.Sequential(jg.nn.Linear(4, 8), jg.nn.Tanh(), jg.nn.Linear(8, 3))
    opt = jg.optim.Adam(model.parameters(), lr=0.01)
    return model, opt, _step(model, opt)


def _error_after_the_step():
    model = jg.nn.Linear(4, 3)
    opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y.clamp(0, 2))
        loss.backward()
        opt.step()
        F.nll_loss(model(x).log_softmax(1), y)  # a metric after the step raises
        return loss
    return model, opt, step



@pytest.mark.parametrize("make", [_dropout_model, _batch_norm_model, _adam_model,
                                  _error_after_the_step],
                         ids=["dropout", "batch_norm", "adam", "error_after_the_step"])
def test_a_raising_call_leaves_state_and_random_stream_as_eager(make):
    """Random draws before the error (the eager rerun starts from the generators' states
    the plan started with), a batch norm's running statistics and Adam's step counters
    written before the loss (no in-place write comes before a step that may raise), an
    error after ``opt.step()``: parameters, ``.grad``s, optimizer state, buffers, versions
    and the next random numbers are eager mode's after every call."""
    targets = [GOOD, GOOD, BAD, GOOD, GOOD]
    err_e, seen_e, _ = _raising_sequence(False, make, targets)
    err_c, seen_c, stats = _raising_sequence(True, make, targets)
    assert err_c == err_e == "Target 3 is out of bounds."
    for a, b in zip(seen_c, seen_e):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        elif make is _adam_model:  # (Adam: compiled to ~1e-7, docs/architecture.md)
            for x, y in zip(a, b):
                if isinstance(x, np.ndarray):
                    np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
                else:
                    assert x == y
        else:
            _assert_same(a, b)
    assert stats["eager_after_error"] == 1 and stats["cache_hits"] >= 3
