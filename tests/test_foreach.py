"""``jitgrad._foreach_*`` (jitgrad.ops.foreach) against PyTorch's: values, return types
(a tuple out of place, the given list in place), version bumps, the second argument's forms
(number, list of numbers, list of tensors, 0-d tensor), PyTorch's messages for bad lists,
autograd through the out-of-place forms, and an EMA step under ``jitgrad.compile``."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck

RNG = np.random.default_rng(0)
A = [RNG.uniform(0.5, 2.0, (2, 3)), RNG.uniform(0.5, 2.0, (4,)), RNG.uniform(0.5, 2.0, ())]
B = [RNG.uniform(0.5, 2.0, s.shape) for s in A]
C = [RNG.uniform(0.5, 2.0, s.shape) for s in A]


def _lists(M, *arrays, dtype="float32"):
    return [[M.tensor(a.astype(dtype)) for a in arr] for arr in arrays]


def _np(ts):
    return [t.detach().numpy() for t in ts]


def _both(call, *arrays, inplace=False, dtype="float32", rtol=1e-6):
    """``call(M, *lists)`` for jitgrad and torch; same values (and in place: the first
    list updated, returned as itself, each tensor's version bumped)."""
    torch = pytest.importorskip("torch")
    results = []
    for M in (jg, torch):
        lists = _lists(M, *arrays, dtype=dtype)
        versions = [t._version for t in lists[0]]
        out = call(M, *lists)
        if inplace:
            assert out is lists[0]
            assert [t._version for t in lists[0]] == [v + 1 for v in versions]
            out = lists[0]
        else:
            assert type(out) is tuple
        results.append(_np(out))
    for j, t in zip(*results):
        assert j.dtype == t.dtype and j.shape == t.shape
        np.testing.assert_allclose(j, t, rtol=rtol, atol=1e-7)


UNARY = ["abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1",
         "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal",
         "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc"]


@pytest.mark.parametrize("op", UNARY)
def test_unary_out_of_place_and_in_place(op):
    arrays = [a / 2.5 for a in A]  # in (0, 1): inside every op's domain
    _both(lambda M, x: getattr(M, f"_foreach_{op}")(x), arrays)
    _both(lambda M, x: getattr(M, f"_foreach_{op}_")(x), arrays, inplace=True)


SECOND = {
    "number": lambda M, b: 1.5,
    "int": lambda M, b: 2,
    "numbers": lambda M, b: [1.5, -2, 0.25],
    "tensors": lambda M, b: b,
    "0-d tensor": lambda M, b: M.tensor(1.75),
}


@pytest.mark.parametrize("form", list(SECOND))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_arithmetic_takes_every_form_of_the_second_argument(op, form):
    for suffix in ("", "_"):
        _both(lambda M, x, b, s=suffix: getattr(M, f"_foreach_{op}{s}")(x, SECOND[form](M, b)),
              A, B, inplace=bool(suffix))


@pytest.mark.parametrize("op", ["add", "sub"])
def test_alpha_scales_tensor_forms(op):
    for suffix in ("", "_"):
        _both(lambda M, x, b, s=suffix: getattr(M, f"_foreach_{op}{s}")(x, b, alpha=-0.5),
              A, B, inplace=bool(suffix))
        if op == "add":  # PyTorch's sub has no single-tensor overload (to take alpha)
            _both(lambda M, x, s=suffix: getattr(M, f"_foreach_{op}{s}")(x, M.tensor(2.0),
                                                                        alpha=3),
                  A, inplace=bool(suffix))


@pytest.mark.parametrize("form", ["number", "numbers", "tensors", "0-d tensor"])
@pytest.mark.parametrize("op", ["maximum", "minimum", "clamp_min", "clamp_max"])
def test_bounds(op, form):
    for suffix in ("", "_"):
        _both(lambda M, x, b, s=suffix: getattr(M, f"_foreach_{op}{s}")(x, SECOND[form](M, b)),
              A, B, inplace=bool(suffix))


def test_maximum_propagates_nan_as_torch():
    torch = pytest.importorskip("torch")
    for M in (jg, torch):
        x = [M.tensor([1.0, math.nan, 3.0])]
        np.testing.assert_array_equal(M._foreach_maximum(x, 2.0)[0].numpy(), [2.0, math.nan, 3.0])
        np.testing.assert_array_equal(M._foreach_minimum(x, [M.tensor([0.0, 0.0, math.nan])])[0]
                                      .numpy(), [0.0, math.nan, math.nan])


def test_pow_forms():
    for form in ("number", "numbers", "tensors"):
        _both(lambda M, x, b, f=form: M._foreach_pow(x, SECOND[f](M, b)), A, B)
        _both(lambda M, x, b, f=form: M._foreach_pow_(x, SECOND[f](M, b)), A, B, inplace=True)
    _both(lambda M, x: M._foreach_pow(2.5, x), A)


@pytest.mark.parametrize("form", ["number", "numbers", "tensors", "0-d tensor"])
def test_lerp(form):
    weight = {"number": lambda M, w: 0.25, "numbers": lambda M, w: [0.1, 0.5, 0.9],
              "tensors": lambda M, w: [t / 3 for t in w],
              "0-d tensor": lambda M, w: M.tensor(0.75)}[form]
    _both(lambda M, x, e, w: M._foreach_lerp(x, e, weight(M, w)), A, B, C)
    _both(lambda M, x, e, w: M._foreach_lerp_(x, e, weight(M, w)), A, B, C, inplace=True)


M_TENSOR = object()


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv_value_forms(op):
    values = [lambda M: {}, lambda M: {"value": -0.5}, lambda M: {"scalars": [0.5, 2, -1]},
              lambda M: {"scalars": M.tensor([0.5, 2.0, -1.0])}]
    for suffix in ("", "_"):
        for v in values:
            _both(lambda M, x, b, c, s=suffix, v=v: getattr(M, f"_foreach_{op}{s}")(
                x, b, c, **v(M)), A, B, C, inplace=bool(suffix))
        for v in (3, [0.5, 2, -1], M_TENSOR):  # positional
            _both(lambda M, x, b, c, s=suffix, v=v: getattr(M, f"_foreach_{op}{s}")(
                x, b, c, M.tensor([1.0, -2.0, 0.5]) if v is M_TENSOR else v),
                A, B, C, inplace=bool(suffix))


def test_copy_zero_clone_max_mm():
    _both(lambda M, x, b: M._foreach_copy_(x, b), A, B, inplace=True)
    _both(lambda M, x: M._foreach_zero_(x), A, inplace=True)
    _both(lambda M, x: M._foreach_clone(x), A)
    _both(lambda M, x: M._foreach_max(x), A)
    mats = [RNG.standard_normal((2, 3)), RNG.standard_normal((3, 3))]
    _both(lambda M, x, y: M._foreach_mm(x, [t.transpose(0, 1) for t in y]), mats, mats)
    torch = pytest.importorskip("torch")
    for M in (jg, torch):  # copy_ broadcasts and casts
        dst = [M.zeros(2, 2, dtype=M.int64)]
        M._foreach_copy_(dst, [M.tensor([1.7, -2.2])])
        assert dst[0].tolist() == [[1, -2], [1, -2]]


@pytest.mark.parametrize("ord", [2, 1, 0, 3, 2.5, math.inf, -math.inf])
def test_norm(ord):
    _both(lambda M, x: M._foreach_norm(x, ord), [a - 1.2 for a in A], rtol=1e-5)
    out = jg._foreach_norm(_lists(jg, A)[0], ord)
    assert all(t.ndim == 0 for t in out)


def test_norm_default_and_dtype():
    torch = pytest.importorskip("torch")
    _both(lambda M, x: M._foreach_norm(x), A, rtol=1e-5)
    for M in (jg, torch):
        out = M._foreach_norm(_lists(M, A)[0], dtype=M.float64)
        assert [str(t.dtype).split(".")[1] for t in out] == ["float64"] * 3


def _error(call):
    """(type, message) of what ``call(M)`` raises, for jitgrad and torch."""
    torch = pytest.importorskip("torch")
    out = []
    for M in (jg, torch):
        with pytest.raises(Exception) as e:
            call(M)
        out.append((type(e.value), str(e.value).replace("torch.", "jitgrad.")))
    return out


@pytest.mark.parametrize("call", [
    lambda M: M._foreach_add([M.ones(2), M.ones(3)], [M.ones(2)]),
    lambda M: M._foreach_add([M.ones(2), M.ones(3)], [1.0]),
    lambda M: M._foreach_add([], []),
    lambda M: M._foreach_abs([]),
    lambda M: M._foreach_zero_([]),
    lambda M: M._foreach_norm([]),
    lambda M: M._foreach_add([M.ones(2)], M.ones(2)),
    lambda M: M._foreach_mul([M.ones(2)], M.ones(1)),
    lambda M: M._foreach_lerp([M.ones(2), M.ones(2)], [M.ones(2)], 0.5),
    lambda M: M._foreach_lerp([M.ones(2), M.ones(2)], [M.ones(2)] * 2, [0.5]),
    lambda M: M._foreach_lerp([M.ones(2), M.ones(2)], [M.ones(2)] * 2, [M.tensor(0.5)]),
    lambda M: M._foreach_addcmul([M.ones(2), M.ones(2)], [M.ones(2)] * 2, [M.ones(2)]),
    lambda M: M._foreach_addcdiv([M.ones(2)] * 2, [M.ones(2)] * 2, [M.ones(2)] * 2, [1.0]),
    lambda M: M._foreach_addcmul([M.ones(2)] * 2, [M.ones(2)] * 2, [M.ones(2)] * 2,
                                 M.ones(3)),
    lambda M: M._foreach_addcmul([M.ones(2)] * 2, [M.ones(2)] * 2, [M.ones(2)] * 2,
                                 M.tensor(1.0)),
    lambda M: M._foreach_copy_([M.ones(2)], [M.ones(2), M.ones(2)]),
    lambda M: M._foreach_pow([M.ones(2), M.ones(2)], [2.0]),
    lambda M: M._foreach_add([M.ones(2)], [1, M.tensor(2.0)]),
    lambda M: M._foreach_add_([M.tensor([1])], 1.5),
    lambda M: M._foreach_div_([M.tensor([3])], 2),
    lambda M: M._foreach_sqrt_([M.tensor([4])]),
    lambda M: M._foreach_add_([M.ones(2, 1)], [M.ones(3)]),
    lambda M: M._foreach_neg([M.tensor([True])]),
], ids=lambda c: "")
def test_errors_as_torch(call):
    (jt, jm), (tt, tm) = _error(call)
    assert jt is tt and jm == tm


@pytest.mark.parametrize("call", [
    lambda M: M._foreach_abs(M.ones(2)),
    lambda M: M._foreach_abs([1.0]),
    lambda M: M._foreach_mul([M.ones(2)], [M.ones(2)], alpha=2),
    lambda M: M._foreach_add([M.ones(2)], 1, alpha=2),
    lambda M: M._foreach_maximum([M.ones(2)], M.ones(2)),
    lambda M: M._foreach_norm([M.ones(2)], "fro"),
    lambda M: M._foreach_sub([M.ones(2)], M.ones(2)),
    lambda M: M._foreach_sub_([M.ones(2)], M.tensor(2.0), alpha=2),
], ids=lambda c: "")
def test_type_errors_as_torch(call):
    (jt, jm), (tt, tm) = _error(call)
    assert jt is tt is TypeError
    assert jm.split("(")[0] == tm.split("(")[0]  # the function's name


def test_out_of_place_forms_are_differentiable():
    xs = [jg.tensor(a, requires_grad=True) for a in A]
    bs = [jg.tensor(b, requires_grad=True) for b in B]
    cs = [jg.tensor(c, requires_grad=True) for c in C]

    def f(*ts):
        x, b, c = list(ts[:3]), list(ts[3:6]), list(ts[6:])
        out = jg._foreach_addcdiv(jg._foreach_lerp(x, b, 0.3), b, c, [0.5, 1, 2])
        out = jg._foreach_mul(jg._foreach_sqrt(out), jg._foreach_sub(b, c, alpha=2))
        return tuple(jg._foreach_norm(jg._foreach_maximum(out, 0.25))) + tuple(
            jg._foreach_pow(out, 2))
    assert gradcheck(f, (*xs, *bs, *cs))


def test_in_place_forms_follow_autograd_rules():
    w = jg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        jg._foreach_add_([w], 1)
    with jg.no_grad():
        jg._foreach_mul_([w], 2.0)
    assert w.tolist() == [2.0, 2.0, 2.0]
    y = w * 1.0
    jg._foreach_mul_([y], jg.tensor(3.0))
    y.sum().backward()
    assert w.grad.tolist() == [3.0, 3.0, 3.0]


def _ema_steps(compiled: bool) -> list:
    """timm's ModelEmaV3 update (``_foreach_lerp_`` of the EMA weights to the model's) and
    an SGD-with-momentum step written with foreach calls."""
    jg.manual_seed(0)
    params = [jg.randn(3, 4), jg.randn(4)]
    ema = [p.clone() for p in params]
    bufs = [jg.zeros_like(p) for p in params]

    def step(grads):
        jg._foreach_mul_(bufs, 0.9)
        jg._foreach_add_(bufs, grads)
        jg._foreach_add_(params, bufs, alpha=-0.1)
        jg._foreach_lerp_(ema, params, 1.0 - 0.99)
        return jg._foreach_norm(ema)
    fn = jg.compile(step) if compiled else step
    norms = [[t.item() for t in fn([jg.randn(3, 4), jg.randn(4)])] for _ in range(4)]
    return norms + [_np(ema), _np(params)]


def test_foreach_steps_compile_to_eagers_results():
    eager, compiled = _ema_steps(False), _ema_steps(True)
    assert eager[:4] == compiled[:4]
    for e, c in zip(eager[4:], compiled[4:]):
        for a, b in zip(e, c):
            np.testing.assert_array_equal(b, a)


def test_import_jitgrad_does_not_load_the_module():
    code = ("import sys, jitgrad; assert 'jitgrad.ops.foreach' not in sys.modules; "
            "jitgrad._foreach_add; assert 'jitgrad.ops.foreach' in sys.modules; "
            "assert '_foreach_zero_' in vars(jitgrad)")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError, match="_foreach_nothing"):
        jg._foreach_nothing  # noqa: B018
