"""In-place ops on views inside a compiled function (``h[:, :2].mul_(3)``,
``y[:, -1].zero_()``, a transposed or diagonal view, ``copy_`` of another dtype): traced as
the base's new value with the view's elements replaced (``Tracer._write_into_view``), so
the function compiles and every call equals eager mode bit for bit -- outputs, gradients
and the arguments written in place."""

import numpy as np
import pytest

import jitgrad

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5)).astype(np.float32)
SQ = RNG.standard_normal((4, 4)).astype(np.float32)


def scale_slice(x):
    h = x * 2
    h[:, :2].mul_(3)
    return (h * h).sum()


def zero_column(y):
    y[:, -1].zero_()
    return y.sum()


def transposed_row(x):
    h = x * 3
    h.t()[1].add_(1.5)
    return (h * x).sum()


def diagonal_view(s):
    h = s * 1.0
    h.diagonal().mul_(0.5)
    return h.exp().sum()


def copy_other_dtype(x):
    h = x + 1
    h[1:3, 1:4].copy_((x[1:3, 1:4] * 3).double())
    return h.square().sum()


def written_view_read_again(x):
    h = x + 1
    v = h[:, 1:3]
    v.add_(1).mul_(2)
    return (v * h[:, 1:3]).sum() + h.sum()


def broadcast_value(x):
    h = x.clone()
    h[0:2].copy_(x[3])
    return (h * x).sum()


FUNCTIONS = [scale_slice, transposed_row, copy_other_dtype, written_view_read_again,
             broadcast_value]


def _equals_eager(fn, data):
    """Three calls of ``compile(fn)`` against ``fn``: loss and gradient bit for bit, and no
    eager fallback."""
    cf = jitgrad.compile(fn)
    for _ in range(3):
        xe = jitgrad.tensor(data, requires_grad=True)
        xc = jitgrad.tensor(data, requires_grad=True)
        want, got = fn(xe), cf(xc)
        want.backward()
        got.backward()
        assert got.item() == want.item()
        np.testing.assert_array_equal(xc.grad.numpy(), xe.grad.numpy())
    assert cf.eager_reason(xc) is None


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_values_and_gradients_equal_eager(fn):
    _equals_eager(fn, X)


def test_diagonal_view():
    _equals_eager(diagonal_view, SQ)


def test_argument_written_through_a_view():
    cf = jitgrad.compile(zero_column)
    for i in range(3):
        ye = jitgrad.tensor(X + i)
        yc = jitgrad.tensor(X + i)
        assert cf(yc).item() == zero_column(ye).item()
        np.testing.assert_array_equal(yc.numpy(), ye.numpy())
        assert yc._version == ye._version
    assert cf.eager_reason(yc) is None


def test_buffer_updated_through_a_view_in_a_step():
    from jitgrad import nn

    class Tracker(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(5, 3)
            self.register_buffer("stats", jitgrad.zeros(2, 3))

        def forward(self, x):
            out = self.lin(x)
            with jitgrad.no_grad():
                self.stats[0].mul_(0.9).add_(out.mean(0) * 0.1)
            return out.square().mean()

    jitgrad.manual_seed(0)
    eager = Tracker()
    jitgrad.manual_seed(0)
    compiled = Tracker()
    cm = jitgrad.compile(compiled)
    x = jitgrad.tensor(X)
    for _ in range(3):
        for m in (eager, compiled):
            m.zero_grad()
        want, got = eager(x), cm(x)
        want.backward()
        got.backward()
        assert got.item() == want.item()
        np.testing.assert_array_equal(compiled.stats.numpy(), eager.stats.numpy())
        np.testing.assert_array_equal(compiled.lin.weight.grad.numpy(),
                                      eager.lin.weight.grad.numpy())
    assert cm.forward.eager_reason(x) is None


def saved_output_written(x):
    h = x.tanh()  # tanh saves its output: writing into it breaks the backward
    h.t()[1].add_(1.5)
    return (h * x).sum()


def leaf_view_written(x):
    x[:, 0].mul_(2)
    return x.sum()


@pytest.mark.parametrize("fn", [saved_output_written, leaf_view_written],
                         ids=lambda f: f.__name__)
def test_errors_equal_eager(fn):
    def run(f):
        x = jitgrad.tensor(X, requires_grad=True)
        try:
            f(x).backward()
        except RuntimeError as e:
            return str(e), x.grad
        return None, x.grad

    cf = jitgrad.compile(fn)
    want = run(fn)
    assert want[0] is not None
    for _ in range(2):
        assert run(cf) == want


def written_output_returned(x):
    h = x.exp()  # exp saves its output; eager mode raises only if backward() is called
    h.view(-1)[3] = 7.0
    return h


@pytest.mark.parametrize("fn", [saved_output_written, written_output_returned],
                         ids=lambda f: f.__name__)
def test_a_backward_that_would_raise_does_not_raise_at_the_call(fn):
    """The derived backward hits eager's version error: the call itself must not raise (the
    signature runs eagerly); ``backward()`` raises it, as in eager mode."""
    cf = jitgrad.compile(fn)
    for _ in range(2):
        xe = jitgrad.tensor(X, requires_grad=True)
        xc = jitgrad.tensor(X, requires_grad=True)
        want, got = fn(xe), cf(xc)
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            got.sum().backward()
    assert "its backward raises" in cf.eager_reason(xc)
