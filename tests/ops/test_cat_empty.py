"""``cat`` with 1-D empty inputs, as PyTorch: skipped by the shape checks and the result, but
part of dtype promotion and of ``requires_grad`` (with an empty gradient)."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg


def test_empty_input_promotes_and_requires_grad():
    e = jg.empty(0, dtype=jg.float64, requires_grad=True)
    x = jg.ones(2, 3)
    y = jg.cat([x, e, x], 1)
    assert y.shape == (2, 6) and y.dtype == jg.float64 and y.requires_grad
    assert type(y.grad_fn).__name__ == "CatBackward0"
    y.sum().backward()
    assert e.grad.shape == (0,) and e.grad.dtype == jg.float64


def test_gradients_of_the_other_inputs_skip_the_empty_one():
    e = jg.empty(0, requires_grad=True)
    x = jg.tensor([[1.0, 2.0]], requires_grad=True)
    z = jg.tensor([[3.0]], requires_grad=True)
    y = jg.cat([e, x, e, z], dim=-1)
    (y * jg.tensor([[1.0, 2.0, 3.0]])).sum().backward()
    assert x.grad.tolist() == [[1.0, 2.0]] and z.grad.tolist() == [[3.0]]
    assert e.grad.shape == (0,)


@pytest.mark.parametrize("dtypes,expected", [
    ((jg.float32, jg.int64), jg.float32), ((jg.int64, jg.int32), jg.int64),
    ((jg.float64, jg.float32), jg.float64),
])
def test_dtype_promotion_counts_empty_inputs(dtypes, expected):
    a = jg.empty(0, dtype=dtypes[0])
    b = jg.ones(2, 2, dtype=dtypes[1])
    assert jg.cat([a, b]).dtype == expected


def test_errors_name_the_original_positions():
    e = jg.empty(0)
    with pytest.raises(RuntimeError, match="got size 4 for tensor number 2 in the list"):
        jg.cat([e, jg.ones(2, 3), jg.ones(2, 4)])
    with pytest.raises(RuntimeError, match=r"zero-dimensional tensor \(at position 1\)"):
        jg.cat([e, jg.zeros(())])
    assert jg.cat([e, e]).shape == (0,)


def test_compiled_cat_with_empty_input():
    f = jg.compile(lambda a, b: jg.cat([a, b, a], 1), fullgraph=True)
    for _ in range(2):
        e = jg.empty(0, dtype=jg.float64, requires_grad=True)
        x = jg.ones(2, 3, requires_grad=True)
        y = f(x, e)
        y.sum().backward()
        assert y.dtype == jg.float64 and e.grad.shape == (0,)
        np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 2.0, np.float32))
