"""Functions written as composites of jitgrad's ops (einsum, index_select, masked_select,
repeat_interleave, diag, trace, meshgrid, isclose, count_nonzero, nan_to_num, var_mean,
std_mean, addmm's scales, addmv, baddbmm, repeat, tile, broadcast_to / broadcast_tensors,
hstack / vstack / dstack / column_stack, atleast_Nd, ravel, nansum, nanmean, median,
logaddexp, clamp_min / clamp_max, scatter_add, index_add, scatter, unique, argwhere,
bernoulli): values against NumPy, gradients by gradcheck in
float64, values / dtypes / gradients / errors against PyTorch when it is installed, and the
same results on CUDA and compiled. (The new registry ops -- flip, roll, cumsum, round,
trunc, frac, atan2 -- are checked by the registry-driven tests.)"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.autograd import gradcheck

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4, 5))
V = RNG.standard_normal(4)

#: name -> function of the library (jitgrad or torch) and the float64 input tensor ``x``
#: (3 x 4); every one is differentiable in ``x``
DIFFERENTIABLE = {
    "einsum_mm": lambda M, x: M.einsum("ij,jk->ik", x, M.tensor(B)),
    "einsum_batch": lambda M, x: M.einsum("bij,bkj->bik", x.reshape(1, 3, 4),
                                          x.reshape(1, 3, 4) * 2.0),
    "einsum_diag": lambda M, x: M.einsum("ii->i", x[:, :3]),
    "einsum_trace": lambda M, x: M.einsum("ii", x[:, :3]),
    "einsum_implicit": lambda M, x: M.einsum("ij,kj", x, x),
    "einsum_ellipsis": lambda M, x: M.einsum("...j,j->...", x, M.tensor(V)),
    "einsum_outer_sum": lambda M, x: M.einsum("i,j->", x[0], x[1]),
    "einsum_three": lambda M, x: M.einsum("ij,jk,ik->i", x, M.tensor(B), x @ M.tensor(B)),
    "einsum_broadcast": lambda M, x: M.einsum("ij,ij->ij", x[:, :1], x),
    "einsum_list": lambda M, x: M.einsum("ij->ji", [x]),
    "index_select": lambda M, x: M.index_select(x, 1, M.tensor([2, 0, 2])),
    "index_select_0d": lambda M, x: x.index_select(0, M.tensor(1)),
    "masked_select": lambda M, x: x.masked_select(x > 0),
    "masked_select_broadcast": lambda M, x: M.masked_select(
        x, M.tensor([True, False, True, False])),
    "repeat_interleave": lambda M, x: x.repeat_interleave(2),
    "repeat_interleave_counts": lambda M, x: x.repeat_interleave(M.tensor([1, 0, 3]), dim=0),
    "repeat_interleave_dim": lambda M, x: M.repeat_interleave(x, 2, dim=-1),
    "diag": lambda M, x: M.diag(x),
    "diag_above": lambda M, x: x.diag(1),
    "diag_below": lambda M, x: x.diag(-2),
    "diag_of_vector": lambda M, x: M.diag(x[0]),
    "diag_of_vector_above": lambda M, x: M.diag(x[0], 2),
    "diag_of_vector_below": lambda M, x: M.diag(x[0], -1),
    "trace": lambda M, x: M.trace(x),
    "trace_method": lambda M, x: x.trace(),
    "meshgrid_ij": lambda M, x: M.meshgrid(x[0], x[1, :3], indexing="ij"),
    "meshgrid_xy": lambda M, x: M.meshgrid(x[0], x[1, :3], x[2, :2], indexing="xy"),
    "nan_to_num": lambda M, x: M.nan_to_num(M.log(x)),
    "nan_to_num_values": lambda M, x: M.log(x).nan_to_num(nan=-1.0, neginf=-5.0),
    "var_mean": lambda M, x: M.var_mean(x, 1),
    "std_mean": lambda M, x: M.std_mean(x),
    "std_mean_keepdim": lambda M, x: M.std_mean(x, 0, keepdim=True, correction=0),
    "addmm_scaled": lambda M, x: M.addmm(x[0, :3] * 1.0, x[:, :2], x[:2, :3],
                                         beta=0.5, alpha=2.0),
    "addmm_beta0": lambda M, x: x[0, :3].addmm(x[:, :2], x[:2, :3], beta=0),
    "addmv": lambda M, x: M.addmv(x[:, 0] * 1.0, x, x[0], beta=2.0, alpha=-1.0),
    "baddbmm": lambda M, x: M.baddbmm(x[:, :3], x.reshape(1, 3, 4), x.reshape(1, 4, 3),
                                      beta=0.5, alpha=2.0),
    "repeat": lambda M, x: x.repeat(2, 1, 2),
    "tile": lambda M, x: M.tile(x, (2,)),
    "tile_method": lambda M, x: x.tile(2, 1, 1),
    "broadcast_to": lambda M, x: M.broadcast_to(x[0], (3, 4)),
    "broadcast_tensors": lambda M, x: M.broadcast_tensors(x, x[:1] * 2.0),
    "hstack": lambda M, x: M.hstack([x, x[:, :1]]),
    "vstack": lambda M, x: M.vstack([x, x[0]]),
    "dstack": lambda M, x: M.dstack([x[0], x[1]]),
    "column_stack": lambda M, x: M.column_stack([x, x[:, 0]]),
    "atleast_3d": lambda M, x: M.atleast_3d(x[0], x),
    "ravel": lambda M, x: x.ravel(),
    "nansum": lambda M, x: M.nansum(M.log(x)),
    "nansum_dim": lambda M, x: M.log(x).nansum(1, keepdim=True),
    "nanmean": lambda M, x: M.nanmean(M.log(x), 0),
    "median": lambda M, x: x.median(),
    "median_dim": lambda M, x: M.median(x, 1),
    "median_dim_keepdim": lambda M, x: x.median(0, keepdim=True),
    "median_nan_rows": lambda M, x: M.log(x).median(1),
    "logaddexp": lambda M, x: M.logaddexp(x, x.flip(1) * 0.5),
    "logaddexp_equal": lambda M, x: M.logaddexp(x, x),
    "clamp_min": lambda M, x: x.clamp_min(0.1),
    "clamp_max": lambda M, x: M.clamp_max(x, 0.1),
    "scatter_add": lambda M, x: M.scatter_add(x, 0, M.tensor([[0, 1, 2, 0], [2, 0, 0, 1]]),
                                              x[:2] * 3.0),
    "scatter_add_inplace": lambda M, x: (x * 1.0).scatter_add_(
        1, M.tensor([[0, 0, 3], [1, 2, 2], [3, 3, 3]]), x[:, 1:] ** 2),
    "index_add": lambda M, x: x.index_add(0, M.tensor([2, 0, 2]), x.flip(0), alpha=2.0),
    "index_add_inplace": lambda M, x: (x * 1.0).index_add_(1, M.tensor([3, 0]), x[:, :2]),
    "scatter": lambda M, x: x.scatter(0, M.tensor([[0, 1, 2, 0], [2, 2, 1, 1]]), x[1:] * 5.0),
    "scatter_value": lambda M, x: (x * 1.0).scatter_(1, M.tensor([[0], [3], [1]]), 7.5),
    "logit": lambda M, x: M.logit(M.sigmoid(x)),
    "logit_eps": lambda M, x: (M.sigmoid(x * 3.0)).logit(eps=0.1),
    "xlogy": lambda M, x: M.xlogy(x, x.abs() + 0.5),
    "xlogy_zeros": lambda M, x: M.xlogy((x > 0).double() * x, x.abs() + 0.5),
    "sgn": lambda M, x: x.sgn() * x,
    "diff": lambda M, x: M.diff(x, n=2),
    "diff_dim_prepend": lambda M, x: x.diff(dim=0, prepend=x[:1] * 2.0, append=x[-1:]),
    "aminmax": lambda M, x: M.aminmax(x, dim=1),
    "tensor_split": lambda M, x: M.tensor_split(x, 3, dim=1),
    "tensor_split_indices": lambda M, x: x.tensor_split((1, 3), dim=1),
    "hsplit": lambda M, x: M.hsplit(x, 2),
    "vsplit": lambda M, x: x.vsplit([1]),
    "kron": lambda M, x: M.kron(x[:2, :2], x[1:, 2:]),
    "kron_ranks": lambda M, x: M.kron(x[0], x[:2, :3]),
    "tensordot": lambda M, x: M.tensordot(x, x.t() * 2.0, dims=1),
    "tensordot_lists": lambda M, x: M.tensordot(x.reshape(2, 2, 3), x.reshape(2, 3, 2),
                                                dims=([0, 2], [0, 1])),
    "inner": lambda M, x: M.inner(x, x[:2]),
    "cdist": lambda M, x: M.cdist(x, x[:2] * 0.5),
    "cdist_p1": lambda M, x: M.cdist(x.reshape(1, 3, 4), x.reshape(1, 3, 4).flip(1), p=1.0),
    "take_along_dim": lambda M, x: M.take_along_dim(x, M.tensor([[0], [2], [1]]), 1),
    "take_along_dim_flat": lambda M, x: x.take_along_dim(M.tensor([5, 0, 11])),
    "remainder_operator": lambda M, x: (x * 3.0) % 1.3,
    "remainder_tensors": lambda M, x: M.remainder(x * 3.0, x.flip(0).abs() + 0.5),
    "fmod": lambda M, x: M.fmod(x * 3.0, -1.3),
}

#: value functions with no gradient
VALUES = {
    "isclose": lambda M: M.isclose(M.tensor([1.0, np.inf, np.nan, -np.inf, 2.0, 1e-9]),
                                   M.tensor([1 + 1e-6, np.inf, np.nan, np.inf, 2.1, 0.0])),
    "isclose_equal_nan": lambda M: M.tensor([np.nan, 1.0]).isclose(
        M.tensor([np.nan, 1.5]), rtol=0.5, equal_nan=True),
    "isclose_int": lambda M: M.isclose(M.tensor([1, 2, 100]), M.tensor([1, 3, 101]),
                                       rtol=0.01, atol=0),
    "count_nonzero": lambda M: M.count_nonzero(M.tensor([[0, 1, 2], [0, 0, 3]]), 0),
    "count_nonzero_all": lambda M: M.tensor([[0.0, 1.5], [0.0, -2.0]]).count_nonzero(),
    "count_nonzero_dims": lambda M: M.count_nonzero(M.tensor([[[0, 1], [2, 0]]]), (0, 2)),
    "repeat_interleave_positions": lambda M: M.repeat_interleave(M.tensor([1, 2, 0, 3])),
    "diag_int": lambda M: M.diag(M.tensor([1, 2, 3]), -1),
    "trace_int": lambda M: M.trace(M.arange(9).reshape(3, 3)),
    "index_select_int32_index": lambda M: M.arange(5).index_select(
        0, M.tensor([4, 1], dtype=M.int32)),
    "nan_to_num_int": lambda M: M.nan_to_num(M.tensor([1, 2])),
    "nan_to_num_float32": lambda M: M.nan_to_num(M.tensor([np.nan, np.inf, -np.inf, 1.0],
                                                          dtype=M.float32)),
    "unique": lambda M: M.unique(M.tensor([[3, 1, 2], [1, 3, 3]])),
    "unique_all": lambda M: M.tensor([[3, 1, 2], [1, 3, 3]]).unique(return_inverse=True,
                                                                     return_counts=True),
    "unique_dim": lambda M: M.unique(M.tensor([[3, 1], [1, 3], [3, 1]]), dim=0,
                                     return_inverse=True),
    "argwhere": lambda M: M.argwhere(M.tensor([[0.0, 1.0], [2.0, 0.0]])),
    "median_ties_empty": lambda M: M.tensor([]).median(),
    "logaddexp_infinities": lambda M: M.logaddexp(
        M.tensor([np.inf, -np.inf, 1.0, np.nan]), M.tensor([np.inf, -np.inf, -np.inf, 0.0])),
    "one_hot_by_scatter": lambda M: M.zeros(3, 4).scatter_(1, M.tensor([[1], [0], [3]]), 1.0),
    "scatter_reduce_add": lambda M: M.zeros(2, 3).scatter(
        1, M.tensor([[0, 0], [2, 1]]), M.ones(2, 2), reduce="add"),
    "nansum_int": lambda M: M.nansum(M.tensor([1, 2, 3])),
    "isin": lambda M: M.isin(M.tensor([1, 2, 3]), M.tensor([2, 5])),
    "isin_invert_scalar": lambda M: M.isin(M.tensor([1, 2, 3]), 2, invert=True),
    "isin_empty": lambda M: M.isin(M.tensor([1.0, np.nan]), M.tensor([], dtype=M.float32)),
    "isneginf": lambda M: M.isneginf(M.tensor([-np.inf, 1.0, np.inf])),
    "isposinf": lambda M: M.tensor([-np.inf, 1.0, np.inf]).isposinf(),
    "signbit": lambda M: M.signbit(M.tensor([-0.0, 0.0, -1.0, 2.0])),
    "diff_bool": lambda M: M.tensor([True, False, False]).diff(),
    "diff_int": lambda M: M.diff(M.tensor([1, 3, 6, 10]), n=2),
    "tensor_split_uneven": lambda M: M.tensor_split(M.arange(7), 3),
    "hypot_large": lambda M: M.hypot(M.tensor([1e200, 3.0], dtype=M.float64),
                                     M.tensor([1e200, 4.0], dtype=M.float64)),
    "remainder_int": lambda M: M.tensor([5, -5, 7]) % 3,
    "remainder_reflected": lambda M: 7.0 % M.tensor([2.0, -3.0]),
    "remainder_scalar_first": lambda M: M.remainder(7, M.tensor([3, -2])),
    "fmod_int": lambda M: M.fmod(M.tensor([5, -5, 7]), -3),
    "remainder_by_zero_float": lambda M: M.remainder(M.tensor([5.0, -1.0]), 0.0),
}

#: bad input: PyTorch's exception type and message
ERRORS = {
    "index_out_of_range": lambda M: M.index_select(M.ones(2, 3), 1, M.tensor([3])),
    "negative_index": lambda M: M.index_select(M.ones(2, 3), 1, M.tensor([-1])),
    "index_not_vector": lambda M: M.ones(2).index_select(0, M.tensor([[0]])),
    "index_float": lambda M: M.ones(2).index_select(0, M.tensor([0.0])),
    "mask_not_bool": lambda M: M.ones(2).masked_select(M.tensor([1, 0])),
    "repeats_size": lambda M: M.ones(2, 3).repeat_interleave(M.tensor([1, 2]), dim=1),
    "repeats_negative": lambda M: M.ones(3).repeat_interleave(-1),
    "diag_3d": lambda M: M.diag(M.ones(2, 2, 2)),
    "trace_3d": lambda M: M.ones(2, 2, 2).trace(),
    "isclose_dtypes": lambda M: M.isclose(M.ones(2), M.ones(2, dtype=M.int64)),
    "meshgrid_indexing": lambda M: M.meshgrid(M.ones(2), M.ones(2), indexing="yx"),
    "einsum_sizes": lambda M: M.einsum("ij,jk->ik", M.ones(3, 4), M.ones(5, 5)),
    "einsum_unknown_output": lambda M: M.einsum("ij->k", M.ones(2, 2)),
    "einsum_repeated_output": lambda M: M.einsum("i->ii", M.ones(3)),
    "einsum_operand_count": lambda M: M.einsum("ij", M.ones(2, 3), M.ones(3)),
    "frac_int": lambda M: M.frac(M.tensor([1, 2])),
    "einsum_few_operands": lambda M: M.einsum("i,j", M.ones(2)),
    "einsum_dims": lambda M: M.einsum("ij", M.ones(2)),
    "einsum_subscript": lambda M: M.einsum("i1", M.ones(2, 2)),
    "einsum_diagonal_sizes": lambda M: M.einsum("ii", M.ones(2, 3)),
    "einsum_dot": lambda M: M.einsum("i.j", M.ones(2, 3)),
    "repeat_fewer_dims": lambda M: M.ones(2, 3).repeat(2),
    "broadcast_shapes": lambda M: M.broadcast_shapes((2, 1), (3, 2), (5, 1, 1)),
    "scatter_add_out_of_range": lambda M: M.scatter_add(
        M.ones(3, 4), 0, M.tensor([[5, 0, 0, 0]]), M.ones(1, 4)),
    "index_add_count": lambda M: M.ones(3, 4).index_add(0, M.tensor([0]), M.ones(2, 4)),
    "index_add_shape": lambda M: M.ones(3, 4).index_add(0, M.tensor([0, 1]), M.ones(2, 3)),
    "median_empty_dim": lambda M: M.tensor([]).median(0),
    "nanmean_int": lambda M: M.nanmean(M.tensor([1, 2])),
    "bernoulli_p_range": lambda M: M.bernoulli(M.tensor([0.5, 1.5])),
    "hsplit_uneven": lambda M: M.arange(7).reshape(1, 7).hsplit(3),
    "vsplit_vector": lambda M: M.vsplit(M.arange(4), 2),
    "tensordot_sizes": lambda M: M.tensordot(M.ones(2, 3), M.ones(4, 2), dims=1),
    "cdist_columns": lambda M: M.cdist(M.ones(2, 3), M.ones(2, 4)),
    "take_along_dim_ranks": lambda M: M.take_along_dim(M.ones(2, 3), M.tensor([0]), 1),
    "diff_scalar": lambda M: M.diff(M.tensor(1.0)),
    "remainder_int_by_zero": lambda M: M.tensor([5, 1]) % 0,
    "fmod_int_by_zero": lambda M: M.fmod(M.tensor([5, 1]), M.tensor([1, 0])),
}


def _leaves(y):
    return list(y) if isinstance(y, tuple) else [y]  # (a return type is a tuple too)


def _np(t):
    return t.detach().cpu().numpy()


# ------------------------------------------------------------------ without PyTorch
NUMPY = {
    "einsum_mm": lambda a: np.einsum("ij,jk->ik", a, B),
    "einsum_diag": lambda a: np.einsum("ii->i", a[:, :3]),
    "einsum_implicit": lambda a: np.einsum("ij,kj", a, a),
    "einsum_ellipsis": lambda a: np.einsum("...j,j->...", a, V),
    "einsum_three": lambda a: np.einsum("ij,jk,ik->i", a, B, a @ B),
    "index_select": lambda a: a[:, [2, 0, 2]],
    "masked_select": lambda a: a[a > 0],
    "repeat_interleave": lambda a: np.repeat(a.reshape(-1), 2),
    "repeat_interleave_counts": lambda a: np.repeat(a, [1, 0, 3], axis=0),
    "diag": lambda a: np.diag(a),
    "diag_above": lambda a: np.diag(a, 1),
    "diag_of_vector_below": lambda a: np.diag(a[0], -1),
    "trace": lambda a: np.trace(a),
    "meshgrid_xy": lambda a: tuple(np.meshgrid(a[0], a[1, :3], a[2, :2], indexing="xy")),
    "var_mean": lambda a: (a.var(1, ddof=1), a.mean(1)),
    "repeat": lambda a: np.tile(a, (2, 1, 2)),
    "tile": lambda a: np.tile(a, (2,)),
    "hstack": lambda a: np.hstack([a, a[:, :1]]),
    "dstack": lambda a: np.dstack([a[0], a[1]]),
    "column_stack": lambda a: np.column_stack([a, a[:, 0]]),
    "nansum": lambda a: np.nansum(np.log(np.where(a > 0, a, np.nan))),
    "median": lambda a: np.sort(a.reshape(-1))[(a.size - 1) // 2],
    "logaddexp": lambda a: np.logaddexp(a, a[:, ::-1] * 0.5),
    "baddbmm": lambda a: 0.5 * a[:, :3] + 2.0 * (a.reshape(1, 3, 4) @ a.reshape(1, 4, 3)),
}


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_values_match_numpy(name):
    got = _leaves(DIFFERENTIABLE[name](jitgrad, jitgrad.tensor(A)))
    want = NUMPY[name](A)
    want = list(want) if isinstance(want, tuple) else [want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(_np(g), w, rtol=1e-12, atol=1e-12)


def test_isclose_and_count_nonzero_match_numpy():
    a = np.array([1.0, np.inf, np.nan, -np.inf, 2.0, 1e-9])
    b = np.array([1 + 1e-6, np.inf, np.nan, np.inf, 2.1, 0.0])
    for eq_nan in (False, True):
        np.testing.assert_array_equal(
            jitgrad.isclose(jitgrad.tensor(a), jitgrad.tensor(b), equal_nan=eq_nan).numpy(),
            np.isclose(a, b, equal_nan=eq_nan))
    m = np.array([[0, 1, 2], [0, 0, 3]])
    assert jitgrad.count_nonzero(jitgrad.tensor(m), 1).tolist() == [2, 1]
    assert jitgrad.tensor(m).count_nonzero().item() == 3


@pytest.mark.parametrize("name", sorted(n for n in DIFFERENTIABLE if "nan_rows" not in n))
def test_gradcheck_float64(name):
    fn = DIFFERENTIABLE[name]
    x = jitgrad.tensor(A + 2.5 if "nan_to_num" in name else A, requires_grad=True)

    def scalar(x):
        return sum((leaf * (k + 1.0)).sum() for k, leaf in enumerate(_leaves(fn(jitgrad, x))))
    assert gradcheck(scalar, (x,), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_meshgrid_warns_without_indexing_and_trace_is_also_the_package():
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        gx, gy = jitgrad.meshgrid(jitgrad.arange(2), jitgrad.arange(3))
    assert gx.shape == (2, 3) and gy.tolist() == [[0, 1, 2], [0, 1, 2]]
    assert jitgrad.trace(jitgrad.eye(3) * 2.0).item() == 6.0
    import jitgrad.trace.tracer as tracer_module  # the tracer package is still a package

    assert jitgrad.trace.tracer is tracer_module


# -------------------------------------------------------------------- PyTorch oracle
@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_values_and_gradients_match_pytorch(name):
    torch = pytest.importorskip("torch")
    fn = DIFFERENTIABLE[name]
    x, xt = jitgrad.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    ys, yts = _leaves(fn(jitgrad, x)), _leaves(fn(torch, xt))
    assert len(ys) == len(yts)
    for y, yt in zip(ys, yts):
        assert tuple(y.shape) == tuple(yt.shape) and y.dtype.name == str(yt.dtype)[6:]
        np.testing.assert_allclose(_np(y), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    sum((y * (k + 1.0)).sum() for k, y in enumerate(ys)).backward()
    sum((y * (k + 1.0)).sum() for k, y in enumerate(yts)).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(VALUES))
@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_value_functions_match_pytorch(name):
    torch = pytest.importorskip("torch")
    ys, yts = _leaves(VALUES[name](jitgrad)), _leaves(VALUES[name](torch))
    assert len(ys) == len(yts)
    for y, yt in zip(ys, yts):
        assert tuple(y.shape) == tuple(yt.shape) and y.dtype.name == str(yt.dtype)[6:]
        np.testing.assert_array_equal(_np(y), yt.numpy())


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_pytorch(name):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as ours:
        ERRORS[name](jitgrad)
    with pytest.raises(Exception) as theirs:
        ERRORS[name](torch)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value).split("\n")[0] == str(theirs.value).split("\n")[0]


# ------------------------------------------------------------------- CUDA and compiled
CUDA_CASES = ["einsum_batch", "einsum_three", "index_select", "masked_select",
              "repeat_interleave_counts", "diag_of_vector_above", "diag_below", "trace",
              "meshgrid_xy", "nan_to_num", "var_mean", "baddbmm", "repeat", "hstack",
              "nansum", "median_dim", "logaddexp", "scatter_add", "index_add", "scatter",
              "kron", "tensordot_lists", "cdist", "take_along_dim", "diff_dim_prepend", "xlogy"]


@pytest.mark.parametrize("name", CUDA_CASES)
@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_cuda_gives_the_cpus_values_and_gradients(name):
    if not jitgrad.cuda.is_available():
        pytest.skip("no CUDA")
    fn = DIFFERENTIABLE[name]
    x = jitgrad.tensor(A + 2.5 if "nan_to_num" in name else A, requires_grad=True)
    xc = jitgrad.tensor(x.detach().numpy(), device="cuda", requires_grad=True)
    ys, ycs = _leaves(fn(jitgrad, x)), _leaves(fn(_OnCuda, xc))
    for y, yc in zip(ys, ycs):
        assert yc.device == "cuda:0"
        np.testing.assert_allclose(_np(yc), _np(y), rtol=1e-12, atol=1e-12)
    sum(y.sum() for y in ys).backward()
    sum(y.sum() for y in ycs).backward()
    assert xc.grad.device == "cuda:0"
    np.testing.assert_allclose(_np(xc.grad), x.grad.numpy(), rtol=1e-12, atol=1e-12)


class _OnCuda:
    """jitgrad, with ``tensor`` making CUDA tensors (the cases' constant operands)."""

    def __getattr__(self, name):
        return getattr(jitgrad, name)

    @staticmethod
    def tensor(data, **kw):
        return jitgrad.tensor(data, device="cuda", **kw)


_OnCuda = _OnCuda()


@pytest.mark.parametrize("name", ["einsum_three", "index_select", "diag_of_vector_above",
                                  "trace", "meshgrid_ij", "var_mean", "addmm_scaled",
                                  "repeat_interleave_dim", "repeat", "tile", "vstack",
                                  "logaddexp", "clamp_min", "nansum_dim", "scatter_add"])
def test_compiled_equals_eager(name):
    fn = DIFFERENTIABLE[name]

    def step(x):
        return sum((y * 1.5).sum() for y in _leaves(fn(jitgrad, x)))
    x1 = jitgrad.tensor(A, requires_grad=True)
    x2 = jitgrad.tensor(A, requires_grad=True)
    ref = step(x1)
    ref.backward()
    compiled = jitgrad.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # traced whole: no graph break
        for _ in range(2):
            x2.grad = None
            out = compiled(x2)
            out.backward()
    assert out.item() == ref.item()
    np.testing.assert_array_equal(x2.grad.numpy(), x1.grad.numpy())


def test_bernoulli_draws_from_the_generator():
    jitgrad.manual_seed(0)
    p = jitgrad.full((4000,), 0.3)
    b = jitgrad.bernoulli(p)
    assert b.dtype == jitgrad.float32 and set(b.unique().tolist()) == {0.0, 1.0}
    assert abs(b.mean().item() - 0.3) < 0.03
    g1, g2 = jitgrad.Generator().manual_seed(5), jitgrad.Generator().manual_seed(5)
    assert jitgrad.bernoulli(p, generator=g1).tolist() == p.bernoulli(generator=g2).tolist()
    assert jitgrad.zeros(100).bernoulli_(1.0).sum().item() == 100.0
    assert jitgrad.ones(5).bernoulli(0.0).tolist() == [0.0] * 5
    if jitgrad.cuda.is_available():
        jitgrad.manual_seed(1)
        c = jitgrad.bernoulli(jitgrad.full((50,), 0.5, device="cuda"))
        jitgrad.manual_seed(1)
        assert c.device == "cuda:0" and c.cpu().tolist() == jitgrad.bernoulli(
            jitgrad.full((50,), 0.5)).tolist()


def test_median_shares_the_gradient_of_ties_as_pytorch():
    x = jitgrad.tensor([1.0, 2.0, 2.0, 3.0], requires_grad=True)
    m = x.median()
    m.backward()
    assert m.item() == 2.0 and m.grad_fn.name() == "MedianBackward0"
    assert x.grad.tolist() == [0.0, 0.5, 0.5, 0.0]
    y = jitgrad.tensor([np.nan, 1.0, np.nan], requires_grad=True)
    y.median().backward()
    assert y.grad.tolist() == [0.5, 0.0, 0.5]
