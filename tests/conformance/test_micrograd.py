"""micrograd's ``test/test_engine.py``, its PyTorch half: the two expressions it builds with
``torch.Tensor([...]).double()`` to check micrograd's ``Value`` against, run with
``import jitgrad as torch`` and with PyTorch on the same numbers.

The expected values without PyTorch are micrograd's own (its README prints them)."""

from __future__ import annotations

import pytest

import jitgrad


def sanity_check(torch):
    """``test_sanity_check``'s PyTorch half; returns (x, y)."""
    x = torch.Tensor([-4.0]).double()
    x.requires_grad = True
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    y.backward()
    return x, y


def more_ops(torch):
    """``test_more_ops``'s PyTorch half; returns (a, b, g)."""
    a = torch.Tensor([-4.0]).double()
    b = torch.Tensor([2.0]).double()
    a.requires_grad = True
    b.requires_grad = True
    c = a + b
    d = a * b + b**3
    c = c + c + 1
    c = c + 1 + c + (-a)
    d = d + d * 2 + (b + a).relu()
    d = d + 3 * d + (b - a).relu()
    e = c - d
    f = e**2
    g = f / 2.0
    g = g + 10.0 / f
    g.backward()
    return a, b, g


def test_sanity_check_values():
    x, y = sanity_check(jitgrad)
    assert y.data.item() == -20.0
    assert x.grad.item() == 46.0
    assert y.dtype == jitgrad.float64 and type(y.grad_fn).__name__ == "AddBackward0"


def test_more_ops_values():
    a, b, g = more_ops(jitgrad)
    tol = 1e-6
    assert abs(g.data.item() - 24.70408163265306) < tol
    assert abs(a.grad.item() - 138.83381924198252) < tol
    assert abs(b.grad.item() - 645.5772594752186) < tol


def test_sanity_check_matches_pytorch():
    pt = pytest.importorskip("torch")
    (xj, yj), (xp, yp) = sanity_check(jitgrad), sanity_check(pt)
    # micrograd's own comparison: exact equality of the forward value and of the gradient
    assert yj.data.item() == yp.data.item()
    assert xj.grad.item() == xp.grad.item()


def test_more_ops_match_pytorch():
    pt = pytest.importorskip("torch")
    (aj, bj, gj), (ap, bp, gp) = more_ops(jitgrad), more_ops(pt)
    tol = 1e-6  # micrograd's tolerance; float64 through the same ops agrees to the last bits
    assert abs(gj.data.item() - gp.data.item()) < tol
    assert abs(aj.grad.item() - ap.grad.item()) < tol
    assert abs(bj.grad.item() - bp.grad.item()) < tol
    assert (gj.item(), aj.grad.item(), bj.grad.item()) == pytest.approx(
        (gp.item(), ap.grad.item(), bp.grad.item()), rel=1e-15)
