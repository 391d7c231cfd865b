"""Eager semantics a probe found apart from PyTorch's (each expectation written out by hand
from PyTorch's behaviour, checked against torch when it is installed): gradients at ties
and at zero, copies that must not alias, result dtypes, advanced indices written as tuples,
operands saved only for the gradients that need them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_raises_like_torch

import jitgrad as jg


def _grad(fn, values):
    x = jg.tensor(values, requires_grad=True)
    fn(x).backward()
    return x.grad.tolist()


def test_clamp_with_tensor_bounds_passes_the_whole_gradient_at_a_bound():
    lo, hi = jg.tensor([1.0, 0.0, 0.0]), jg.tensor([5.0, 5.0, 3.0])
    assert _grad(lambda x: x.clamp(lo, hi).sum(), [1.0, 2.0, 3.0]) == [1.0, 1.0, 1.0]
    assert _grad(lambda x: x.clamp(1.0, 3.0).sum(), [1.0, 2.0, 3.0]) == [1.0, 1.0, 1.0]
    lo_t = jg.tensor([0.0, 2.0], requires_grad=True)
    x = jg.tensor([-1.0, 2.0], requires_grad=True)
    x.clamp(min=lo_t).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0] and lo_t.grad.tolist() == [1.0, 0.0]
    nan = float("nan")
    got = jg.tensor([1.0, nan, 3.0]).clamp(jg.tensor([0.0, 0.0, nan]), jg.tensor(2.0))
    assert np.array_equal(got.numpy(), [1.0, nan, nan], equal_nan=True)


def test_repeat_and_tile_are_new_contiguous_tensors():
    x = jg.arange(4.0)
    r, t = x.repeat(1), x.tile((1,))
    x.add_(10)
    assert r.tolist() == t.tolist() == [0.0, 1.0, 2.0, 3.0] and r._base is None
    y = jg.ones(2, 1).repeat(1, 3)
    assert y.is_contiguous() and y.stride() == (3, 1)
    y[0, 0] = 5
    assert y.tolist() == [[5.0, 1.0, 1.0], [1.0, 1.0, 1.0]]


def test_integer_powers_of_a_number_are_integers():
    t = jg.tensor([0, 1, 3])
    assert (2 ** t).dtype == jg.int64 and (2 ** t).tolist() == [1, 2, 8]
    assert jg.pow(3, t).dtype == jg.int64
    assert (2 ** jg.tensor([1, 2], dtype=jg.uint8)).dtype == jg.uint8
    assert (2.5 ** t).dtype == jg.float32


def test_arange_takes_0d_tensors_as_their_numbers():
    assert jg.arange(jg.tensor(3)).dtype == jg.int64
    assert jg.arange(0, jg.tensor(4), 2).tolist() == [0, 2]
    assert jg.arange(jg.tensor(1.5)).dtype == jg.float32


def test_gradients_at_zero_are_pytorchs():
    assert _grad(lambda x: x.std(), [1.0, 1.0]) == [0.0, 0.0]
    assert _grad(lambda x: jg.linalg.matrix_norm(x), [[0.0, 0.0], [0.0, 0.0]]) == [
        [0.0, 0.0], [0.0, 0.0]]
    assert _grad(lambda x: jg.atan2(x, jg.zeros(1)).sum(), [0.0]) == [0.0]
    # and away from zero the formulas are unchanged
    g = _grad(lambda x: x.std(), [1.0, 3.0])
    np.testing.assert_allclose(g, [-1 / np.sqrt(2), 1 / np.sqrt(2)], rtol=1e-6)


def test_nanmedian_shares_its_gradient_among_ties():
    nan = float("nan")
    assert _grad(lambda x: x.nanmedian(), [1.0, nan, 2.0, 2.0]) == [0.0, 0.0, 0.5, 0.5]
    assert _grad(lambda x: x.median(), [1.0, 3.0, 2.0, 2.0]) == [0.0, 0.0, 0.5, 0.5]


def test_a_tuple_inside_an_index_is_an_advanced_index():
    x = jg.arange(8.0).reshape(2, 4)
    y = x[(0, 1),]
    v0 = x._version
    y.add_(100)
    assert y._base is None and x._version == v0 and x[0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert x[(0, 1), 1].tolist() == [1.0, 5.0]


def test_against_torch():
    torch = pytest.importorskip("torch")
    for lib_x in ([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]):
        for lib in (torch, jg):
            x = lib.tensor(lib_x, requires_grad=True)
            x.clamp(lib.tensor([2.0, 0.0, 0.0]), lib.tensor([5.0, 5.0, 2.0])).sum().backward()
            if lib is torch:
                want = x.grad.tolist()
            else:
                assert x.grad.tolist() == want
    for lib in (torch, jg):
        t = lib.tensor([1, 2])
        got = ((2 ** t).dtype, lib.arange(lib.tensor(3)).dtype)
        if lib is torch:
            want = tuple(str(v).split(".")[-1] for v in got)
        else:
            assert tuple(str(v).split(".")[-1] for v in got) == want


def test_a_product_with_a_number_saves_no_tensor():
    """``b * 2`` needs nothing saved for its gradient (PyTorch saves nothing): writing into
    ``b`` afterwards is no "modified by an inplace operation" error, in the C operator, the
    Python operator and ``mul``; with a tensor that requires grad the operand is saved."""
    for times in (lambda b: b * 2, lambda b: 2 * b, lambda b: b.mul(2), lambda b: b / 2,
                  lambda b: b * jg.tensor(2.0)):
        a = jg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        b = a * 1
        w = times(b)
        b.add_(1)
        w.sum().backward()
        assert a.grad.tolist() in ([2.0] * 4, [0.5] * 4)
    a = jg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b = a * 1
    b[0] = b[1] * 5
    (b * b).sum().backward()
    assert a.grad.tolist() == [0.0, 104.0, 6.0, 8.0]
    a = jg.tensor([1.0, 2.0], requires_grad=True)
    c = jg.tensor([3.0, 4.0], requires_grad=True)
    b = a * 1
    w = b * c  # c requires grad: b is saved, and writing into it is the error
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.sum().backward()


def _row_major_results(M):
    F = M.nn.functional
    x = M.arange(24.0).reshape(2, 3, 4)
    m = M.arange(12.0).reshape(3, 4)
    idx = M.tensor([2, 0])
    return {
        "softmax(dim=1)": F.softmax(x, dim=1),
        "log_softmax(dim=0)": F.log_softmax(x, dim=0),
        "interpolate": F.interpolate(x, scale_factor=2),
        "repeat_interleave(dim=2)": x.repeat_interleave(2, dim=2),
        "x[:, :, idx]": x[:, :, idx],
        "x[:, idx]": x[:, idx],
        "index_select(1)": x.index_select(1, idx),
        "einsum('ij,kj->ki')": M.einsum("ij,kj->ki", m, m),
    }


def test_results_pytorch_makes_row_major_are_row_major():
    """A probe's seq2seq script stopped at ``src[:, idx].view(-1)``: advanced indexing,
    ``index_select``, softmax over a leading dim, ``interpolate``, ``repeat_interleave``
    and einsum products gave NumPy's layouts (indexed dims first, a moved axis moved back),
    so ``.view()`` raised where PyTorch's contiguous results take it."""
    for name, r in _row_major_results(jg).items():
        assert r.is_contiguous(), name
        assert tuple(r.view(-1).shape) == (r.numel(),), name


