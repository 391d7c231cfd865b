"""Tensor creation, attributes, conversions, repr and dtype rules."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import jitgrad as jg


@pytest.mark.parametrize("data,dtype", [
    (1.0, jg.float32), (1, jg.int64), (True, jg.bool), ([1, 2.5], jg.float32),
    ([[1, 2], [3, 4]], jg.int64), ([True, False], jg.bool), (np.float64(1.0), jg.float64),
    (np.arange(3, dtype=np.int32), jg.int32), (np.ones(2), jg.float64), ([], jg.float32),
])
def test_tensor_dtype_inference(data, dtype):
    assert jg.tensor(data).dtype == dtype


def test_tensor_copies_but_from_numpy_and_as_tensor_share():
    a = np.ones(3, np.float32)
    t = jg.tensor(a)
    a[0] = 5
    assert t[0].item() == 1.0
    s = jg.from_numpy(a)
    a[1] = 7
    assert s[1].item() == 7.0
    assert jg.as_tensor(a).numpy() is a
    assert jg.as_tensor(a, dtype=jg.float64).dtype == jg.float64


def test_factories():
    assert jg.zeros(2, 3).shape == (2, 3) and jg.zeros((2, 3)).dtype == jg.float32
    assert jg.ones([4]).tolist() == [1.0] * 4
    assert jg.full((2,), 7).dtype == jg.int64 and jg.full((2,), 7.0).dtype == jg.float32
    assert jg.eye(3).tolist()[1] == [0.0, 1.0, 0.0]
    assert jg.arange(5).tolist() == [0, 1, 2, 3, 4] and jg.arange(5).dtype == jg.int64
    assert jg.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert jg.arange(0, 1, 0.25).dtype == jg.float32
    assert jg.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert jg.empty(2, 2).shape == (2, 2)
    assert jg.zeros(2, dtype=jg.float64).dtype == jg.float64
    z = jg.zeros(3, requires_grad=True)
    assert z.requires_grad and z.is_leaf
    x = jg.ones(2, 3, dtype=jg.float64)
    for f in (jg.zeros_like, jg.ones_like, jg.empty_like, jg.rand_like, jg.randn_like):
        y = f(x)
        assert y.shape == (2, 3) and y.dtype == jg.float64
    assert jg.full_like(x, 2.5).tolist()[0] == [2.5] * 3


def test_random_is_seeded():
    jg.manual_seed(3)
    a = jg.randn(4)
    jg.manual_seed(3)
    b = jg.randn(4)
    assert a.equal(b) and a.dtype == jg.float32
    r = jg.rand(1000)
    assert 0 <= r.min().item() and r.max().item() < 1
    i = jg.randint(0, 5, (100,))
    assert i.dtype == jg.int64 and set(i.tolist()) <= set(range(5))
    g = jg.Generator().manual_seed(1)
    assert jg.rand(3, generator=g).equal(jg.rand(3, generator=jg.Generator().manual_seed(1)))


def test_requires_grad_factories_inside_no_grad_give_leaves_that_require_grad():
    with jg.no_grad():
        x = jg.tensor(1.0, requires_grad=True)
        y = jg.zeros(2, requires_grad=True)
    assert x.requires_grad and x.is_leaf and y.requires_grad


def test_attributes():
    x = jg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.shape == jg.Size([2, 3]) and repr(x.shape) == "jitgrad.Size([2, 3])"
    assert x.size() == (2, 3) and x.size(1) == 3 and x.size(-1) == 3
    assert x.ndim == 2 and x.dim() == 2 and x.numel() == 6 and len(x) == 2
    assert x.T.shape == (3, 2) and x.T.tolist()[0] == [1.0, 4.0]
    assert x.dtype == jg.float32 and repr(x.dtype) == "jitgrad.float32"
    assert [row.tolist() for row in x] == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert jg.tensor(2.5).item() == 2.5 and isinstance(jg.tensor(2).item(), int)
    assert float(jg.tensor([3.0])) == 3.0 and int(jg.tensor(7)) == 7
    assert bool(jg.tensor([1.0])) and not bool(jg.tensor(0.0))
    assert x.float() is x and x.double().dtype == jg.float64
    assert x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert x.is_contiguous() and not x.T.is_contiguous()
    assert x.device == "cpu"


def test_python_protocol_errors():
    with pytest.raises(RuntimeError,
                       match="a Tensor with 2 elements cannot be converted to Scalar"):
        jg.ones(2).item()
    with pytest.raises(RuntimeError,
                       match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(jg.ones(2))
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python"):
        float(jg.ones(2))
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(jg.tensor(1.0))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(jg.tensor(1.0))


def test_numpy_interop():
    x = jg.tensor([1.0, 2.0])
    assert x.numpy() is x._data
    with pytest.raises(RuntimeError, match=r"^Can't call numpy\(\) on Tensor that requires grad. "
                                           r"Use tensor.detach\(\).numpy\(\) instead.$"):
        jg.tensor([1.0], requires_grad=True).numpy()
    assert np.asarray(x).tolist() == [1.0, 2.0]
    assert (np.float32(2) * x).tolist() == [2.0, 4.0]  # NumPy scalars defer to the tensor


def test_detach_shares_storage_and_version():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None
    d[0] = 10.0
    assert y[0].item() == 10.0
    assert y._version == 1
    assert not jg.tensor([1.0]).data.requires_grad


def test_clone_stays_in_graph():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert type(c.grad_fn).__name__ == "CloneBackward0"
    c.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_requires_grad_setter_rules():
    x = jg.tensor([1.0])
    x.requires_grad = True
    assert x.requires_grad
    with pytest.raises(RuntimeError, match=r"^you can only change requires_grad flags of leaf "
                                           r"variables. If you want to use a computed variable "
                                           r"in a subgraph that doesn't require differentiation "
                                           r"use var_no_grad = var.detach\(\).$"):
        (x * 2).requires_grad = False
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require "
                                           "gradients"):
        jg.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can "
                                           "require gradients"):
        jg.tensor([1, 2], requires_grad=True)


def test_grad_setter_validates():
    x = jg.ones(2, requires_grad=True)
    x.grad = jg.ones(2)
    with pytest.raises(RuntimeError, match="attempting to assign a gradient of size '\\[3\\]' to "
                                           "a tensor of size '\\[2\\]'"):
        x.grad = jg.ones(3)
    with pytest.raises(RuntimeError, match="attempting to assign a gradient with dtype"):
        x.grad = jg.ones(2, dtype=jg.float64)
    x.grad = None
    assert x.grad is None


def test_non_leaf_grad_read_warns():
    x = jg.ones(2, requires_grad=True)
    y = x * 2
    with pytest.warns(UserWarning, match="The .grad attribute of a Tensor that is not a leaf "
                                         "Tensor is being accessed"):
        assert y.grad is None
    y.retain_grad()
    assert y.retains_grad


@pytest.mark.parametrize("make,expected", [
    (lambda: jg.tensor(5.0, requires_grad=True), "tensor(5., requires_grad=True)"),
    (lambda: jg.tensor(5.0, requires_grad=True) ** 3, "tensor(125., grad_fn=<PowBackward0>)"),
    (lambda: jg.tensor(0.6), "tensor(0.6000)"),
    (lambda: jg.ones(2, 2), "tensor([[1., 1.],\n        [1., 1.]])"),
    (lambda: jg.tensor([1, 2]), "tensor([1, 2])"),
    (lambda: jg.tensor([1, 2], dtype=jg.int32), "tensor([1, 2], dtype=jitgrad.int32)"),
    (lambda: jg.tensor(0.5, dtype=jg.float64), "tensor(0.5000, dtype=jitgrad.float64)"),
    (lambda: jg.tensor([True, False]), "tensor([ True, False])"),
    (lambda: jg.tensor([2.1899, -0.041]), "tensor([ 2.1899, -0.0410])"),
])
def test_repr(make, expected):
    assert repr(make()) == expected
    assert str(make()) == expected


def test_repr_of_float64_with_grad():
    x = jg.tensor([1.0, 2.0], dtype=jg.float64, requires_grad=True)
    assert repr(x * 2) == "tensor([2., 4.], dtype=jitgrad.float64, grad_fn=<MulBackward0>)"


@pytest.mark.parametrize("a,b,expected", [
    (jg.ones(2), 2.5, jg.float32),
    (jg.ones(2, dtype=jg.int64), 2.5, jg.float32),
    (jg.ones(2, dtype=jg.int32), 2, jg.int32),
    (jg.ones(2, dtype=jg.int64), jg.tensor(1.0, dtype=jg.float64), jg.float64),
    (jg.ones(2, dtype=jg.float32), jg.tensor(1.0, dtype=jg.float64), jg.float32),
    (jg.ones(2, dtype=jg.float32), jg.ones(2, dtype=jg.float64), jg.float64),
    (jg.ones(2, dtype=jg.int32), jg.ones(2, dtype=jg.int64), jg.int64),
    (jg.ones(2, dtype=jg.bool), 1, jg.int64),
    (jg.ones(2, dtype=jg.bool), jg.ones(2, dtype=jg.bool), jg.bool),
])
def test_promotion_follows_pytorch(a, b, expected):
    assert (a + b).dtype == expected
    assert (b + a).dtype == expected


def test_division_of_integers_is_float():
    assert (jg.tensor([1, 2]) / jg.tensor([2, 4])).tolist() == [0.5, 0.5]
    assert (jg.tensor([1, 2]) / 2).dtype == jg.float32
    assert (jg.tensor([7, -7]) // 2).tolist() == [3, -4]
    assert jg.div(jg.tensor([7, -7]), 2, rounding_mode="trunc").tolist() == [3, -3]


def test_comparisons_give_bool_and_no_grad():
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    m = x > 1.5
    assert m.dtype == jg.bool and m.tolist() == [False, True, True] and not m.requires_grad
    assert (x == x).all().item()
    assert (~m).tolist() == [True, False, False]
    assert (m & (x < 3)).tolist() == [False, True, False]


def test_int_ops_run_on_numpy_reference():
    a = jg.tensor([1, 2, 3])
    assert (a * a + 1).tolist() == [2, 5, 10] and (a * a).dtype == jg.int64
    assert (a ** 2).tolist() == [1, 4, 9]
    assert jg.exp(jg.tensor([0])).dtype == jg.float32


def test_pickle_and_deepcopy():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = pickle.loads(pickle.dumps(x))
    assert y.requires_grad and y.tolist() == [1.0, 2.0]
    z = copy.deepcopy(x)
    assert z is not x and z.requires_grad and z.tolist() == x.tolist()
    with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"):
        copy.deepcopy(x * 2)


def test_tensor_constructor_warns_on_tensor_input():
    with pytest.warns(UserWarning, match="To copy construct from a tensor"):
        jg.tensor(jg.ones(2))


def test_unsupported_data_is_a_clear_error():
    with pytest.raises(TypeError, match=r"new\(\): invalid data type 'str'"):
        jg.tensor(["a"])
    with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy.uint32"):
        jg.tensor(np.ones(2, dtype=np.uint32))
    with pytest.raises(ValueError, match=r"expected sequence of length 2 at dim 1 \(got 1\)"):
        jg.tensor([[1.0, 2.0], [3.0]])
