"""Views and in-place ops under autograd (``autograd/view_history.py``), as PyTorch: an
in-place change of a base re-derives its live views' histories (``AsStridedBackward0``), an
in-place op on a view rewrites its base's (``CopySlices``). Values and gradients are checked
in closed form, numerically (gradcheck / gradgradcheck in float64) and, where PyTorch is
installed, against it; a compiled function doing the same equals eager mode."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.autograd import gradcheck, gradgradcheck


# each case: fn(M, a, c) -> tensor, with a (6,) and c (2,) float64 leaves
def _base_written_after_view(M, a, c):
    b = a * 1
    v = b[:2]
    b.mul_(3)
    return v


def _view_written(M, a, c):
    b = a * 1
    b[:2].mul_(c)
    return b


def _sibling_view_read(M, a, c):
    b = a * 1
    v1, v2 = b[:3], b[2:]
    v1.mul_(2)
    return v2 * c.sum()


def _view_of_view_written(M, a, c):
    b = a * 1
    v = b[1:]
    w = v[:2]
    v.exp_()
    return w * c


def _transposed_view_copied_into(M, a, c):
    buf = M.zeros(2, 3, dtype=a.dtype)
    buf.t()[0].copy_(c)  # column 0 of buf
    buf[1:].add_(a[:3] * 2)
    return buf * a.reshape(2, 3)


def _setitem_into_view(M, a, c):
    b = a * 1
    m = b.view(2, 3)
    m[1, :2] = c * c
    return b


def _diagonal_add(M, a, c):
    m = (a[:4] * 1).reshape(2, 2)
    m.diagonal().add_(c.exp())
    return m


def _buffer_filled_through_views(M, a, c):
    buf = M.zeros(4, dtype=a.dtype)
    buf[:2].copy_(c)
    buf[2:].copy_(a[:2].sin())
    return buf


def _base_setitem_then_view_used(M, a, c):
    b = a * 1
    v = b[1:4]
    b[0] = c[0] * 3
    return v * b[:3]


def _overlapping_view(M, a, c):
    b = a * 1
    u = b.unfold(0, 3, 1)  # windows share elements
    b.mul_(c[0])
    return u


def _two_in_place_rounds(M, a, c):
    b = a * 1
    v = b[::2]
    v.mul_(c[1])
    b.add_(1.5)
    v.tanh_()
    return b * v.sum()


def _view_written_twice(M, a, c):
    b = a.reshape(2, 3) * 1
    row = b[0]
    row.mul_(c[0])
    row.add_(c[1])
    return b


CASES = {f.__name__[1:]: f for f in (
    _base_written_after_view, _view_written, _sibling_view_read, _view_of_view_written,
    _transposed_view_copied_into, _setitem_into_view, _diagonal_add,
    _buffer_filled_through_views, _base_setitem_then_view_used, _overlapping_view,
    _two_in_place_rounds, _view_written_twice)}

A = np.array([0.3, -0.7, 1.1, 0.4, -0.2, 0.9])
C = np.array([1.5, -0.6])


def _run(M, fn, a, c):
    a = M.tensor(a, dtype=M.float64, requires_grad=True)
    c = M.tensor(c, dtype=M.float64, requires_grad=True)
    out = fn(M, a, c)
    w = M.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)),
                 dtype=M.float64)
    ga, gc = M.autograd.grad((out * w).sum(), (a, c), allow_unused=True)
    zeros = np.zeros

    def arr(g, n):
        return zeros(n) if g is None else g.detach().numpy()
    return out.detach().numpy(), arr(ga, 6), arr(gc, 2)


def test_base_written_after_view_closed_form():
    """``v = b[:2]; b.mul_(3)``: v is 3*a[:2] and its gradient 3 (it was 1, the slice's old
    history, before the view was re-derived)."""
    a = jitgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    v = b[:2]
    b.mul_(3)
    assert v.grad_fn.name() == "AsStridedBackward0"
    v.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 3.0, 0.0])


def test_view_written_closed_form():
    a = jitgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    b[1:].mul_(a[1:])
    assert b.grad_fn.name() == "CopySlices"
    b.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 4.0, 6.0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    fn = CASES[name]

    def f(a, c):
        return fn(jitgrad, a, c)
    a = jitgrad.tensor(A, requires_grad=True)
    c = jitgrad.tensor(C, requires_grad=True)
    assert gradcheck(f, (a, c))
    assert gradgradcheck(f, (a, c))


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_pytorch(name):
    torch = pytest.importorskip("torch")
    fn = CASES[name]
    got = _run(jitgrad, fn, A, C)
    want = _run(torch, fn, A, C)
    for g, w, what in zip(got, want, ("value", "grad a", "grad c")):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15, err_msg=f"{name}: {what}")


#: the patterns that compile: all of them (writes into views are traced as the base's new
#: value, ``Tracer._write_into_view``; a view read after its base was written is read again
#: from the base's new value, ``Tracer._reread_view``, since stop 51)
COMPILED = set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_equals_eager(name):
    """A pattern that compiles equals eager mode bit for bit from the first call. A graph
    break (the read of a view after its base was written): the first call finishes eagerly
    from the break (what ran before it ran on the NumPy references: an ulp apart,
    docs/architecture.md), later calls run eagerly."""
    fn = CASES[name]
    eager = _run(jitgrad, fn, A, C)
    f = jitgrad.compile(lambda M, a, c: fn(M, a, c))
    if name in COMPILED:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            first = _run(jitgrad, f, A, C)
        for g, w in zip(first, eager):
            np.testing.assert_array_equal(g, w)
    else:
        with pytest.warns(UserWarning, match="running <lambda> eagerly"):
            first = _run(jitgrad, f, A, C)
        for g, w in zip(first, eager):  # (tanh on NumPy's reference: a few ulp)
            np.testing.assert_allclose(g, w, rtol=2e-15, atol=2e-15)
    for g, w in zip(_run(jitgrad, f, A, C), eager):
        np.testing.assert_array_equal(g, w)


def test_base_in_another_layout():
    """A base whose memory is column-major (``empty_strided``): positions in the base are
    found from the layout, not assumed row-major."""
    a = jitgrad.tensor(A, requires_grad=True)
    b = jitgrad.empty_strided((2, 3), (1, 2), dtype=jitgrad.float64)
    b.copy_(a.reshape(2, 3))
    v = b[:, 1:]
    b.mul_(jitgrad.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=jitgrad.float64))
    assert v.grad_fn.name() == "AsStridedBackward0"
    (g,) = jitgrad.autograd.grad(v.sum(), a)
    np.testing.assert_array_equal(g.numpy(), [0, 2, 3, 0, 5, 6])


def test_retained_grad_and_hooks_follow_the_view():
    a = jitgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    v = b[1:]
    v.retain_grad()
    seen = []
    v.register_hook(lambda g: seen.append(g.numpy().copy()))
    b.mul_(2)
    (v * jitgrad.tensor([5.0, 7.0])).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [5.0, 7.0])
    np.testing.assert_array_equal(seen[0], [5.0, 7.0])
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 10.0, 14.0])


def test_in_place_on_a_view_of_a_leaf_raises_and_changes_nothing():
    a = jitgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        a[:2].mul_(2)
    np.testing.assert_array_equal(a.detach().numpy(), [1.0, 2.0, 3.0])
    assert a._version == 0 and a.grad_fn is None


def test_view_made_in_no_grad_mode_written_with_grad_raises():
    a = jitgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    with jitgrad.no_grad():
        v = b[:2]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        v.mul_(2)
    np.testing.assert_array_equal(b.detach().numpy(), [1.0, 2.0, 3.0])
    assert b.grad_fn.name() == "MulBackward0"
    with jitgrad.no_grad():
        v.mul_(2)  # both in no_grad: not recorded
    np.testing.assert_array_equal(b.detach().numpy(), [2.0, 4.0, 3.0])


def test_write_through_detach_keeps_histories():
    """``detach()`` makes no differentiable view: writing through it changes the values
    (and versions), not the base's or its views' histories."""
    a = jitgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    v = b[:2]
    b.detach().zero_()
    assert b.grad_fn.name() == "MulBackward0" and v.grad_fn.name() == "SliceBackward0"
    v.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0, 0.0])


def test_no_grad_write_on_base_keeps_view_gradients():
    a = jitgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    v = b[1:]
    with jitgrad.no_grad():
        b.add_(1)
    v.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 2.0, 2.0])
    np.testing.assert_array_equal(v.detach().numpy(), [5.0, 7.0])


def test_dead_views_are_dropped():
    """A base sliced at every step (a training loop's ``w[0]``) keeps weak references to
    its live views only."""
    w = jitgrad.ones(4, requires_grad=True)
    for _ in range(1000):
        (w[0] * 2).backward()
    assert len(w._views) < 64


@pytest.mark.parametrize("write", ["mul_", "fill_", "copy_", "setitem", "zero_"])
def test_every_write_path_into_a_no_grad_view_raises(write):
    a = jitgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    with jitgrad.no_grad():
        v = b[:2]
    do = {"mul_": lambda: v.mul_(2), "fill_": lambda: v.fill_(0.5),
          "copy_": lambda: v.copy_(jitgrad.ones(2, dtype=jitgrad.float32)),
          "setitem": lambda: v.__setitem__(0, 4.0), "zero_": lambda: v.zero_()}[write]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        do()
    np.testing.assert_array_equal(b.detach().numpy(), [1.0, 2.0, 3.0])


def test_random_fill_of_a_view_cuts_its_elements_from_the_graph():
    """``uniform_`` on (a view of) a tensor with history: the new values depend on nothing,
    so their gradient is zero (PyTorch's), where the old history used to pass it on."""
    a = jitgrad.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b = a * 3
    b[1:3].uniform_()
    b.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 0.0, 0.0, 3.0])
    a.grad = None
    c = a * 3
    c.normal_()  # keeps requiring grad (PyTorch's NormalBackward0), with a zero gradient
    assert c.requires_grad and c.grad_fn is not None
    c.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0, 0.0, 0.0])
    a.grad = None
    d = a * 3
    d.copy_(jitgrad.zeros(4))
    assert d.requires_grad
    (d + a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0, 1.0, 1.0])