def test_row_major_results_against_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = _row_major_results(jg), _row_major_results(torch)
    for name in ours:
        assert ours[name].stride() == theirs[name].stride(), name
        np.testing.assert_allclose(ours[name].numpy(), theirs[name].numpy(), rtol=1e-6,
                                   atol=1e-6, err_msg=name)


def _inference_cases(M):
    return {
        "np float64 scalars": [np.float64(0.1), np.float64(0.2)],
        "np int32 scalar": [np.int32(1)],
        "np int32 and int": [np.int32(1), 5],
        "np float64 and float": [np.float64(1), 2.0],
        "np float32 and int": [np.float32(1.5), 2],
        "float64 arrays": [np.array([1.0]), np.array([2.0])],
        "int32 arrays": [np.array([1], np.int32), np.array([2], np.int32)],
        "uint8 and int8": [np.uint8(1), np.int8(1)],
        "bool and np bool": [True, np.bool_(False)],
        "nested int16": [[np.int16(1)], [np.int16(2)]],
        "tensor and np float64": [M.tensor(1.0), np.float64(2)],
        "float and int": [1.0, 2],
        "ints": [[1, 2], [3, 4]],
    }


WANT_DTYPES = {
    "np float64 scalars": "float64", "np int32 scalar": "int32", "np int32 and int": "int64",
    "np float64 and float": "float64", "np float32 and int": "float32",
    "float64 arrays": "float64", "int32 arrays": "int32", "uint8 and int8": "int16",
    "bool and np bool": "bool", "nested int16": "int16", "tensor and np float64": "float64",
    "float and int": "float32", "ints": "int64",
}


