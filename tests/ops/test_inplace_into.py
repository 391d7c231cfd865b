"""In-place methods computed straight into the tensor (``ops/inplace_into.py``): the bits and
version bump of the general path (the out-of-place op, then the write-back), the in-place
kernel actually used where the case applies, and every other case (autograd recording,
broadcasting, other dtypes or layouts, overlapping operands, read-only memory, tracing)
left to the general path with its results and errors."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
from jitgrad.ops import dispatch

RNG = np.random.default_rng(7)


def _arr(dtype, shape=(300,), positive=False):
    a = RNG.standard_normal(shape).astype(dtype)
    big, tiny = (3e38, 1e-30) if dtype == np.float32 else (1e300, 1e-300)
    a.reshape(-1)[:4] = [0.0, -0.0, tiny, big]
    return np.abs(a) + 0.5 if positive else a


# method name, args builder (dtype -> positional args), kwargs, the out-of-place function
CASES = [
    ("add_", lambda dt: (jitgrad.from_numpy(_arr(dt)),), {}, jitgrad.add),
    ("add_", lambda dt: (jitgrad.from_numpy(_arr(dt)),), {"alpha": -0.3}, jitgrad.add),
    ("add_", lambda dt: (2.5,), {}, jitgrad.add),
    ("add_", lambda dt: (3,), {}, jitgrad.add),
    ("sub_", lambda dt: (jitgrad.from_numpy(_arr(dt)),), {}, jitgrad.sub),
    ("sub_", lambda dt: (1e-8,), {}, jitgrad.sub),
    ("mul_", lambda dt: (jitgrad.from_numpy(_arr(dt)),), {}, jitgrad.mul),
    ("mul_", lambda dt: (0.999,), {}, jitgrad.mul),
    ("div_", lambda dt: (jitgrad.from_numpy(_arr(dt, positive=True)),), {}, jitgrad.div),
    ("div_", lambda dt: (7,), {}, jitgrad.div),
    ("addcdiv_", lambda dt: (jitgrad.from_numpy(_arr(dt)),
                             jitgrad.from_numpy(_arr(dt, positive=True))), {"value": -0.01},
     jitgrad.addcdiv),
    ("addcmul_", lambda dt: (jitgrad.from_numpy(_arr(dt)), jitgrad.from_numpy(_arr(dt))),
     {"value": 0.001}, jitgrad.addcmul),
    ("addcmul_", lambda dt: (jitgrad.from_numpy(_arr(dt)), jitgrad.from_numpy(_arr(dt))), {},
     jitgrad.addcmul),
    ("lerp_", lambda dt: (jitgrad.from_numpy(_arr(dt)), 0.1), {}, jitgrad.lerp),
    ("lerp_", lambda dt: (jitgrad.from_numpy(_arr(dt)), 0.75), {}, jitgrad.lerp),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", range(len(CASES)), ids=[
    f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_into_has_the_general_paths_bits_and_version(dtype, case):
    name, make, kw, fn = CASES[case]
    args = make(dtype)
    x = jitgrad.from_numpy(_arr(dtype))
    expected = fn(jitgrad.from_numpy(x.numpy().copy()), *args, **kw).numpy()
    data, v0 = x._data, x._version
    dispatch._INTO.clear()
    with np.errstate(all="ignore"):
        out = getattr(x, name)(*args, **kw)
    assert out is x and x._data is data and x._version == v0 + 1
    np.testing.assert_array_equal(x.numpy(), expected)
    # the in-place kernel ran (not the result array + copy back)
    assert any(v is not None for v in dispatch._INTO.values()), name


def test_operators_in_place_take_it_too():
    a = _arr(np.float32)
    b = _arr(np.float32, positive=True)
    with np.errstate(all="ignore"):
        refs = (a + b, a - b, a * b, a / b)
    for op, ref in zip(("__iadd__", "__isub__", "__imul__", "__itruediv__"), refs):
        x = jitgrad.from_numpy(a.copy())
        dispatch._INTO.clear()
        x = getattr(x, op)(jitgrad.from_numpy(b))
        np.testing.assert_array_equal(x.numpy(), ref)
        assert dispatch._INTO, op


def test_same_tensor_as_operand():
    a = _arr(np.float64)
    x = jitgrad.from_numpy(a.copy())
    x.mul_(x)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(x.numpy(), a * a)
    y = jitgrad.from_numpy(a.copy())
    y.addcmul_(y, y, value=0.5)
    np.testing.assert_array_equal(y.numpy(), jitgrad.addcmul(
        jitgrad.from_numpy(a), jitgrad.from_numpy(a), jitgrad.from_numpy(a), value=0.5).numpy())


def test_optimizer_updates_under_no_grad_take_it():
    p = jitgrad.from_numpy(_arr(np.float32)).requires_grad_()
    g = jitgrad.from_numpy(_arr(np.float32))
    ref = p.detach().numpy() * np.float32(0.9)
    dispatch._INTO.clear()
    with jitgrad.no_grad():
        p.mul_(0.9)
    np.testing.assert_array_equal(p.detach().numpy(), ref)
    assert p.grad_fn is None and p.requires_grad and dispatch._INTO
    with jitgrad.no_grad():
        p.lerp_(g, 0.1)
    assert p._version == 2


@pytest.mark.parametrize("setup", ["broadcast", "dtype", "transposed", "overlap", "int",
                                   "scalar_tensor", "bool_number"])
def test_other_cases_take_the_general_path_with_its_results(setup):
    with np.errstate(all="ignore"):
        _general_case(setup)


def _general_case(setup):
    a = _arr(np.float32, (6, 50))
    b = _arr(np.float32, (6, 50))
    x = jitgrad.from_numpy(a.copy())
    dispatch._INTO.clear()
    if setup == "broadcast":
        other, ref = jitgrad.from_numpy(b[0].copy()), a * b[0]
    elif setup == "dtype":
        other = jitgrad.from_numpy(b.astype(np.float64))
        ref = (a.astype(np.float64) * b.astype(np.float64)).astype(np.float32)
    elif setup == "transposed":
        x = jitgrad.from_numpy(np.ascontiguousarray(a.T)).t()
        other, ref = jitgrad.from_numpy(b), a * b
    elif setup == "overlap":
        other, ref = x[::-1], a * a[::-1]
    elif setup == "int":
        x = jitgrad.from_numpy(np.arange(300).reshape(6, 50))
        other, ref = 3, np.arange(300).reshape(6, 50) * 3
    elif setup == "scalar_tensor":
        other, ref = jitgrad.tensor(2.0), a * np.float32(2.0)
    else:
        other, ref = True, a * np.float32(1.0)
    x.mul_(other)
    np.testing.assert_array_equal(x.numpy(), ref)
    assert all(k is None for k in dispatch._INTO.values()), dispatch._INTO


def test_autograd_cases_keep_their_errors_and_graph():
    w0 = _arr(np.float32)
    w = jitgrad.from_numpy(w0.copy()).requires_grad_()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        w.mul_(2.0)
    np.testing.assert_array_equal(w.detach().numpy(), w0)
    assert w._version == 0
    # a non-leaf: recorded (MulBackward0), so the gradient flows through the update
    x = jitgrad.from_numpy(_arr(np.float32)).requires_grad_()
    y = x * 1.0
    y.mul_(3.0)
    assert type(y.grad_fn).__name__ == "MulBackward0"
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(300, 3.0, np.float32))


def test_an_update_after_saving_makes_backward_raise():
    x = jitgrad.from_numpy(_arr(np.float32)).requires_grad_()
    h = x * 2.0
    y = h.tanh()  # saves its output
    with jitgrad.no_grad():
        y.mul_(0.5)  # straight into y: its version moves on
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_read_only_memory_raises_and_stays():
    a = _arr(np.float32)
    a0 = a.copy()
    a.flags.writeable = False
    x = jitgrad.from_numpy(a)
    with pytest.raises(RuntimeError, match="read-only"):
        x.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), a0)


def test_traced_in_place_updates_keep_eager_bits():
    a, b = _arr(np.float32), _arr(np.float32, positive=True)

    def f(x, y):
        x = x.clone()
        x.addcdiv_(y, y + 1.0, value=0.3)
        x.lerp_(y, 0.2)
        x.addcmul_(y, y, value=-0.1)
        return x

    eager = f(jitgrad.from_numpy(a), jitgrad.from_numpy(b)).numpy()
    compiled = jitgrad.compile(f)
    for _ in range(2):
        out = compiled(jitgrad.from_numpy(a), jitgrad.from_numpy(b)).numpy()
        np.testing.assert_array_equal(out, eager)
