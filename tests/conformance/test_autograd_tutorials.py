"""The autograd tutorials, run with ``import jitgrad as torch`` and with PyTorch on the same
numbers: pytorch/tutorials' "A Gentle Introduction to torch.autograd" and "Automatic
Differentiation with torch.autograd" (the one-layer network, gradients, ``no_grad`` /
``detach``, the Jacobian-vector product section), and d2l's "Automatic Differentiation"
chapter (``torch.dot``, ``grad.zero_()``, non-scalar backward, detaching, Python control
flow).

Each tutorial's code is a function of the library (``torch``) and of the random inputs it
draws, which come from NumPy so that both libraries see the same values."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad


def both(fn, *args):
    """``fn(jitgrad, *args)`` and ``fn(torch, *args)`` (skipped without PyTorch)."""
    pt = pytest.importorskip("torch")
    return fn(jitgrad, *args), fn(pt, *args)


def assert_close(ours, theirs, rtol=1e-6, atol=1e-7):
    """Every leaf of two equally shaped results (tensors, numbers, bools, strings) agrees."""
    if isinstance(ours, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            assert_close(o, t, rtol, atol)
    elif isinstance(ours, (bool, str, type(None))):
        assert ours == theirs, (ours, theirs)
    else:
        o = ours.detach().numpy() if hasattr(ours, "detach") else np.asarray(ours)
        t = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
        assert o.shape == t.shape and o.dtype == t.dtype, (o.shape, t.shape, o.dtype, t.dtype)
        np.testing.assert_allclose(o, t, rtol=rtol, atol=atol)


# ------------------------------------------------ pytorch/tutorials: autograd_tutorial.py
def gentle_introduction(torch):
    """Differentiation in autograd: ``Q = 3a^3 - b^2`` with an explicit ``gradient``."""
    a = torch.tensor([2., 3.], requires_grad=True)
    b = torch.tensor([6., 4.], requires_grad=True)
    Q = 3*a**3 - b**2
    external_grad = torch.tensor([1., 1.])
    Q.backward(gradient=external_grad)
    checks = (bool((9*a**2 == a.grad).all()), bool((-2*b == b.grad).all()))
    # exclusion from the DAG: only the tensors requiring grad get grad_fn
    x = torch.rand(5, 5)
    y = torch.rand(5, 5)
    z = torch.rand((5, 5), requires_grad=True)
    a2 = x + y
    b2 = x + z
    return Q, a.grad, b.grad, checks, a2.requires_grad, b2.requires_grad


def test_gentle_introduction():
    ours, theirs = both(gentle_introduction)
    assert ours[3] == (True, True)
    assert_close(ours, theirs)


# ------------------------------------------ pytorch/tutorials: autogradqs_tutorial.py
def autograd_basics(torch, w0, b0):
    """The one-layer network, its gradients, disabling tracking and the Jacobian product."""
    x = torch.ones(5)  # input tensor
    y = torch.zeros(3)  # expected output
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    z = torch.matmul(x, w)+b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    names = (type(z.grad_fn).__name__, type(loss.grad_fn).__name__)
    loss.backward()
    grads = (w.grad, b.grad)

    z = torch.matmul(x, w)+b
    tracking = [z.requires_grad]
    with torch.no_grad():
        z = torch.matmul(x, w)+b
    tracking.append(z.requires_grad)
    z = torch.matmul(x, w)+b
    z_det = z.detach()
    tracking.append(z_det.requires_grad)

    inp = torch.eye(4, 5, requires_grad=True)
    out = (inp+1).pow(2).t()
    out.backward(torch.ones_like(out), retain_graph=True)
    first = inp.grad.clone()
    out.backward(torch.ones_like(out), retain_graph=True)
    second = inp.grad.clone()
    inp.grad.zero_()
    out.backward(torch.ones_like(out), retain_graph=True)
    return loss, names, grads, tracking, first, second, inp.grad


def test_autograd_basics(rng):
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    b0 = rng.standard_normal(3).astype(np.float32)
    ours, theirs = both(autograd_basics, w0, b0)
    assert ours[1] == ("AddBackward0", "BinaryCrossEntropyWithLogitsBackward0")
    assert ours[3] == [True, False, False]
    assert_close(ours, theirs)
    first = np.full((4, 5), 2.0, np.float32) + 2 * np.eye(4, 5, dtype=np.float32)
    np.testing.assert_array_equal(ours[4].numpy(), first)  # "First call"
    np.testing.assert_array_equal(ours[5].numpy(), 2 * first)  # "Second call": accumulated
    np.testing.assert_array_equal(ours[6].numpy(), first)  # "Call after zeroing gradients"


# ------------------------------------------------------- d2l: chapter_preliminaries/autograd
def d2l_autograd(torch):
    """A simple function, backward for non-scalar variables, detaching computation."""
    x = torch.arange(4.0)
    x.requires_grad_(True)  # Better create `x = torch.arange(4.0, requires_grad=True)`
    grad_none = x.grad is None
    y = 2 * torch.dot(x, x)
    y.backward()
    g1 = x.grad.clone()
    check1 = bool((x.grad == 4 * x).all())

    x.grad.zero_()  # Reset the gradient
    y = x.sum()
    y.backward()
    g2 = x.grad.clone()

    x.grad.zero_()
    y = x * x
    y.backward(gradient=torch.ones(len(y)))  # Faster: y.sum().backward()
    g3 = x.grad.clone()

    x.grad.zero_()
    y = x * x
    u = y.detach()
    z = u * x
    z.sum().backward()
    check2 = bool((x.grad == u).all())

    x.grad.zero_()
    y.sum().backward()
    check3 = bool((x.grad == 2 * x).all())
    return grad_none, y, g1, g2, g3, x.grad, (check1, check2, check3)


def test_d2l_autograd():
    ours, theirs = both(d2l_autograd)
    assert ours[0] is True and ours[6] == (True, True, True)
    assert_close(ours, theirs, rtol=0, atol=0)  # small integers: exact


def f(a):
    """d2l's function with Python control flow (a while loop on a norm, a branch on a sum)."""
    b = a * 2
    while b.norm() < 1000:
        b = b * 2
    if b.sum() > 0:
        c = b
    else:
        c = 100 * b
    return c


def d2l_control_flow(torch, a0):
    a = torch.tensor(a0, requires_grad=True)  # d2l: torch.randn(size=(), requires_grad=True)
    d = f(a)
    d.backward()
    return d, a.grad, bool(a.grad == d / a)


@pytest.mark.parametrize("a0", [0.3930, -1.25, 2e-3])
def test_d2l_control_flow(a0):
    ours, theirs = both(d2l_control_flow, np.float32(a0))
    assert ours[2] is True
    assert_close(ours, theirs, rtol=0, atol=0)  # powers of two times a: exact


def test_d2l_randn_size_keyword():
    a = jitgrad.randn(size=(), requires_grad=True)
    assert a.shape == () and a.requires_grad and a.is_leaf
