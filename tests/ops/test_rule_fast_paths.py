"""Shortcuts the gradient rules take (``expand``'s direct broadcast view, a full reduction's
gradient expanded without its reshape when nothing records, ``sum_to``'s internal calls):
the same tensors and graphs as the general path, and the cases that leave them."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
from jitgrad.ops import views
from jitgrad.ops.reduce_base import expand_back
from jitgrad.ops.sums import sum_to

_FLAGS = ("C_CONTIGUOUS", "F_CONTIGUOUS", "OWNDATA", "WRITEABLE", "ALIGNED")


def _same_view(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
    assert [a.flags[f] for f in _FLAGS] == [b.flags[f] for f in _FLAGS]
    assert a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    assert (a.base is None) == (b.base is None)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(4))
def test_expand_fwd_is_broadcast_to(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        nd = int(rng.integers(0, 4))
        src = tuple(int(s) for s in rng.choice([1, 2, 3], nd))
        lead = tuple(int(s) for s in rng.choice([0, 1, 2, 4], int(rng.integers(0, 3))))
        target = lead + tuple(int(rng.choice([1, 3, 0])) if s == 1 else s for s in src)
        dt = rng.choice([np.float32, np.float64, np.float16, np.int64, np.bool_])
        a = rng.standard_normal(src).astype(dt)
        if rng.random() < 0.3:
            a = a[...]  # a view
        if rng.random() < 0.3:
            a.flags.writeable = False
        _same_view(views._expand_fwd(a, target, src), np.broadcast_to(a, target))


@pytest.mark.parametrize("a", [
    np.arange(12.0).reshape(3, 4)[:, :1],            # not C-contiguous: NumPy's function
    np.zeros((0, 1)),                                # empty
    np.array([[None]], dtype=object),                # objects
])
def test_expand_fwd_other_arrays(a):
    target = (2,) + a.shape[:-1] + (3,)
    _same_view(views._expand_fwd(a, target, a.shape), np.broadcast_to(a, target))


def test_expand_fwd_read_only():
    out = jitgrad.ones(3, 1).expand(3, 4)
    assert not out._data.flags.writeable
    with pytest.raises(ValueError):
        out._data[0, 0] = 2.0


def test_expand_back_direct_same_tensor():
    g = jitgrad.tensor(3.0)
    p = {"shape": (2, 3), "dims": (0, 1), "keepdim": False}
    with jitgrad.no_grad():  # nothing records: the direct view
        direct = expand_back(g, p)
    with jitgrad.enable_grad():  # (g requires no grad: no node, but the reshape runs)
        general = expand_back(g, p)
    _same_view(direct._data, general._data)
    assert direct._base is g and general._base is g
    assert direct._vc is g._vc and general._vc is g._vc
    assert direct._grad_fn is None and not direct._requires_grad
    assert direct._view_kind == "no_grad"


def test_expand_back_keeps_graph_under_create_graph():
    x = jitgrad.randn(2, 3, requires_grad=True)
    v = jitgrad.tensor(2.0, requires_grad=True)
    (g,) = jitgrad.autograd.grad(x.sum(), x, grad_outputs=v, create_graph=True)
    assert type(g.grad_fn).__name__ == "ExpandBackward0"
    view = g.grad_fn.next_functions[0][0]
    assert type(view).__name__ == "ViewBackward0"
    assert view.next_functions[0][0].variable is v
    assert g.stride() == (0, 0)
    np.testing.assert_array_equal(g.detach().numpy(), np.full((2, 3), 2.0, np.float32))
    (gv,) = jitgrad.autograd.grad(g.sum(), v)
    assert gv.item() == 6.0


def test_expand_back_not_full_keeps_reshape():
    x = jitgrad.randn(2, 3, requires_grad=True)
    x.sum(dim=1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 3), np.float32))
    v = jitgrad.ones(2, requires_grad=True)
    (g,) = jitgrad.autograd.grad(x.sum(dim=1), x, grad_outputs=v, create_graph=True)
    assert type(g.grad_fn).__name__ == "ExpandBackward0"
    assert type(g.grad_fn.next_functions[0][0]).__name__ == "ViewBackward0"


@pytest.mark.parametrize("shape,target", [((4, 3), (3,)), ((4, 3), (1, 3)), ((2, 4, 3), (4, 1)),
                                          ((4, 3), (4, 3)), ((5,), ())])
def test_sum_to_matches_public_ops(shape, target):
    g = jitgrad.randn(*shape, requires_grad=True)
    got = sum_to(g, target)
    from jitgrad.shapes import sum_axes_to

    axes, reshape = sum_axes_to(shape, target)
    want = g.sum(dim=axes, keepdim=True) if axes else g
    want = want.reshape(target) if reshape else want
    assert got.shape == want.shape and got.stride() == want.stride()
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    names = [type(got.grad_fn).__name__ if got.grad_fn else None,
             type(want.grad_fn).__name__ if want.grad_fn else None]
    assert names[0] == names[1]
    if got.grad_fn is not None:
        assert got.grad_fn.params == want.grad_fn.params


def test_bias_gradient_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((5, 4)).astype(np.float32)
    bs = rng.standard_normal(4).astype(np.float32)
    grads = []
    for lib in (jitgrad, torch):
        x = lib.tensor(xs, requires_grad=True)
        b = lib.tensor(bs, requires_grad=True)
        ((x * b + b).tanh().sum() * 3).backward()
        grads.append((x.grad.numpy(), b.grad.numpy(), x.grad.stride()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-6)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-5)
    assert grads[0][2] == grads[1][2]