def test_tensor_of_a_list_infers_pytorchs_dtype():
    """The promotion of the items' dtypes: NumPy scalars and arrays keep theirs (a list of
    ``np.float64`` was float32, silently), Python numbers are the default dtype / int64."""
    for name, data in _inference_cases(jg).items():
        assert str(jg.tensor(data).dtype) == "jitgrad." + WANT_DTYPES[name], name


def test_tensor_of_a_list_dtype_against_torch():
    torch = pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "a list of numpy.ndarrays is extremely slow"
        for name, data in _inference_cases(torch).items():
            assert str(torch.tensor(data).dtype) == "torch." + WANT_DTYPES[name], name


@pytest.mark.parametrize("classes", [2, 10, 40])
def test_log_softmax_is_exact_near_the_maximum(classes):
    """``(x - max) - log(sum)``, PyTorch's grouping: the log-probability of the likeliest
    class (a confident classifier's loss) was ``x - (max + log(sum))``, which loses the
    small ``log(sum)`` to the rounding of ``max + log(sum)`` (float32 [0, 12]: -5.72e-6
    for -6.14e-6). The row kernels, the cross-entropy kernels and the compiled step
    agree."""
    x = np.zeros((3, classes), np.float32)
    x[:, 1] = 12.0
    want = -np.log1p(np.exp(-12.0) * (classes - 1))
    got = jg.log_softmax(jg.tensor(x), 1).numpy()[:, 1]
    ulp_of_sum = np.spacing(np.float32(1.0))  # the float32 sum's rounding, before its log
    np.testing.assert_allclose(got, want, rtol=0, atol=ulp_of_sum)
    t = jg.tensor([1, 1, 1])
    loss = jg.nn.functional.cross_entropy(jg.tensor(x), t)
    np.testing.assert_allclose(loss.item(), -want, rtol=0, atol=ulp_of_sum)
    compiled = jg.compile(lambda x, t: jg.nn.functional.cross_entropy(x, t))
    for _ in range(2):
        assert compiled(jg.tensor(x), t).item() == loss.item()


def _legacy_constructor_cases(M):
    return {"data": ([[1, 2]], "float32", (2,)), "sizes": ([2, 3], "float32", (2, 3)),
            "nothing": ([], "float32", (0,)), "a tensor": ([M.tensor([1, 2])], "int64", (2,)),
            "a Size": ([M.Size([2, 2])], "float32", (2, 2)),
            "an array": ([np.array([1, 2])], "float32", (2,)),
            "a tuple": ([(2, 3)], "float32", (2,)), "one size": ([3], "float32", (3,))}


@pytest.mark.parametrize("M", ["jitgrad", "torch"])
def test_tensor_legacy_constructor(M):
    """``Tensor(2, 3)`` raised a TypeError and ``Tensor([1, 2])`` was int64 (PyTorch's is
    float32: the default dtype)."""
    M = jg if M == "jitgrad" else pytest.importorskip("torch")
    for name, (args, dtype, shape) in _legacy_constructor_cases(M).items():
        t = M.Tensor(*args)
        assert str(t.dtype).split(".")[1] == dtype and tuple(t.shape) == shape, name
    with pytest.raises(TypeError):
        M.Tensor([1], [2])


def test_where_with_the_condition_alone_is_nonzero_as_tuple():
    """``torch.where(cond)``: the indices of the true elements, one tensor per dim (was a
    TypeError)."""
    cond = jg.tensor([[1.0, 0.0], [0.0, 2.0]]) > 0
    rows, cols = jg.where(cond)
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 1]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'other'"):
        jg.where(cond, jg.ones(2, 2))


def test_an_empty_dim_list_reduces_every_dim():
    """PyTorch's reductions take ``dim=()`` / ``[]`` as every dim (jitgrad reduced none);
    the rules that reduce again by a recorded (possibly empty) dims keep their meaning."""
    x = jg.arange(6.0).reshape(2, 3)
    assert x.sum(()).item() == 15.0 and jg.sum(x, dim=[]).item() == 15.0
    assert x.mean(dim=()).item() == 2.5 and x.amax(()).item() == 5.0
    assert x.sum((), keepdim=True).shape == (1, 1)
    assert abs(x.var(dim=()).item() - 3.5) < 1e-6
    assert jg.linalg.vector_norm(x, dim=()).item() == pytest.approx(np.sqrt(55.0))
    # a 0-d operand's recorded dims are empty: its gradients, batched by vmap, are per element
    s = jg.tensor([1.0, -2.0, 3.0], dtype=jg.float64)
    got = jg.func.vmap(jg.func.grad(lambda v: jg.linalg.vector_norm(v, ord=float("inf"))))(s)
    assert got.tolist() == [1.0, -1.0, 1.0]


