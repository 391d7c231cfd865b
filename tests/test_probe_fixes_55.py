"""Differences from PyTorch found by the api6 / api7 probes of real PyTorch scripts: the
exception types and messages of bad calls, argument checks, gradients at edge values,
log_softmax of infinite rows and the LR schedulers' state. Each compares with PyTorch where
it is installed (the oracle) and checks jitgrad's own behaviour without it."""

import io

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F


def _error(fn):
    """``(type name, message)`` of what ``fn()`` raises (None if nothing)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any exception is the result
        return type(e).__name__, str(e)
    return None


def _same_error(call):
    """``call(M)`` raises the same exception type and message with jitgrad as PyTorch."""
    torch = pytest.importorskip("torch")
    want = _error(lambda: call(torch))
    assert want is not None
    assert _error(lambda: call(jg)) == want


# ------------------------------------------------------------- 1. exception types
NEGATIVE_SIZES = {
    "zeros": lambda M: M.zeros(-1),
    "zeros2": lambda M: M.zeros(2, -3),
    "ones": lambda M: M.ones(2, -3),
    "ones_first": lambda M: M.ones(-2, -3),
    "empty": lambda M: M.empty(-1),
    "empty_size": lambda M: M.empty(size=(-1,)),
    "full": lambda M: M.full((2, -1), 0.0),
    "rand": lambda M: M.rand(-2),
    "randn": lambda M: M.randn((-2,)),
    "randint": lambda M: M.randint(3, (-1,)),
    "randperm": lambda M: M.randperm(-1),
    "normal": lambda M: M.normal(0.0, 1.0, (-1,)),
    "new_zeros": lambda M: M.ones(2).new_zeros(-1),
    "new_ones": lambda M: M.ones(2).new_ones(2, -1),
    "new_full": lambda M: M.ones(2).new_full((-1,), 1.0),
    "eye": lambda M: M.eye(-1),
    "eye_m": lambda M: M.eye(2, -1),
    "linspace": lambda M: M.linspace(0, 1, -1),
    "logspace": lambda M: M.logspace(0, 1, -1),
    "Linear": lambda M: M.nn.Linear(-1, 2),
    "Linear_out": lambda M: M.nn.Linear(2, -1),
    "Embedding": lambda M: M.nn.Embedding(-1, 2),
}


@pytest.mark.parametrize("name", sorted(NEGATIVE_SIZES))
def test_negative_sizes_raise_pytorchs_runtime_error(name):
    got = _error(lambda: NEGATIVE_SIZES[name](jg))
    assert got is not None and got[0] == "RuntimeError"  # (NumPy's ValueError leaked)
    _same_error(NEGATIVE_SIZES[name])


def test_negative_size_messages():
    assert _error(lambda: jg.zeros(2, -3)) == (
        "RuntimeError", "zeros: Dimension size must be non-negative.")
    assert _error(lambda: jg.ones(-2, -3)) == (
        "RuntimeError", "Trying to create tensor with negative dimension -2: [-2, -3]")
    assert _error(lambda: jg.ones(2).new_zeros(-1))[1].startswith("Trying to create tensor")
    assert jg.zeros(0).shape == (0,) and jg.randperm(0).shape == (0,)


SPLITS = {
    "split0": lambda M: M.arange(12.).view(3, 4).split(0),
    "split0_dim": lambda M: M.arange(12.).view(3, 4).split(0, 1),
    "split-1": lambda M: M.arange(12.).view(3, 4).split(-1),
    "split-1_empty": lambda M: M.ones(0, 2).split(-1),
    "split_sizes": lambda M: M.arange(12.).view(3, 4).split([1, -1, 3]),
    "split_0d": lambda M: M.tensor(1.0).split(1),
    "torch.split0": lambda M: M.split(M.arange(3.), 0),
    "chunk0": lambda M: M.arange(12.).view(3, 4).chunk(0),
    "chunk-1": lambda M: M.arange(12.).view(3, 4).chunk(-1),
    "chunk0_empty": lambda M: M.ones(0).chunk(0),
    "chunk_0d": lambda M: M.tensor(1.0).chunk(1),
}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_split_and_chunk_check_their_arguments(name):
    assert _error(lambda: SPLITS[name](jg))[0] == "RuntimeError"
    _same_error(SPLITS[name])


def test_split_of_an_empty_dim_by_zero():
    (part,) = jg.ones(0, 2).split(0)
    assert part.shape == (0, 2)


ERROR_TYPES = {
    "cosine_similarity": lambda M: M.nn.functional.cosine_similarity(M.ones(2, 3),
                                                                     M.ones(3, 2)),
    "mse_loss_long": lambda M: M.nn.functional.mse_loss(M.tensor([1, 2]), M.tensor([1, 3])),
    "mse_loss_bool": lambda M: M.nn.functional.mse_loss(M.tensor([True]), M.tensor([True])),
    "l1_loss_long": lambda M: M.nn.functional.l1_loss(M.tensor([1, 2]), M.tensor([1, 3])),
    "l1_loss_bool_float": lambda M: M.nn.functional.l1_loss(M.tensor([True]),
                                                            M.tensor([1.0])),
    "tensor_None": lambda M: M.tensor(None),
    "tensor_list_None": lambda M: M.tensor([1, None]),
    "tensor_dict": lambda M: M.tensor({"a": 1}),
    "tensor_set": lambda M: M.tensor({1, 2}),
    "tensor_str": lambda M: M.tensor("abc"),
    "tensor_bytes": lambda M: M.tensor(b"a"),
    "as_tensor_str": lambda M: M.as_tensor([1, "a"]),
}


@pytest.mark.parametrize("name", sorted(ERROR_TYPES))
def test_exception_types_and_messages(name):
    _same_error(ERROR_TYPES[name])


def test_exception_types_without_torch():
    assert _error(lambda: jg.tensor(None)) == ("RuntimeError",
                                               "Could not infer dtype of NoneType")
    assert _error(lambda: jg.tensor("abc")) == ("TypeError", "new(): invalid data type 'str'")
    assert _error(lambda: F.mse_loss(jg.tensor([1]), jg.tensor([1]))) == (
        "NotImplementedError", "\"mse_cpu\" not implemented for 'Long'")
    assert _error(lambda: F.cosine_similarity(jg.ones(2, 3), jg.ones(3, 2)))[0] == \
        "RuntimeError"


def test_mse_and_l1_loss_promote_their_operands():
    torch = pytest.importorskip("torch")
    i, f = [1, 0], [1.0, 0.5]
    for fn in ("mse_loss", "l1_loss"):
        for a, da, b, db in [(f, "float32", f, "float64"), (f, "float64", f, "float32"),
                             (i, "int64", f, "float32"), (f, "float32", i, "int64"),
                             (f, "float16", f, "float32")]:
            got = getattr(F, fn)(jg.tensor(a, dtype=getattr(jg, da)),
                                 jg.tensor(b, dtype=getattr(jg, db)))
            want = getattr(torch.nn.functional, fn)(torch.tensor(a, dtype=getattr(torch, da)),
                                                    torch.tensor(b, dtype=getattr(torch, db)))
            assert got.dtype.name == str(want.dtype).split(".")[1]
            assert got.item() == pytest.approx(want.item())


# ------------------------------------------------------------- 2. error messages
MESSAGES = {
    "linear_input": lambda M: M.nn.functional.linear(M.ones(3, 4).double(), M.ones(2, 4),
                                                     M.ones(2)),
    "linear_weight": lambda M: M.nn.functional.linear(M.ones(3, 4), M.ones(2, 4).double(),
                                                      M.ones(2)),
    "linear_bias": lambda M: M.nn.functional.linear(M.ones(3, 4), M.ones(2, 4),
                                                    M.ones(2).double()),
    "linear_3d": lambda M: M.nn.functional.linear(M.ones(1, 3, 4).double(), M.ones(2, 4),
                                                  M.ones(2)),
    "linear_1d": lambda M: M.nn.functional.linear(M.ones(4).double(), M.ones(2, 4),
                                                  M.ones(2)),
    "Linear_long": lambda M: M.nn.Linear(3, 2)(M.ones(2, 3, dtype=M.long)),
    "Linear_from_numpy": lambda M: M.nn.Linear(3, 2)(M.from_numpy(np.ones((2, 3)))),
    "addmm": lambda M: M.addmm(M.ones(3, 2), M.ones(3, 4).double(), M.ones(4, 2)),
    "addmm_bias": lambda M: M.addmm(M.ones(3, 2).double(), M.ones(3, 4), M.ones(4, 2)),
    "dot": lambda M: M.dot(M.ones(3), M.ones(3, dtype=M.float64)),
    "vec_matmul": lambda M: M.ones(3) @ M.ones(3).double(),
    "bmm": lambda M: M.bmm(M.ones(1, 3, 4).double(), M.ones(1, 4, 2)),
    "to_dtype_name": lambda M: M.ones(2).to("float32"),
    "device_dtype_name": lambda M: M.device("float64"),
    "device_empty": lambda M: M.device(""),
    "device_space": lambda M: M.device(" cpu"),
    "device_index": lambda M: M.device("cpu:"),
    "device_leading_zero": lambda M: M.device("cuda:01"),
    "masked_fill": lambda M: M.ones(3, 4).masked_fill(M.ones(2, dtype=M.bool), 0.0),
    "masked_fill_value_tensor": lambda M: M.ones(3, 4).masked_fill(M.ones(2, dtype=M.bool),
                                                                   M.tensor(0.0)),
    "masked_fill_": lambda M: M.ones(3, 4).masked_fill_(M.ones(2, dtype=M.bool), 0.0),
    "select": lambda M: M.ones(3, 4).select(1, 4),
    "select_negative": lambda M: M.ones(3, 4).select(1, -5),
    "select_0d": lambda M: M.tensor(1.0).select(0, 0),
    "GroupNorm": lambda M: M.nn.GroupNorm(3, 4),
    "Parameter_int": lambda M: M.nn.Parameter(M.tensor([1, 2])),
    "requires_grad_int": lambda M: M.tensor([1, 2]).requires_grad_(),
    "requires_grad_setter": lambda M: setattr(M.tensor([1, 2]), "requires_grad", True),
    "bool_empty": lambda M: bool(M.tensor([])),
    "bool_two": lambda M: bool(M.tensor([1, 2])),
    "flip": lambda M: M.ones(3, 4).flip(0, 0),
    "flip_negative": lambda M: M.ones(3, 4).flip(1, -1),
    "unflatten": lambda M: M.ones(3, 4).unflatten(1, (3, 2)),
    "unflatten_inferred": lambda M: M.ones(3, 4).unflatten(1, (-1, 3)),
    "unflatten_zero": lambda M: M.ones(3, 4).unflatten(1, (0, -1)),
    "unflatten_empty": lambda M: M.ones(3, 4).unflatten(1, ()),
    "repeat": lambda M: M.ones(3, 4).repeat(-1, 1),
    "repeat_more_dims": lambda M: M.ones(3, 4).repeat(-1, -2, 1),
    "tile": lambda M: M.ones(3, 4).tile((-1,)),
    "TensorDataset": lambda M: M.utils.data.TensorDataset(M.ones(3), M.ones(4)),
    "add_module": lambda M: M.nn.Sequential().add_module("a.b", M.nn.ReLU()),
    "get_parameter": lambda M: M.nn.Linear(2, 2).get_parameter("bias2"),
    "get_buffer": lambda M: M.nn.Sequential(M.nn.Linear(2, 2)).get_buffer("0.zz"),
    "get_parameter_buffer": lambda M: M.nn.BatchNorm1d(2).get_parameter("running_mean"),
    "conv_long_input": lambda M: M.nn.Conv2d(1, 1, 3)(M.ones(1, 1, 5, 5, dtype=M.int64)),
    "conv1d_double_input": lambda M: M.nn.Conv1d(1, 1, 3)(M.ones(1, 1, 5).double()),
    "conv_weight_no_bias": lambda M: M.nn.Conv2d(1, 1, 3, bias=False)(
        M.ones(1, 1, 5, 5).double()),
    "bool_mask": lambda M: M.ones(3, 4)[M.tensor([True, False])],
    "bool_mask_dim1": lambda M: M.ones(3, 4)[:, M.tensor([True, False])],
    "bool_mask_2d": lambda M: M.ones(3, 4, 2)[M.ones(3, 3, dtype=M.bool)],
    "full_str": lambda M: M.full((2,), "a"),
    "full_None": lambda M: M.full((2,), None),
    "to_dtype_str": lambda M: M.ones(2).to(dtype="float64"),
    "Module_to_dtype_str": lambda M: M.nn.Linear(1, 1).to(dtype="float64"),
    "cat_empty": lambda M: M.cat([]),
    "cat_empty_tuple": lambda M: M.cat((), dim=1),
    "stack_empty": lambda M: M.stack([]),
    "hstack_empty": lambda M: M.hstack([]),
    "vstack_empty": lambda M: M.vstack([]),
    "row_stack_empty": lambda M: M.row_stack([]),
    "dstack_empty": lambda M: M.dstack([]),
    "column_stack_empty": lambda M: M.column_stack([]),
    "std_long": lambda M: M.std(M.arange(3)),
    "var_long_dim": lambda M: M.arange(6).view(2, 3).var(0),
    "var_bool": lambda M: M.ones(3, dtype=M.bool).var(),
    "var_mean_long": lambda M: M.var_mean(M.arange(3)),
    "std_mean_long": lambda M: M.std_mean(M.arange(3)),
    "view_bad_size": lambda M: M.zeros(6).view(-2, 6),
    "reshape_bad_size": lambda M: M.zeros(6).reshape(3, -1, -4),
}


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_error_messages_are_pytorchs(name):
    _same_error(MESSAGES[name])


def test_error_messages_without_torch():
    def err(name):
        return _error(lambda: MESSAGES[name](jg))

    assert err("linear_input") == (
        "RuntimeError", "mat1 and mat2 must have the same dtype, but got Double and Float")
    assert _error(lambda: jg.ones(2, 2) @ jg.ones(2, 2, dtype=jg.float64))[1] == \
        "expected m1 and m2 to have the same dtype, but got: float != double"  # (mm's)
    assert err("to_dtype_name") == ("RuntimeError",
                                                 "Invalid device string: 'float32'")
    assert _error(lambda: jg.device("gpu"))[1].startswith("Expected one of cpu, cuda")
    assert err("masked_fill")[1].startswith("The size of tensor a (2)")
    assert err("masked_fill_")[1].startswith("The size of tensor a (4)")
    assert err("bool_empty")[1] == \
        "Boolean value of Tensor with no values is ambiguous"
    assert err("flip")[1] == "dim 0 appears multiple times in the list of dims"
    assert err("repeat")[1] == \
        "Trying to create tensor with negative dimension -3: [-3, 4]"
    assert err("TensorDataset") == ("AssertionError",
                                                 "Size mismatch between tensors")
    assert jg.ones(3, 4).unflatten(1, (2, -1)).shape == (3, 2, 2)
    assert jg.ones(3, 4).select(1, -4).shape == (3,)
    assert jg.device("cuda:1").index == 1
    assert err("cat_empty") == ("ValueError", "torch.cat(): expected a non-empty list of Tensors")
    assert err("stack_empty") == ("RuntimeError", "stack expects a non-empty TensorList")
    assert err("std_long") == ("RuntimeError",
                               "std and var only support floating point and complex dtypes")
    assert err("reshape_bad_size") == (
        "RuntimeError", "invalid shape dimension -4 at index 2 of shape [3, -1, -4]")


@pytest.mark.parametrize("dtype", ["U1", "S1", "O", "M8[s]", "float128"])
def test_from_numpy_names_an_unsupported_type_as_pytorch(dtype):
    got = _error(lambda: jg.from_numpy(np.zeros(1, dtype=dtype)))
    assert got[0] == "TypeError" and got[1].startswith("can't convert np.ndarray of type numpy.")
    torch = pytest.importorskip("torch")
    want = _error(lambda: torch.from_numpy(np.zeros(1, dtype=dtype)))
    # (the list of supported types differs: jitgrad has no uint16 / uint32 / uint64)
    assert got[1].split(". The only")[0] == want[1].split(". The only")[0]


# ------------------------------------------------------------- 3. missing checks
CHECKS = {
    "outer_2d": lambda M: M.outer(M.ones(3, 4), M.ones(3, 4)),
    "outer_vec2": lambda M: M.outer(M.ones(4), M.ones(3, 4)),
    "outer_0d": lambda M: M.outer(M.tensor(1.0), M.ones(4)),
    "ger_2d": lambda M: M.ger(M.ones(3, 4), M.ones(3, 4)),
    "lerp_end": lambda M: M.lerp(M.ones(2), M.ones(2, dtype=M.float64), 0.5),
    "lerp_double": lambda M: M.lerp(M.ones(2).double(), M.ones(2), 0.5),
    "lerp_half": lambda M: M.lerp(M.ones(2).half(), M.ones(2), 0.5),
    "lerp_tensor_weight": lambda M: M.lerp(M.ones(2), M.ones(2).double(), M.ones(2)),
    "lerp_": lambda M: M.ones(2).lerp_(M.ones(2, dtype=M.float64), 0.5),
    "softmax_long": lambda M: M.nn.functional.softmax(M.tensor([1, 2]), 0),
    "softmax_dim0": lambda M: M.softmax(M.tensor([[1, 2], [3, 4]]), 0),
    "softmax_0d": lambda M: M.softmax(M.tensor(1), 0),
    "softmax_int32": lambda M: M.tensor([1, 2]).int().softmax(0),
    "softmax_bool": lambda M: M.nn.Softmax(1)(M.tensor([[True, False]])),
    "log_softmax_long": lambda M: M.nn.functional.log_softmax(M.tensor([1, 2]), 0),
    "log_softmax_dim0": lambda M: M.tensor([[1, 2], [3, 4]]).log_softmax(0),
    "cross_entropy_long": lambda M: M.nn.functional.cross_entropy(M.tensor([[1, 2]]),
                                                                  M.tensor([0])),
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_missing_argument_checks(name):
    assert _error(lambda: CHECKS[name](jg)) is not None
    _same_error(CHECKS[name])


def test_checked_calls_still_work():
    assert jg.outer(jg.ones(3), jg.ones(2, dtype=jg.float64)).dtype == jg.float64
    assert jg.lerp(jg.ones(2), jg.ones(2), jg.tensor(0.5, dtype=jg.float64)).dtype == \
        jg.float32
    assert F.softmax(jg.tensor([1, 2]), 0, dtype=jg.float64).dtype == jg.float64
    assert jg.ones(2).to(dtype=jg.float64).dtype == jg.float64
    assert jg.ones(2).to("cpu", jg.float64).dtype == jg.float64


# ------------------------------------------------------------- 4. gradient edge cases
def test_copysign_keeps_other_in_the_graph():
    x = jg.tensor([0.5, -0.5, 2.0, -0.0], requires_grad=True)
    y = jg.copysign(jg.tensor([1.0, 2.0, 3.0, 4.0]), x)
    assert y.requires_grad
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 0.0]
    a = jg.tensor([1.0, -2.0, 0.0, 3.0], requires_grad=True)
    x.grad = None
    jg.copysign(a, x).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 0.0, -1.0] and x.grad.tolist() == [0.0] * 4
    with jg.no_grad():
        assert not jg.copysign(jg.ones(2), x[:2]).requires_grad


def _values_and_grads(M, fn, *vals):
    ts = [M.tensor(v, requires_grad=True) for v in vals]
    out = fn(M, *ts)
    out.sum().backward()
    return [out.detach().numpy()] + [t.grad.numpy() for t in ts]


def _assert_same(got, want):
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(g[~np.isnan(g)]), np.signbit(w[~np.isnan(w)]))


def test_entr_gradient_is_pytorchs():
    v = [0.5, -0.5, 2.0, 0.0, float("nan"), float("inf"), -0.0, 1.0]
    got = _values_and_grads(jg, lambda M, x: M.special.entr(x), v)
    g = got[1]
    assert np.isnan(g[1]) and g[3] == np.inf and g[6] == np.inf  # -(1 + log x)
    assert got[0][1] == -np.inf and got[0][3] == 0.0 and not np.signbit(got[0][6])
    torch = pytest.importorskip("torch")
    want = _values_and_grads(torch, lambda M, x: M.special.entr(x), v)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_entr_of_integers_and_compiled():
    assert jg.special.entr(jg.tensor([1, 0, 2])).dtype == jg.float32
    f = jg.compile(lambda x: jg.special.entr(x) * 2.0)
    x = jg.tensor([1.0, 2.0, -1.0, 0.0])
    np.testing.assert_array_equal(f(x).numpy(), (jg.special.entr(x) * 2.0).numpy())


@pytest.mark.parametrize("name,lower", [("xlogy", 0.0), ("xlog1py", -1.0)])
def test_xlogy_gradients_at_zero_are_pytorchs(name, lower):
    inf, nan = float("inf"), float("nan")
    xs = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, -1.0, 2.0, nan]
    ys = [v + lower for v in (0.0, 2.0, -1.0, inf, nan, -0.0, 0.0, -1.0, inf, 3.0, 0.0)]

    def fn(M, x, y):
        return getattr(M.special, name)(x, y)

    got = _values_and_grads(jg, fn, xs, ys)
    assert np.isnan(got[2][0]) and got[1][3] == np.inf  # gy = x / (y - lower); gx: log(inf)
    torch = pytest.importorskip("torch")
    _assert_same(got, _values_and_grads(torch, fn, xs, ys))


def test_xlogy_double_backward_and_scalars_match_torch():
    torch = pytest.importorskip("torch")
    for M in (jg, torch):
        x = M.tensor([0.0, 1.0, 2.0], dtype=M.float64, requires_grad=True)
        y = M.tensor([0.5, 1.5, 2.0], dtype=M.float64, requires_grad=True)
        gx, gy = M.autograd.grad(M.xlogy(x, y).sum(), (x, y), create_graph=True)
        hx, hy = M.autograd.grad(gx.sum() + gy.sum(), (x, y))
        res = [t.detach().numpy() for t in (gx, gy, hx, hy)]
        res.append(M.xlogy(2.0, y).detach().numpy())
        res.append(M.xlogy(x, 2).detach().numpy())
        if M is jg:
            got = res
    for g, w in zip(got, res):
        np.testing.assert_allclose(g, w, rtol=1e-15)
    assert _error(lambda: jg.xlogy(jg.ones(1, dtype=jg.complex64), jg.ones(1))) == _error(
        lambda: torch.xlogy(torch.ones(1, dtype=torch.complex64), torch.ones(1)))


FLOOR_DIVIDES = {
    "floor_divide": lambda M, x: M.floor_divide(x, 2.0),
    "floordiv": lambda M, x: x // 2,
    "rfloordiv": lambda M, x: 3.0 // x,
    "tensor_floordiv": lambda M, x: M.tensor([1.0, 2.0]) // x,
}


@pytest.mark.parametrize("name", sorted(FLOOR_DIVIDES))
def test_floor_divide_requires_grad_but_has_no_derivative(name):
    x = jg.tensor([1.5, 3.0], requires_grad=True)
    y = FLOOR_DIVIDES[name](jg, x)
    assert y.requires_grad
    msg = "derivative for aten::floor_divide is not implemented"
    with pytest.raises(RuntimeError, match=msg):
        (x + y).sum().backward()
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.5, 3.0], requires_grad=True)
    assert FLOOR_DIVIDES[name](torch, t).requires_grad
    with pytest.raises(RuntimeError, match=msg):
        (t + FLOOR_DIVIDES[name](torch, t)).sum().backward()


def test_div_floor_mode_has_zero_gradients():
    torch = pytest.importorskip("torch")
    for M in (jg, torch):
        x = M.tensor([1.5, -3.0], requires_grad=True)
        d = M.tensor([2.0, 4.0], requires_grad=True)
        y = x.div(d, rounding_mode="floor")
        assert y.requires_grad
        y.sum().backward()
        assert x.grad.tolist() == [0.0, 0.0] and d.grad.tolist() == [0.0, 0.0]
        assert y.tolist() == [0.0, -1.0]
    with jg.no_grad():
        assert not jg.tensor([1.5], requires_grad=True).div(2, rounding_mode="floor") \
            .requires_grad
    assert (jg.tensor([7, -7]) // 2).tolist() == [3, -4]


INF = float("inf")
#: rows of log_softmax: +inf, only -inf, -inf and finite, NaN, finite
ROWS = [[INF, 1.0, 0.0], [-INF, -INF, -INF], [-INF, 1.0, 0.0], [INF, INF, 1.0],
        [INF, -INF, 0.0], [float("nan"), 1.0, 0.0], [1.0, 2.0, 3.0]]


@pytest.mark.parametrize("width", [3, 20])  # the blocked code and the row code
@pytest.mark.parametrize("layout", ["rows", "transposed"])
def test_log_softmax_does_not_mask_an_infinite_maximum(width, layout):
    x = np.zeros((len(ROWS), width), np.float32)
    x[:, :3] = ROWS

    def run(M):
        t = M.tensor(x if layout == "rows" else x.T.copy(), requires_grad=True)
        d = 1 if layout == "rows" else 0
        out = [M.nn.functional.log_softmax(t, d), M.nn.functional.softmax(t, d),
               M.logsumexp(t, d)]
        out[0].sum().backward()
        res = [o.detach().numpy() for o in out] + [t.grad.numpy()]
        res.append(M.nn.functional.cross_entropy(t if layout == "rows" else t.t(),
                                                 M.tensor([1] * len(ROWS)),
                                                 reduction="none").detach().numpy())
        return res

    got = run(jg)
    ls = got[0] if layout == "rows" else got[0].T
    assert np.isnan(ls[[0, 3, 4, 5]]).all() and np.isfinite(ls[6]).all()  # (+inf or NaN)
    assert got[2][0] == np.inf  # logsumexp masks it: log(sum(exp(x - 0)))
    torch = pytest.importorskip("torch")
    for g, w in zip(got, run(torch)):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------- 5. LR schedulers
def _sgd(M, momentum=0.9):
    return M.optim.SGD([M.nn.Parameter(M.zeros(1))], lr=0.1, momentum=momentum)


def test_cosine_annealing_warm_restarts_step_count_stays_zero():
    s = jg.optim.lr_scheduler.CosineAnnealingWarmRestarts(_sgd(jg), T_0=3)
    for e in [0.5, 1.0, 1.5]:
        s.step(e)
    s.step()
    assert s._step_count == 0 and s.state_dict()["_step_count"] == 0 and s.last_epoch == 2
    torch = pytest.importorskip("torch")
    t = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(_sgd(torch), T_0=3)
    for e in [0.5, 1.0, 1.5]:
        t.step(e)
    t.step()
    assert t._step_count == s._step_count and t.get_last_lr() == pytest.approx(s.get_last_lr())


SCHEDULERS = {
    "OneCycleLR": lambda M, o: M.optim.lr_scheduler.OneCycleLR(o, 0.1, total_steps=10),
    "OneCycleLR_three_linear": lambda M, o: M.optim.lr_scheduler.OneCycleLR(
        o, 0.1, total_steps=12, three_phase=True, anneal_strategy="linear"),
    "CyclicLR": lambda M, o: M.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, step_size_up=3),
    "CyclicLR_exp": lambda M, o: M.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                               mode="exp_range", gamma=0.9),
    "CyclicLR_no_momentum": lambda M, o: M.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, cycle_momentum=False),
}


def _adam(M):
    return M.optim.Adam([M.nn.Parameter(M.zeros(1))], lr=0.1)


def _lrs(o, s, n):
    out = []
    for _ in range(n):
        o.step()
        s.step()
        g = o.param_groups[0]
        out += [g["lr"], g.get("momentum", g.get("betas", (0.0,))[0])]
    return out


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
@pytest.mark.parametrize("opt", [_sgd, _adam])
def test_cyclic_schedulers_state_dict_is_pytorchs(name, opt):
    o = opt(jg)
    s = SCHEDULERS[name](jg, o)
    sd = s.state_dict()
    assert "_momentum_key" not in sd and "_phases" not in sd and "anneal_strategy" not in sd
    torch = pytest.importorskip("torch")
    to = opt(torch)
    ts = SCHEDULERS[name](torch, to)
    tsd = ts.state_dict()
    assert sorted(sd) == sorted(tsd)
    assert sorted(o.param_groups[0]) == sorted(to.param_groups[0])
    for k in ("_schedule_phases", "_anneal_func_type", "use_beta1", "_scale_fn_custom"):
        assert sd.get(k) == tsd.get(k), k
    # torch's state loads into a fresh jitgrad scheduler (part way through its schedule)
    _lrs(to, ts, 4)
    o2 = opt(jg)
    s2 = SCHEDULERS[name](jg, o2)
    o2.param_groups[0].update({k: v for k, v in to.param_groups[0].items() if k != "params"})
    s2.load_state_dict(ts.state_dict())
    assert _lrs(o2, s2, 4) == pytest.approx(_lrs(to, ts, 4))


def test_cyclic_schedulers_load_an_older_jitgrad_state_dict():
    o = _sgd(jg)
    s = jg.optim.lr_scheduler.OneCycleLR(o, 0.1, total_steps=10, anneal_strategy="linear")
    old = {k: v for k, v in s.state_dict().items()
           if k not in ("_schedule_phases", "_anneal_func_type", "use_beta1")}
    old["_phases"] = [tuple(p.values()) for p in s._schedule_phases]
    old["anneal_strategy"], old["_momentum_key"] = "linear", "momentum"
    want = _lrs(o, s, 5)
    o2 = _sgd(jg)
    s2 = jg.optim.lr_scheduler.OneCycleLR(o2, 0.1, total_steps=10)
    s2.load_state_dict(old)
    assert s2._anneal_func_type == "linear" and s2.use_beta1 is False
    assert "_phases" not in vars(s2) and "_momentum_key" not in vars(s2)
    assert _lrs(o2, s2, 5) == pytest.approx(want)
    c = jg.optim.lr_scheduler.CyclicLR(_adam(jg), 0.01, 0.1)
    old = {k: v for k, v in c.state_dict().items() if k not in ("use_beta1",
                                                                 "_scale_fn_custom")}
    c.load_state_dict({**old, "_momentum_key": "betas"})
    assert c.use_beta1 is True


class _Scale:
    """A callable scale function (its attributes are saved, as PyTorch's)."""

    def __init__(self) -> None:
        self.k = 0.5

    def __call__(self, x):
        return self.k ** x


def test_cyclic_lr_saves_a_callable_scale_functions_attributes():
    s = jg.optim.lr_scheduler.CyclicLR(_sgd(jg), 0.01, 0.1, scale_fn=_Scale())
    sd = s.state_dict()
    assert sd["_scale_fn_custom"] == {"k": 0.5}
    f = _Scale()
    s2 = jg.optim.lr_scheduler.CyclicLR(_sgd(jg), 0.01, 0.1, scale_fn=f)
    f.k = 0.1
    s2.load_state_dict({**sd})
    assert f.k == 0.5
    lam = jg.optim.lr_scheduler.CyclicLR(_sgd(jg), 0.01, 0.1, scale_fn=lambda x: 1.0)
    assert lam.state_dict()["_scale_fn_custom"] is None
    buf = io.BytesIO()
    jg.save(lam.state_dict(), buf)  # (no function in it: it saves)
    buf.seek(0)
    assert jg.load(buf, weights_only=False)["_scale_fn_custom"] is None
