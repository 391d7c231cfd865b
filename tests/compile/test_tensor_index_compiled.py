"""Indexing with integer tensors under ``jitgrad.compile`` (``x[i]``, ``x[:, i]``,
``x[rows, cols]``, ``x[0, i]``, ``index_select``): the index is an input of the op
(``ops/tensor_index.py``), so the function compiles, each call reads its own index, and
values and gradients equal eager mode's bit for bit (repeated indices included). A bad
index raises PyTorch's error from a compiled call too."""

import numpy as np
import pytest

import jitgrad

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 5)).astype(np.float32)


def rows(x, i):
    return (x[i] * 2).square().sum()


def cols(x, i):
    return x[:, i].tanh().sum()


def pairs(x, i):
    return (x[i, i.flip(0) % 5] * 3).sum()


def int_then_tensor(x, i):
    return x[1, i].exp().sum() + x[..., i].sum()


def select_rows(x, i):
    return jitgrad.index_select(x, 0, i).sigmoid().sum()


def picked_logits(x, i):  # logits[arange(B), labels]
    return x[jitgrad.arange(x.shape[0]), i % 5].sum()


CASES = [rows, cols, pairs, int_then_tensor, select_rows, picked_logits]
INDICES = [np.array([0, 2, 2, 5, 1, 0]), np.array([3, 3, 3, 3, 1, 4]),
           np.array([-1, 0, 4, 4, 2, 1])]


def _equals_eager_for_each_index(fn, size: int):
    """``compile(fn)`` called with each of :data:`INDICES` (mod ``size``) against ``fn``:
    loss and gradient bit for bit, one trace, no eager fallback."""
    cf = jitgrad.compile(fn)
    for idx in INDICES:
        i = jitgrad.tensor(idx % size)
        xe = jitgrad.tensor(X, requires_grad=True)
        xc = jitgrad.tensor(X, requires_grad=True)
        want, got = fn(xe, i), cf(xc, i)
        want.backward()
        got.backward()
        assert got.item() == want.item()
        np.testing.assert_array_equal(xc.grad.numpy(), xe.grad.numpy())
    assert cf.eager_reason(xc, i) is None
    assert cf.stats["traces"] == 1


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_compiles_and_equals_eager_for_each_index(fn):
    _equals_eager_for_each_index(fn, 5 if fn in (cols, int_then_tensor) else 6)


def test_node_names_are_pytorchs():
    x = jitgrad.tensor(X, requires_grad=True)
    i = jitgrad.tensor([0, 2])
    assert x[i].grad_fn.name() == "IndexBackward0"
    assert jitgrad.index_select(x, 0, i).grad_fn.name() == "IndexSelectBackward0"


# ------------------------------------------------------------- x[index] = value, scatter
def put_rows(x, i):
    h = x * 1.0
    h[i] = x[i.flip(0)] * 2  # repeated rows: the last write wins, as in eager mode
    return h.tanh().sum()


def put_number(x, i):
    h = x.clone()
    h[:, i % 5] = 0.5
    return (h * x).sum()


def one_hot_scatter(x, i):
    z = jitgrad.zeros(i.shape[0], 5)
    z.scatter_(1, (i % 5).unsqueeze(1), 1)
    return (z @ x[:5].t()).square().sum()


def scatter_src(x, i):
    idx = (i % 5).reshape(2, 3)
    return jitgrad.zeros(2, 5).scatter(1, idx, x[:2, :3]).sigmoid().sum()


@pytest.mark.parametrize("fn", [rows, put_rows], ids=lambda f: f.__name__)
def test_a_bad_index_raises_pytorchs_error_in_a_compiled_call(fn):
    cf = jitgrad.compile(fn)
    x = jitgrad.tensor(X, requires_grad=True)
    cf(x, jitgrad.tensor([0, 1]))
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 6"):
        cf(x, jitgrad.tensor([0, 9]))
    assert x.grad is None


def test_double_backward_through_the_index():
    def f(x, i):
        y = x[i]
        (g,) = jitgrad.autograd.grad((y ** 3).sum(), x, create_graph=True)
        return g.square().sum()

    xe = jitgrad.tensor(X.astype(np.float64), requires_grad=True)
    xc = jitgrad.tensor(X.astype(np.float64), requires_grad=True)
    i = jitgrad.tensor([1, 1, 4])
    want, got = f(xe, i), jitgrad.compile(f)(xc, i)
    want.backward()
    got.backward()
    assert got.item() == want.item()
    np.testing.assert_array_equal(xc.grad.numpy(), xe.grad.numpy())


@pytest.mark.parametrize("fn", [put_rows, put_number, one_hot_scatter, scatter_src],
                         ids=lambda f: f.__name__)
def test_writes_at_tensor_indices_compile_and_equal_eager(fn):
    _equals_eager_for_each_index(fn, 6)
