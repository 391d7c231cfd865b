"""sort / argsort / msort / topk / kthvalue / gather: PyTorch's orders (NaN largest, ties in
position order), results, errors and gradients, eagerly and compiled. (The registry-driven
tests run gradcheck, the reference and PyTorch over the sort_indices, gather and
gather_backward samples.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

import jitgrad as jg

NAN = math.nan


def _x():
    return jg.tensor([[3.0, 1.0, NAN, 2.0], [0.0, 5.0, 5.0, -1.0]])


def test_topk_nan_is_largest_and_ties_keep_position_order():
    v, i = jg.topk(_x(), 2)
    np.testing.assert_array_equal(v.numpy(), [[NAN, 3.0], [5.0, 5.0]])
    assert i.tolist() == [[2, 0], [1, 2]] and i.dtype == jg.int64
    v, i = _x().topk(2, dim=0, largest=False)
    assert i.tolist() == [[1, 0, 1, 1], [0, 1, 0, 0]]
    r = jg.topk(_x(), 3, sorted=False)
    assert type(r).__name__ == "topk" and r.indices.tolist() == [[2, 0, 3], [1, 2, 0]]


def test_sort_argsort_msort_kthvalue():
    v, i = _x().sort(descending=True)
    np.testing.assert_array_equal(v.numpy(), [[NAN, 3.0, 2.0, 1.0], [5.0, 5.0, 0.0, -1.0]])
    assert i.tolist() == [[2, 0, 3, 1], [1, 2, 0, 3]]
    assert _x().argsort(dim=0).tolist() == [[1, 0, 1, 1], [0, 1, 0, 0]]
    assert jg.sort(jg.tensor([2, 1, 2, 1, 3]), descending=True, stable=True).indices.tolist() \
        == [4, 0, 2, 1, 3]
    assert jg.sort(jg.tensor([True, False, True])).indices.tolist() == [1, 0, 2]
    np.testing.assert_array_equal(jg.msort(jg.tensor([[2.0], [1.0]])).numpy(), [[1.0], [2.0]])
    v, i = _x().kthvalue(2)
    assert v.tolist() == [2.0, 0.0] and i.tolist() == [3, 0]
    v, i = _x().kthvalue(2, 0, True)
    assert v.shape == (1, 4) and i.tolist() == [[0, 1, 0, 0]]


def test_zero_dim_and_empty_inputs():
    s = jg.tensor(3.0)
    for r in (s.topk(1), s.topk(0), s.sort(), s.kthvalue(1)):
        assert r.values.item() == 3.0 and r.indices.item() == 0 and r.indices.shape == ()
    assert jg.empty(0, 3).topk(0, dim=0).values.shape == (0, 3)
    assert jg.empty(2, 0).sort().indices.shape == (2, 0)


@pytest.mark.parametrize("call,err,msg", [
    (lambda x: x.topk(5), RuntimeError, "selected index k out of range"),
    (lambda x: x.topk(-1), RuntimeError, "selected index k out of range"),
    (lambda x: jg.tensor(3.0).topk(2), RuntimeError, "selected index k out of range"),
    (lambda x: x.topk(1.5), TypeError, r"topk\(\): argument 'k' \(position 1\) must be int"),
    (lambda x: x.topk(1, dim=2), IndexError, "Dimension out of range"),
    (lambda x: x.kthvalue(0), RuntimeError, "selected number k out of range for dimension 1"),
    (lambda x: x.kthvalue(5), RuntimeError, "selected number k out of range"),
    (lambda x: jg.tensor([True]).topk(1), RuntimeError, "topk does not support bool"),
    (lambda x: jg.gather(x, 1, jg.tensor([[0.0]])), RuntimeError, "int32/int64 for index"),
    (lambda x: jg.gather(x, 1, jg.tensor([[7]])), RuntimeError,
     "index 7 is out of bounds for dimension 1 with size 4"),
    (lambda x: jg.gather(x, 1, jg.tensor([[-1]])), RuntimeError, "index -1 is out of bounds"),
    (lambda x: jg.gather(x, 1, jg.tensor([0])), RuntimeError, "same number of dimensions"),
    (lambda x: jg.gather(x, 1, jg.zeros(3, 1, dtype=jg.int64)), RuntimeError,
     "Size does not match at dimension 0"),
])
def test_errors_are_pytorchs(call, err, msg):
    with pytest.raises(err, match=msg):
        call(_x())


def test_compiled_gather_checks_its_positions_at_every_call():
    """The range check is the op's own, so a plan makes it: NumPy's take_along_axis took -1
    as the last position (eager raised, compiled returned a value)."""
    x = _x()
    f = jg.compile(lambda x, i: jg.gather(x, 1, i))
    good = jg.tensor([[0, 3], [1, 2]])
    want = jg.gather(x, 1, good).tolist()
    for _ in range(2):
        assert f(x, good).tolist() == want
    for bad, v in (([[0, 4], [1, 2]], 4), ([[0, 3], [-1, 2]], -1)):
        with pytest.raises(RuntimeError, match=f"index {v} is out of bounds for dimension 1"):
            f(x, jg.tensor(bad))
    assert f(x, good).tolist() == want


def test_gather_values_and_gradient_add_up_repeats():
    x = jg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = jg.gather(x, 1, jg.tensor([[0, 0], [1, 0]]))
    assert y.tolist() == [[1.0, 1.0], [4.0, 3.0]] and type(y.grad_fn).__name__ == \
        "GatherBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [[2.0, 0.0], [1.0, 1.0]]
    assert jg.gather(x, 0, jg.tensor([[0], [1], [0]])).tolist() == [[1.0], [3.0], [1.0]]


@pytest.mark.parametrize("fn,node", [
    (lambda x: x.topk(2, dim=1).values, "TopkBackward0"),
    (lambda x: x.sort(dim=0, descending=True).values, "SortBackward0"),
    (lambda x: x.kthvalue(2, dim=1).values, "KthvalueBackward0"),
    (lambda x: x.msort(), "SortBackward0"),
])
def test_gradient_goes_to_the_chosen_positions(fn, node):
    x = jg.tensor([[0.5, -1.0, 2.0], [3.0, 0.25, -2.0]], requires_grad=True)
    y = fn(x)
    assert type(y.grad_fn).__name__ == node
    w = jg.arange(1, y.numel() + 1, dtype=jg.float32).reshape(y.shape)
    (y * w).sum().backward()
    # each output element's weight lands at the position its value came from
    xv, yv, g = x.detach().numpy(), y.detach().numpy(), x.grad.numpy()
    for val, wt in zip(yv.reshape(-1), w.numpy().reshape(-1)):
        assert g[xv == val].tolist() == [wt]
    assert np.count_nonzero(g) == y.numel()


def test_compiled_topk_and_sort_equal_eager():
    def f(x):
        v, i = x.topk(3, dim=-1)
        s = x.sort(dim=0).values
        return (v * v).sum() + (s * 0.5).sum(), i

    cf = jg.compile(f, fullgraph=True)
    rng = np.random.default_rng(0)
    for _ in range(3):
        data = rng.standard_normal((4, 6)).astype(np.float32)
        xe = jg.tensor(data, requires_grad=True)
        le, ie = f(xe)
        le.backward()
        xc = jg.tensor(data, requires_grad=True)
        lc, ic = cf(xc)
        lc.backward()
        assert lc.item() == le.item() and ic.tolist() == ie.tolist()
        np.testing.assert_array_equal(xc.grad.numpy(), xe.grad.numpy())
    assert cf.stats["traces"] == 1


def test_topk_matches_torch_on_random_data():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a = rng.integers(0, 5, size=(6, 7)).astype(np.float64)  # many ties
    a[1, 2] = a[4, 4] = NAN
    for k in (1, 3, 7):
        for largest in (True, False):
            ours = jg.tensor(a).topk(k, dim=1, largest=largest)
            theirs = torch.tensor(a).topk(k, dim=1, largest=largest)
            np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
    for desc in (True, False):
        ours = jg.tensor(a).sort(dim=0, descending=desc, stable=True)
        theirs = torch.tensor(a).sort(dim=0, descending=desc, stable=True)
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())


@pytest.mark.parametrize("module", ["jitgrad.ops.sorting", "jitgrad.ops.padding",
                                    "jitgrad.nn.attention", "jitgrad.autograd.graph"])
def test_docstring_examples(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed
