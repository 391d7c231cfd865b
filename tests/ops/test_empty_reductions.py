"""Softmax, log_softmax, amax and amin on empty tensors, as PyTorch: an empty result when
the reduced dims are not empty (no NumPy error leaking), PyTorch's errors when they are."""

from __future__ import annotations

import pytest

import jitgrad


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((2, 0), 1), ((0, 3), 1), ((0, 3), 0), ((0,), 0)])
def test_softmax_over_empty(fn, shape, dim):
    x = jitgrad.ones(*shape, requires_grad=True)
    y = getattr(jitgrad, fn)(x, dim=dim)
    assert y.shape == shape
    y.sum().backward()
    assert x.grad.shape == shape


def test_amax_amin_over_empty():
    x = jitgrad.ones(2, 0, requires_grad=True)
    y = jitgrad.amax(x, dim=0)
    assert y.shape == (0,)
    y.sum().backward()
    assert x.grad.shape == (2, 0)
    assert jitgrad.amin(jitgrad.ones(0, 3), dim=1).shape == (0,)
    assert jitgrad.ones(0, 3).amax(dim=1, keepdim=True).shape == (0, 1)
    with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim 1 to have non-zero "
                       "size."):
        jitgrad.amax(x, dim=1)
    with pytest.raises(IndexError, match=r"amin\(\): Expected reduction dim 0 to have"):
        jitgrad.amin(jitgrad.ones(0, 3), dim=(0, 1))
    with pytest.raises(RuntimeError, match=r"amax\(\): Expected reduction dim to be specified "
                       r"for input.numel\(\) == 0"):
        jitgrad.amax(jitgrad.ones(0))
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim to be specified"):
        jitgrad.ones(0).max()


def test_match_torch():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        assert tuple(M.softmax(M.ones(2, 0), dim=1).shape) == (2, 0)
        assert tuple(M.amax(M.ones(2, 0), dim=0).shape) == (0,)
        assert tuple(M.amin(M.ones(0, 3), dim=1).shape) == (0,)