def test_lerp_takes_a_tensor_weight():
    a, b = jg.zeros(3), jg.ones(2, 3)
    w = jg.tensor([[0.1], [0.6]])
    np.testing.assert_allclose(jg.lerp(a, b, w).numpy(), [[0.1] * 3, [0.6] * 3], rtol=1e-6)
    assert jg.lerp(a, jg.ones(3), jg.tensor(0.25, dtype=jg.float64)).dtype == jg.float32
    with pytest.raises(RuntimeError, match="expected dtype float for `weight` but got dtype "
                                           "double"):
        jg.lerp(a, jg.ones(3), jg.ones(3, dtype=jg.float64))
    x, y = (jg.tensor(np.random.default_rng(0).standard_normal(4), requires_grad=True)
            for _ in range(2))
    t = jg.tensor([0.1, 0.4, 0.6, 0.9], dtype=jg.float64, requires_grad=True)
    assert jg.autograd.gradcheck(lambda x, y, t: jg.lerp(x, y, t), (x, y, t))


def test_lerp_and_empty_dims_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    a, b, w = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
    want = torch.lerp(torch.tensor(a), torch.tensor(b), torch.tensor(w)).numpy()
    # (PyTorch's CPU kernel contracts into FMAs: an ulp apart)
    np.testing.assert_allclose(jg.lerp(jg.tensor(a), jg.tensor(b), jg.tensor(w)).numpy(),
                               want, rtol=2e-7, atol=1e-7)
    x = rng.standard_normal((3, 4))
    for name in ("sum", "mean", "amax", "amin", "nansum"):
        for keepdim in (False, True):
            np.testing.assert_allclose(
                getattr(jg, name)(jg.tensor(x), dim=(), keepdim=keepdim).numpy(),
                getattr(torch, name)(torch.tensor(x), dim=(), keepdim=keepdim).numpy())


def test_a_number_operand_out_of_a_small_int_range_wraps():
    """PyTorch casts a binary op's number operand to the tensor's integer dtype, wrapping
    (``int8 + 200`` is ``int8 + -56``); jitgrad raised NumPy's OverflowError. ``alpha`` and
    values written into the tensor (``fill_``, ``where``) must still fit."""
    t = jg.tensor([1, 100], dtype=jg.int8)
    assert (t + 200).tolist() == [-55, 44] and (200 + t).tolist() == [-55, 44]
    assert (t * 1000).tolist() == [-24, -96] and (t < 200).tolist() == [False, False]
    assert (t // 300).tolist() == [0, 2] and (jg.tensor([3], dtype=jg.uint8) + -1).tolist() == [2]
    assert (jg.tensor([1]) + 2 ** 63).tolist() == [-(2 ** 63) + 1]
    u = t.clone()
    u.add_(200)
    assert u.tolist() == [-55, 44]
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t"):
        t.add(t, alpha=300)
    with pytest.raises(OverflowError):
        jg.where(t > 0, t, 300)
    assert t.tolist() == [1, 100]
    f = jg.compile(lambda x: (x + 200) * 3 - (x < 200).to(jg.int8))
    assert f(t).tolist() == f(t).tolist() == ((t + 200) * 3 - (t < 200).to(jg.int8)).tolist()


def test_wrapped_number_operands_against_torch():
    torch = pytest.importorskip("torch")
    x = np.array([1, 100, -128, 127], dtype=np.int8)
    for op in ("add", "sub", "mul", "floor_divide", "remainder", "lt", "eq", "bitwise_and"):
        for number in (200, -300, 1000):
            want = getattr(torch, op)(torch.tensor(x), number).numpy()
            got = getattr(jg, op)(jg.tensor(x), number).numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"{op} {number}")


