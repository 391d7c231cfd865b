"""``as_strided`` (a view of the storage with any sizes, strides and offset; a probe's
tutorial script stopped at it): values, writes through it, its errors, and PyTorch's
general ``AsStridedBackward0`` gradient (elements read twice, outside the input)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import jitgrad as jg


def _cases(M):
    out = []
    x = M.arange(10.0).requires_grad_()
    y = x.as_strided((3, 3), (2, 1), 1)
    (y * M.arange(9.0).reshape(3, 3)).sum().backward()
    out += [y.tolist(), x.grad.tolist(), y.grad_fn.name()]
    out.append(x.detach()[2:].as_strided((2, 2), (1, 1), 0).tolist())
    out.append(M.as_strided(x.detach(), (2,), (3,)).tolist())
    w = x.detach().clone()
    w.as_strided((2,), (4,), 1).fill_(-1)  # a view: writes reach the tensor
    out.append(w.tolist())
    out.append(x[2:].as_strided((3,), (1,)).tolist())  # the offset defaults to the view's
    x2 = M.arange(6.0).requires_grad_()
    x2[2:].as_strided((3,), (1,), 0).sum().backward()  # two of three outside the input
    out.append(x2.grad.tolist())
    x3 = M.arange(6.0).reshape(2, 3).t().requires_grad_()
    u3 = x3.as_strided((2, 2), (1, 3))
    (u3 * M.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    out += [u3.tolist(), x3.grad.tolist()]
    x4 = M.ones(4, requires_grad=True)
    (x4.as_strided((3, 2), (1, 1)) ** 2).sum().backward()  # overlapping windows
    out.append(x4.grad.tolist())
    return out


def test_as_strided_values_views_and_gradients():
    got = _cases(jg)
    assert got[0] == [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0], [5.0, 6.0, 7.0]]
    assert got[1] == [0.0, 0.0, 1.0, 5.0, 4.0, 11.0, 7.0, 8.0, 0.0, 0.0]
    assert got[2] == "AsStridedBackward0"
    assert got[5] == [0.0, -1.0, 2.0, 3.0, 4.0, -1.0, 6.0, 7.0, 8.0, 9.0]
    assert got[7] == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    assert got[-1] == [2.0, 4.0, 4.0, 2.0]


def test_as_strided_against_torch():
    torch = pytest.importorskip("torch")
    assert _cases(jg) == _cases(importlib.import_module(torch.__name__))


def test_as_strided_gradcheck_errors_and_compile():
    x = jg.tensor(np.random.default_rng(0).standard_normal(8), requires_grad=True)
    assert jg.autograd.gradcheck(lambda t: t.as_strided((3, 3), (2, 1), 1) * 1.5, (x,))
    assert jg.autograd.gradgradcheck(lambda t: t.as_strided((2, 3), (1, 2)) ** 2, (x,))
    with pytest.raises(RuntimeError, match="requiring a storage size of 100 are out of "
                                           "bounds for storage of size 40"):
        jg.arange(10.0).as_strided((5, 5), (5, 1))
    with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
        jg.arange(10.0).as_strided((5, 5), (1,))
    f = jg.compile(lambda t: t.as_strided((2, 2), (1, 1)).sum())
    with pytest.warns(UserWarning, match="as_strided"):  # a graph break: runs eagerly
        assert f(jg.arange(4.0)).item() == 4.0  # [[0, 1], [1, 2]]
