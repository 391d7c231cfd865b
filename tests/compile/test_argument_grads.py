"""jitgrad.compile: the ``.grad`` of an *argument*, read, set, accumulated or changed in place
inside a compiled function, is each call's own argument's -- never the traced call's tensor.

Every case runs a sequence of calls with new argument tensors (their ``.grad`` None or set,
to different values) eagerly and compiled, through the three call paths (positional tensors:
the generated fast path; keyword arguments and a list: the generic path), and compares
results and every argument's ``.grad`` after each call."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg


def _arg(start: float, grad: float | None):
    t = jg.tensor(np.arange(3.0) + start, requires_grad=True)
    if grad is not None:
        t.grad = jg.tensor(np.full(3, float(grad)))
    return t


def read_both(x, y):
    return x.grad * 2 + y.grad


def set_grad(x, y):
    x.grad = y.detach() * 3
    return x.sum()


def set_to_other_grad(x, y):
    x.grad = y.grad
    return x.sum()


def return_grad(x, y):
    return x.grad


def return_grad_view(x, y):
    return x.grad[1:]


def backward_inside(x, y):
    (x * y).sum().backward()
    return x.grad.clone()


def sgd_step(x, y):
    (x * x * y).sum().backward()
    with jg.no_grad():
        x -= 0.1 * x.grad
    x.grad = None
    return x.detach().clone()


def scale_grad_in_place(x, y):
    if x.grad is not None:
        x.grad.mul_(0.5)
    return x.sum()


def clip_after_backward(x, y):
    (x * x).sum().backward()
    jg.nn.utils.clip_grad_norm_([x], 1.0)
    return x.grad.sum()


def zero_then_two_backwards(x, y):
    x.grad = None
    (x * y).sum().backward()
    (x * y * 2).sum().backward()
    return x.grad


CASES = [read_both, set_grad, set_to_other_grad, return_grad, return_grad_view,
         backward_inside, sgd_step, scale_grad_in_place, clip_after_backward,
         zero_then_two_backwards]

# (x's grad, y's grad, x's start, y's start) per call: values change, and so does whether
# a .grad exists (a guard: a new plan, never the old one's)
CALLS = [(1, 2, 0.0, 1.0), (5, 7, 2.0, 3.0), (None, 7, 1.0, 2.0), (3, None, 1.0, 4.0),
         (2, 3, 5.0, 6.0), (None, None, 0.0, 1.0), (4, 4, 1.0, 1.0)]


def _run(call, calls) -> list:
    """Per call: the output and both arguments' .grad, or the error's type."""
    seen = []
    for gx, gy, vx, vy in calls:
        x, y = _arg(vx, gx), _arg(vy, gy)
        try:
            out = call(x, y)
        except Exception as e:  # noqa: BLE001 - compared with eager's error
            seen.append(type(e).__name__)
            continue
        seen.append([None if t is None else t.detach().numpy().copy()
                     for t in (out, x.grad, y.grad)])
    return seen


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return all((u is None) == (v is None) and (u is None or np.array_equal(u, v))
               for u, v in zip(a, b))


@pytest.mark.parametrize("path", ["positional", "keyword", "list"])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_an_arguments_grad_is_each_calls_own(fn, path):
    if path == "positional":
        compiled = jg.compile(fn)
    elif path == "keyword":
        inner = jg.compile(lambda x, y: fn(x, y))
        compiled = lambda x, y: inner(x, y=y)  # noqa: E731
    else:
        inner = jg.compile(lambda xy: fn(xy[0], xy[1]))
        compiled = lambda x, y: inner([x, y])  # noqa: E731
    eager, got = _run(fn, CALLS), _run(compiled, CALLS)
    for k, (a, b) in enumerate(zip(eager, got)):
        assert _same(a, b), f"call {k} {CALLS[k]}: eager {a}, compiled {b}"


def test_a_plan_serves_while_the_grad_state_holds_and_the_retrace_says_why(
        monkeypatch, capsys):
    monkeypatch.setenv("JITGRAD_LOGS", "recompiles")
    f = jg.compile(read_both)
    for k in range(4):  # new tensors, new values: one plan
        out = f(_arg(k, k + 1.0), _arg(k, 2.0))
        np.testing.assert_array_equal(out.numpy(), np.full(3, 2 * (k + 1.0) + 2.0))
    assert f.stats["traces"] == 1
    with pytest.raises(TypeError):  # as eager: y.grad is None
        f(_arg(0, 1.0), _arg(0, None))
    assert ".grad of arg1 went from" in capsys.readouterr().out


def test_the_graph_names_the_argument_whose_grad_it_sets():
    f = jg.compile(set_grad)
    text = str(f.lower(_arg(0, None), _arg(1, None)).graph)
    assert "arg0.grad = " in text


def test_a_grad_with_autograd_history_set_inside_runs_eagerly():
    """``backward(create_graph=True)`` inside leaves a ``.grad`` with history (eager): a plan
    would set a value without it, so the call runs eagerly."""
    w = jg.tensor(np.arange(3.0) + 1, requires_grad=True)

    def f(x):
        (w * w * x).sum().backward(create_graph=True)
        return w.grad.sum()

    compiled = jg.compile(f)
    for k, call in enumerate([compiled, compiled, f]):
        w.grad = None
        x = jg.tensor(np.full(3, k % 2 + 1.0), requires_grad=True)
        if k == 0:
            with pytest.warns(UserWarning, match="carries autograd history"):
                out = call(x)
        else:
            out = call(x)
        assert out.item() == 2 * (k % 2 + 1.0) * 6  # sum(2 w x)
        assert w.grad.grad_fn is not None
        w.grad.sum().backward()  # through the gradient's history, as eager
        wv = np.arange(3.0) + 1  # x.grad: w**2 from the first backward, 2w from this one
        np.testing.assert_array_equal(x.grad.numpy(), wv ** 2 + 2 * wv)