def test_setitem_with_an_integer_and_an_index_tensor():
    """``t[idx, 2] = v`` (an integer beside an index tensor: PyTorch selects with the
    integer first) raised NumPy's IndexError on the path without autograd."""
    t = jg.zeros(4, 3)
    t[jg.tensor([1, 2]), 2] = 1
    assert t.tolist() == [[0, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 0]]
    a = jg.zeros(4, 3, requires_grad=True)
    v = jg.tensor([5.0, 6.0], requires_grad=True)
    b = a.clone()
    b[jg.tensor([1, 2]), 2] = v
    (b * jg.arange(12.0).reshape(4, 3)).sum().backward()
    assert b.tolist() == [[0, 0, 0], [0, 0, 5], [0, 0, 6], [0, 0, 0]]
    assert a.grad.tolist() == [[0, 1, 2], [3, 4, 0], [6, 7, 0], [9, 10, 11]]
    assert v.grad.tolist() == [5.0, 8.0]

    def f(x, i):
        y = x * 1
        y[i, 1] = 7.0
        return y
    cf = jg.compile(f)
    x, i = jg.ones(4, 3), jg.tensor([0, 3])
    assert cf(x, i).tolist() == cf(x, i).tolist() == f(x, i).tolist()


def test_partial_overlap_of_an_in_place_operand_is_pytorchs_error():
    """``a[1:].add_(a[:-1])`` computed through memory it was writing (large tensors, whose
    in-place kernels write straight into the tensor: ``mul_``/``addcdiv_`` gave neither
    PyTorch's nor NumPy's result); PyTorch raises for partly overlapping dense operands."""
    msg = "some elements of the input tensor and the written-to tensor refer to a single"
    for n in (6, 100_000):
        a = jg.arange(float(n))
        for write in (lambda a: a[1:].add_(a[:-1]), lambda a: a[1:].copy_(a[:-1]),
                      lambda a: a[:-1].addcdiv_(a[1:], a[1:] + 1),
                      lambda a: a[1:].mul_(a[:-1]),
                      lambda a: a.__setitem__(slice(1, None), a[:-1])):
            with pytest.raises(RuntimeError, match=msg):
                write(a)
            assert a.tolist() == list(range(n))
        a.add_(a)  # the very same elements: allowed
        a[:n // 2].add_(a[n // 2: 2 * (n // 2)])  # disjoint halves: allowed
        want = np.arange(float(n), dtype=np.float32) * 2
        want[:n // 2] += want[n // 2: 2 * (n // 2)]
        np.testing.assert_array_equal(a.numpy(), want)
    # strided and overlapping (PyTorch computes it): the result as if read first
    a = jg.arange(100_000.0)
    ref = a.numpy().copy()
    a[0:60000:2].mul_(a[1:30001])
    ref[0:60000:2] = ref[0:60000:2] * ref[1:30001]
    np.testing.assert_array_equal(a.numpy(), ref)


def test_init_helpers_and_grad_only_inputs():
    init = jg.nn.init
    assert init._calculate_fan_in_and_fan_out(jg.empty(16, 8, 3, 5)) == (120, 240)
    assert init._calculate_correct_fan(jg.empty(16, 8, 3, 5), "fan_out") == 240
    t = init.sparse_(jg.empty(20, 10), 0.3)
    assert (t == 0).sum(0).tolist() == [6] * 10 and 0.003 < t.std().item() < 0.03
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.sparse_(jg.empty(3), 0.1)
    x = jg.ones(3, requires_grad=True)
    assert jg.autograd.grad((x * x).sum(), x, only_inputs=True)[0].tolist() == [2.0] * 3
    y = jg.ones(2, requires_grad=True)
    # PyTorch's positions: only_inputs is the sixth, allow_unused the seventh
    assert jg.autograd.grad((x * x).sum(), [x, y], None, None, False, True, True)[1] is None


def test_deprecation_warnings_name_the_callers_line():
    """A warning of a function autocast wraps (``kl_div(reduction="mean")``) named the
    wrapper's generated file, so filters by module and once-per-line dedup did not work."""
    cases = [lambda: jg.nn.functional.kl_div(jg.zeros(2, 3), jg.ones(2, 3) / 3,
                                             reduction="mean"),
             lambda: jg.cross(jg.ones(3, 3), jg.ones(3, 3)),
             lambda: jg.nn.functional.softmax(jg.ones(2, 3))]
    for case in cases:
        with pytest.warns(UserWarning) as record:
            case()
        assert record[0].filename == __file__


def test_messages_probe_scripts_compared():
    """Error messages a probe found apart from PyTorch's: dtype names as ATen prints them,
    a 1-D convolution's shapes (not the lifted 2-D ones), a basic-index write into a leaf
    (PyTorch writes through a view of it)."""
    with pytest.raises(RuntimeError, match="same dtype, but got: float != double$"):
        jg.ones(2, 3) @ jg.ones(3, 4, dtype=jg.float64)
    with pytest.raises(RuntimeError, match=r"weight of size \[2, 3, 3\], expected "
                                           r"input\[2, 4, 11\] to have 3 channels, but got 4"):
        jg.nn.Conv1d(3, 2, 3)(jg.ones(2, 4, 11))
    with pytest.raises(RuntimeError, match=r"expected input\[1, 4, 11\] to have 6 channels"):
        jg.nn.functional.conv1d(jg.ones(4, 11), jg.ones(2, 3, 3), groups=2)
    x = jg.ones(3, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad"):
        x[0] = 0
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad"):
        x[x > 0] = 1.0
    assert x.tolist() == [[1.0, 1.0]] * 3 and x._version == 0


def _recurrent_cells(M):
    M.manual_seed(0)
    return M.nn.LSTMCell(4, 3), M.nn.GRUCell(4, 3), M.nn.RNNCell(4, 3)


def _index_add_of_doubles(M):
    return M.zeros(3).index_add_(0, M.tensor([0]), M.ones(1, dtype=M.float64))


_MISUSE = {  # name -> (call on the module M, exception type)
    "lstm_cell_batch": (lambda M: _recurrent_cells(M)[0](
        M.ones(5, 4), (M.zeros(1, 3), M.zeros(1, 3))), RuntimeError),
    "lstm_cell_c_batch": (lambda M: _recurrent_cells(M)[0](
        M.ones(5, 4), (M.zeros(5, 3), M.zeros(1, 3))), RuntimeError),
    "gru_cell_batch": (lambda M: _recurrent_cells(M)[1](M.ones(5, 4), M.zeros(1, 3)),
                       RuntimeError),
    "rnn_cell_1d_hidden": (lambda M: _recurrent_cells(M)[2](M.ones(5, 4), M.zeros(3)),
                           RuntimeError),
    "gru_cell_hidden_size": (lambda M: _recurrent_cells(M)[1](M.ones(5, 4), M.zeros(5, 4)),
                             RuntimeError),
    "cell_input_size": (lambda M: _recurrent_cells(M)[0](M.ones(5, 6)), RuntimeError),
    "unbatched_cell_2d_hidden": (lambda M: _recurrent_cells(M)[1](M.ones(4), M.zeros(1, 3)),
                                 RuntimeError),
    "index_add_dtype": (_index_add_of_doubles, RuntimeError),
    "scatter_add_dtype": (lambda M: M.zeros(3, dtype=M.long).scatter_add(
        0, M.tensor([0]), M.full((1,), 0.7)), RuntimeError),
    "scatter_dtype": (lambda M: M.zeros(3).scatter(0, M.tensor([0]),
                                                   M.ones(1, dtype=M.float64)), RuntimeError),
    "scatter_reduce_dtype": (lambda M: M.zeros(3).scatter_reduce(
        0, M.tensor([0]), M.ones(1, dtype=M.float64), "sum"), RuntimeError),
    "bmm_inner": (lambda M: M.bmm(M.ones(2, 3, 4), M.ones(2, 5, 6)), RuntimeError),
    "bmm_batch": (lambda M: M.bmm(M.ones(2, 3, 4), M.ones(3, 4, 6)), RuntimeError),
    "argmin_empty_dim": (lambda M: M.ones(0, 3).argmin(0), IndexError),
    "argmax_empty": (lambda M: M.ones(0).argmax(), IndexError),
    "bool_mask_length": (lambda M: M.zeros(5)[M.tensor([True, False])], IndexError),
    "logdet_not_square": (lambda M: M.logdet(M.ones(2, 3)), RuntimeError),
    "mha_2d_mask": (lambda M: _mha(M)(M.ones(6, 5, 8), M.ones(6, 5, 8), M.ones(6, 5, 8),
                                      attn_mask=M.zeros(4, 4)), RuntimeError),
    "mha_3d_mask": (lambda M: _mha(M)(M.ones(6, 5, 8), M.ones(6, 5, 8), M.ones(6, 5, 8),
                                      attn_mask=M.zeros(3, 5, 5)), RuntimeError),
    "mha_key_padding_mask": (lambda M: _mha(M)(M.ones(6, 5, 8), M.ones(6, 5, 8),
                                               M.ones(6, 5, 8),
                                               key_padding_mask=M.zeros(6, 4, dtype=M.bool)),
                             AssertionError),
    "grad_of_a_constant": (lambda M: M.autograd.grad((M.ones(3) * 2).sum(), M.ones(3)),
                           RuntimeError),
    "index_add_float_index": (lambda M: M.zeros(3).index_add_(0, M.tensor([0.0]), M.ones(1)),
                              RuntimeError),
    "masked_fill_int_mask": (lambda M: M.zeros(3).masked_fill(M.tensor([1, 0, 1]), 1.0),
                             RuntimeError),
    "where_int_condition": (lambda M: M.where(M.tensor([1, 0, 1]), M.zeros(3), M.ones(3)),
                            RuntimeError),
    "legacy_function_call": (lambda M: _Cube(M)()(M.ones(2, requires_grad=True)),
                             RuntimeError),
    "conv_transpose_output_size": (lambda M: M.nn.ConvTranspose2d(2, 2, 3, stride=2)(
        M.ones(1, 2, 4, 4), output_size=[12, 12]), ValueError),
    "index_copy_slice_shape": (lambda M: M.zeros(3, 2).index_copy(0, M.tensor([1]),
                                                                M.ones(1, 3)), RuntimeError),
    "index_copy_rank": (lambda M: M.zeros(3, 2).index_copy(1, M.tensor([1]), M.ones(3)),
                        IndexError),
    "index_reduce_0d_self": (lambda M: M.tensor(2.0).index_reduce(0, M.tensor([0]), M.ones(1),
                                                                   "prod"), RuntimeError),
    "index_reduce_out_of_range": (lambda M: M.ones(3).index_reduce(0, M.tensor([5]), M.ones(1),
                                                                    "prod"), IndexError),
    "index_reduce_2d_index": (lambda M: M.ones(3).index_reduce(0, M.tensor([[0]]), M.ones(1),
                                                                "prod"), IndexError),
    "index_reduce_count": (lambda M: M.ones(3, 2).index_reduce(0, M.tensor([0, 1]),
                                                               M.ones(1, 2), "prod"),
                           RuntimeError),
    "rnn_input_dtype": (lambda M: M.nn.LSTM(3, 4)(M.ones(5, 2, 3, dtype=M.float64)),
                        ValueError),
    "rnn_hx_rank": (lambda M: M.nn.GRU(3, 4)(M.ones(5, 2, 3), M.zeros(2, 4)), RuntimeError),
    "lstm_hx_rank": (lambda M: M.nn.LSTM(3, 4)(M.ones(5, 3), (M.zeros(1, 1, 4),
                                                             M.zeros(1, 1, 4))), RuntimeError),
    "rnn_hidden_size_zero": (lambda M: M.nn.GRU(3, 0), ValueError),
    "lstm_cell_3d_state": (lambda M: M.nn.LSTMCell(3, 4)(M.ones(2, 3), (M.zeros(1, 2, 4),
                                                                       M.zeros(1, 2, 4))),
                           ValueError),
    "empty_preserve_format": (lambda M: M.empty(2, 3, memory_format=M.preserve_format),
                              RuntimeError),
}


def _mha(M):
    M.manual_seed(0)
    return M.nn.MultiheadAttention(8, 2, batch_first=True)


def _Cube(M):  # noqa: N802 - makes a class
    class Cube(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            return g
    return Cube


@pytest.mark.parametrize("name", sorted(_MISUSE))
def test_misuse_probe_48_raises_pytorchs_error(name):
    """Misuse a stop-48 probe found accepted (a cell's state of another batch size broadcast,
    a source of another dtype cast) or reported with NumPy's or other words; PyTorch's
    message (compared live with torch when it is installed, ``jitgrad.`` read as
    ``torch.``)."""
    assert_raises_like_torch(*_MISUSE[name])


def test_scatter_multiply_like_factories_and_layouts():
    """``scatter(reduce="multiply")`` (a 0-d tensor too), ``*_like(memory_format=,
    layout=)``, ``legacy_contiguous_format``; against torch when it is installed."""
    assert jg.tensor(2.0).scatter(0, jg.tensor(0), jg.tensor(3.0), reduce="multiply").item() \
        == 6.0
    assert jg.tensor(2.0).scatter_reduce(0, jg.tensor(0), jg.tensor(3.0), "amax").item() == 3.0
    idx = jg.tensor([[0, 1, 0]])
    src = jg.tensor([[2.0, 3.0, 4.0]])
    out = jg.full((2, 3), 2.0).scatter(0, idx, src, reduce="multiply")
    assert out.tolist() == [[4.0, 2.0, 8.0], [2.0, 6.0, 2.0]]
    assert jg.ones(3).scatter(0, jg.tensor([0, 0]), 3.0, reduce="multiply").tolist() == [
        9.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="reduce argument must be either add or multiply"):
        jg.ones(3).scatter(0, jg.tensor([0]), 3.0, reduce="max")
    x = jg.randn(2, 3, 4, 5).contiguous(memory_format=jg.channels_last)
    for fn in (jg.zeros_like, jg.ones_like, jg.empty_like, jg.rand_like, jg.randn_like):
        assert fn(x).is_contiguous(memory_format=jg.channels_last)
        assert fn(x, memory_format=jg.contiguous_format).is_contiguous()
        assert fn(x, memory_format=jg.preserve_format, layout=jg.strided).shape == x.shape
    assert jg.full_like(x, 3.0, pin_memory=False).sum().item() == 360.0
    assert jg.zeros(2, layout=jg.strided).tolist() == [0.0, 0.0]
    assert jg.empty(2, 3, 4, 5, memory_format=jg.channels_last).is_contiguous(
        memory_format=jg.channels_last)
    assert jg.legacy_contiguous_format is jg.contiguous_format
    torch = pytest.importorskip("torch")
    t = torch.full((2, 3), 2.0).scatter(0, torch.tensor([[0, 1, 0]]),
                                        torch.tensor([[2.0, 3.0, 4.0]]), reduce="multiply")
    assert t.tolist() == out.tolist()


def test_index_reduce_values_and_gradients():
    """``index_reduce`` (``scatter_reduce`` with the index spread over the source):
    values by hand, values and gradients against torch for every reduction."""
    x = jg.ones(3, 2)
    x.index_reduce_(1, jg.tensor([1, 1]), jg.full((3, 2), 2.0), "prod")
    assert x.tolist() == [[1.0, 4.0]] * 3
    got = jg.tensor([1.0, 5.0]).index_reduce(0, jg.tensor([0, 0]), jg.tensor([3.0, 2.0]),
                                             "mean", include_self=False)
    assert got.tolist() == [2.5, 5.0]
    with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax"):
        jg.ones(3).index_reduce(0, jg.tensor([0]), jg.ones(1), "sum")
    with pytest.raises(RuntimeError, match=r"self \(Float\) and source \(Double\)"):
        jg.ones(3).index_reduce(0, jg.tensor([0]), jg.ones(1, dtype=jg.float64), "amax")
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a, s = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    w = np.arange(15.0).reshape(5, 3)
    for red in ("prod", "mean", "amax", "amin"):
        for inc in (True, False):
            res = []
            for M in (jg, torch):
                x, src = M.tensor(a, requires_grad=True), M.tensor(s, requires_grad=True)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # torch: "index_reduce() is in beta"
                    out = x.index_reduce(0, M.tensor([0, 4, 0, 2]), src, red, include_self=inc)
                (out * M.tensor(w)).sum().backward()
                res.append([out.detach().numpy(), x.grad.numpy(), src.grad.numpy()])
            for u, v in zip(*res):
                np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12, err_msg=red)


def test_index_copy_gradient_reaches_every_writer():
    """PyTorch's ``IndexCopyBackward0``: with a repeated index the last write wins, and
    every source slice gets the gradient at its position (an overwritten one too)."""
    src = jg.arange(6.0).reshape(3, 2).requires_grad_()
    base = jg.zeros(4, 2, requires_grad=True)
    out = base.index_copy(0, jg.tensor([1, 1, 2]), src)
    assert type(out.grad_fn).__name__ == "IndexCopyBackward0"
    assert out.tolist() == [[0.0, 0.0], [2.0, 3.0], [4.0, 5.0], [0.0, 0.0]]
    out.backward(jg.arange(8.0).reshape(4, 2))
    assert src.grad.tolist() == [[2.0, 3.0], [2.0, 3.0], [4.0, 5.0]]
    assert base.grad.tolist() == [[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [6.0, 7.0]]
    torch = pytest.importorskip("torch")
    ts = torch.arange(6.0).reshape(3, 2).requires_grad_()
    tb = torch.zeros(4, 2, requires_grad=True)
    tb.index_copy(0, torch.tensor([1, 1, 2]), ts).backward(torch.arange(8.0).reshape(4, 2))
    assert ts.grad.tolist() == src.grad.tolist() and tb.grad.tolist() == base.grad.tolist()
