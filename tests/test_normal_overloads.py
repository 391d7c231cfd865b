"""``jitgrad.normal``'s PyTorch overloads (jitgrad.creation): tensor ``mean`` and / or ``std``
(broadcast shapes, dtypes, keyword forms, ``generator=``, ``out=``), the
``(float, float, size)`` form's options, PyTorch's errors, the zero gradients of
``NormalBackward1/2/3``, sample statistics, ``Tensor.normal_``, and fresh draws at every
call of a compiled function (equal to eager mode's under the same seed).

The gradient is checked against PyTorch's values (zeros) rather than by gradcheck: each
call draws anew, so finite differences of ``normal`` mean nothing."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg


def _torch():
    return pytest.importorskip("torch")


def _name(dtype) -> str:
    return str(dtype).split(".")[-1]


SHAPE_CASES = {
    "mean (3,) std (2,3)": lambda M: (M.zeros(3), M.ones(2, 3)),
    "mean (2,3) std (3,)": lambda M: (M.zeros(2, 3), M.ones(3)),
    "mean (2,1) std (3,)": lambda M: (M.zeros(2, 1), M.ones(3)),
    "mean 0-d std (3,)": lambda M: (M.tensor(0.0), M.ones(3)),
    "mean (3,) std 0.5": lambda M: (M.zeros(3), 0.5),
    "mean (2,3) std default": lambda M: (M.zeros(2, 3),),
    "mean 1.5 std (2,3)": lambda M: (1.5, M.ones(2, 3)),
    "mean int std float64": lambda M: (1, M.ones(3, dtype=M.float64)),
    "mean float64 std float32": lambda M: (M.zeros(3, dtype=M.float64), M.ones(3)),
    "mean float32 std float64": lambda M: (M.zeros(3), M.ones(3, dtype=M.float64)),
    "mean float16": lambda M: (M.zeros(3, dtype=M.float16), 1.0),
    "empty": lambda M: (M.zeros(0), 1.0),
}


@pytest.mark.parametrize("case", list(SHAPE_CASES))
def test_shapes_and_dtypes_match_torch(case):
    torch = _torch()
    got = [M.normal(*SHAPE_CASES[case](M)) for M in (jg, torch)]
    assert tuple(got[0].shape) == tuple(got[1].shape)
    assert _name(got[0].dtype) == _name(got[1].dtype)
    assert not got[0].requires_grad


def test_keyword_forms_and_float_float_size_options():
    torch = _torch()
    for M in (jg, torch):
        assert tuple(M.normal(mean=M.zeros(3), std=0.5).shape) == (3,)
        assert tuple(M.normal(mean=M.zeros(3)).shape) == (3,)
        assert tuple(M.normal(mean=0.5, std=M.ones(2, 3)).shape) == (2, 3)
        assert tuple(M.normal(mean=0.0, std=1.0, size=(2,)).shape) == (2,)
        assert tuple(M.normal(0.0, 1.0, [2, 3]).shape) == (2, 3)
        t = M.normal(0.0, 1.0, (4,), dtype=M.float64, device="cpu", requires_grad=True,
                      layout=M.strided, pin_memory=False)
        assert _name(t.dtype) == "float64" and t.requires_grad and t.is_leaf


def test_values_follow_mean_and_std():
    jg.manual_seed(0)
    mean = jg.tensor([[-3.0], [5.0]])
    std = jg.tensor([0.5, 2.0, 0.0])
    x = jg.normal(mean.expand(2, 3).repeat(1, 20000), std.repeat(20000)).numpy()
    x = x.reshape(2, 20000, 3)
    np.testing.assert_allclose(x.mean(1), [[-3, -3, -3], [5, 5, 5]], atol=0.05)
    np.testing.assert_allclose(x.std(1), [[0.5, 2.0, 0.0]] * 2, rtol=0.03, atol=1e-7)
    assert (x[..., 2] == mean.numpy()).all()  # std 0: exactly the mean
    y = jg.normal(2.0, jg.full((50000,), 3.0)).numpy()
    assert abs(y.mean() - 2.0) < 0.06 and abs(y.std() - 3.0) < 0.05


def test_generator_draws_as_randn_does():
    g = jg.Generator().manual_seed(7)
    a = jg.normal(jg.tensor([1.0, 2.0, 3.0]), 2.0, generator=g)
    b = jg.normal(0.5, jg.tensor([1.0, 0.0, 3.0]), generator=g)
    g.manual_seed(7)
    e1, e2 = jg.randn(3, generator=g), jg.randn(3, generator=g)
    np.testing.assert_allclose(a.numpy(), e1.numpy() * 2 + [1, 2, 3], rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), e2.numpy() * [1, 0, 3] + 0.5, rtol=1e-6)
    jg.manual_seed(3)
    c = jg.normal(jg.zeros(4), jg.ones(4))
    jg.manual_seed(3)
    np.testing.assert_array_equal(c.numpy(), jg.randn(4).numpy())


def test_gradients_are_torchs_zeros():
    torch = _torch()
    res = []
    for M in (jg, torch):
        m = M.zeros(2, 1, requires_grad=True)
        s = M.ones(3, requires_grad=True)
        outs = [M.normal(m, s), M.normal(m, 2.0), M.normal(0.0, s)]
        assert all(o.requires_grad and o.grad_fn is not None for o in outs)
        sum(o.sum() for o in outs).backward()
        res.append((m.grad.numpy(), s.grad.numpy()))
        with M.no_grad():
            assert not M.normal(m, s).requires_grad
    for j, t in zip(*res):
        assert j.shape == t.shape
        np.testing.assert_array_equal(j, t)
    mean = jg.tensor([float("inf"), 1.0], requires_grad=True)
    assert np.isinf(jg.normal(mean, 1.0)[0].item())  # the gradient path changes no value


def test_out():
    torch = _torch()
    for M in (jg, torch):
        o = M.empty(3)
        assert M.normal(M.zeros(3), 1.0, out=o) is o
        o = M.empty(2, dtype=M.float64)
        assert M.normal(0.0, 1.0, (2,), out=o) is o and _name(o.dtype) == "float64"


def _error(call):
    torch = _torch()
    out = []
    for M in (jg, torch):
        with pytest.raises(Exception) as e:
            call(M)
        out.append((type(e.value), str(e.value)))
    return out


@pytest.mark.parametrize("call", [
    lambda M: M.normal(M.zeros(6), M.ones(2, 3)),
    lambda M: M.normal(M.zeros(2, 3), M.ones(6)),
    lambda M: M.normal(M.zeros(4), M.ones(3)),
    lambda M: M.normal(M.zeros(3), -1.0),
    lambda M: M.normal(M.zeros(3), float("nan")),
    lambda M: M.normal(M.zeros(3), M.tensor([1.0, -1.0, 1.0])),
    lambda M: M.normal(0.0, M.tensor([float("nan")])),
    lambda M: M.normal(0.0, -1.5, (2,)),
    lambda M: M.normal(M.zeros(3, dtype=M.int64), 1.0),
    lambda M: M.normal(0.0, M.ones(3, dtype=M.int64)),
    lambda M: M.normal(M.zeros(3, dtype=M.bool), 1.0),
    lambda M: M.normal(0.0, 1.0, (2,), dtype=M.int64),
    lambda M: M.normal(M.zeros(3), 1.0, out=M.empty(3, dtype=M.int64)),
    lambda M: M.normal(M.zeros(3, requires_grad=True), 1.0, out=M.empty(3)),
], ids=lambda c: "")
def test_errors_as_torch(call):
    (jt, jm), (tt, tm) = _error(call)
    assert jt is tt and jm == tm


@pytest.mark.parametrize("call", [
    lambda M: M.normal(0.0, 1.0),
    lambda M: M.normal(),
    lambda M: M.normal(M.zeros(3), 1.0, (3,)),
    lambda M: M.normal(M.zeros(3), 1.0, dtype=M.float64),
    lambda M: M.normal(M.zeros(3), 1.0, requires_grad=True),
    lambda M: M.normal(0.0, M.ones(2), (2,)),
    lambda M: M.normal(0.0, 1.0, 2),
], ids=lambda c: "")
def test_overload_type_errors_as_torch(call):
    (jt, jm), (tt, tm) = _error(call)
    assert jt is tt is TypeError
    prefix = "normal() received an invalid combination of arguments - got ("
    assert jm.startswith(prefix) and tm.startswith(prefix)
    assert jm.split(" * ")[1:] == tm.split(" * ")[1:]  # the overloads listed


def test_tensor_normal_method():
    torch = _torch()
    for M in (jg, torch):
        x = M.empty(3)
        assert x.normal_() is x
        assert x.normal_(2.0, 3.0, generator=M.Generator().manual_seed(1)) is x
        assert x.normal_(mean=1.0, std=0.0).tolist() == [1.0, 1.0, 1.0]


def _draws(fn, make_input, calls=3):
    """Outputs of ``calls`` calls after ``manual_seed(0)``, and the next draw after them."""
    jg.manual_seed(0)
    outs = [fn(*make_input()).detach().numpy().copy() for _ in range(calls)]
    return outs, jg.rand(2).numpy()


def test_compiled_calls_draw_anew_as_eager_does():
    def sample(mean, std):
        return jg.normal(mean, std) * 2 + jg.normal(mean, 0.5) + jg.normal(1.0, std)

    def inputs():
        return jg.tensor([0.0, 10.0, -5.0]), jg.tensor([[1.0, 0.5, 2.0], [0.1, 3.0, 0.0]])

    compiled = jg.compile(sample)
    (eager, after_e), (comp, after_c) = _draws(sample, inputs), _draws(compiled, inputs)
    assert compiled.stats["traces"] == 1
    for k, (a, b) in enumerate(zip(eager, comp)):
        np.testing.assert_array_equal(b, a, err_msg=f"call {k}")
    assert not np.array_equal(comp[0], comp[1])  # a new draw at every call
    np.testing.assert_array_equal(after_c, after_e)
    mean, std = inputs()
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        compiled(mean, -std)  # the check runs at every call of the plan
