"""What a stop-50 probe of 48 PyTorch scripts found apart from torch: ``searchsorted`` /
``bucketize`` of a scalar value (0-d results), in-place ops on the outputs of ``unbind`` /
``split`` / ``chunk`` (PyTorch's multi-output-view error), the broadcast error in PyTorch's
words, ``torch.random.fork_rng``, the version-counter hint, ``Tensor.view(dtype)``,
``Tensor.is_inference``, LBFGS's ``al`` state, the schedulers' ``_get_lr_called_within_step``
and integer optimizer defaults. Compared live with torch when it is installed."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_raises_like_torch

import jitgrad as jg


def _torch():
    return pytest.importorskip("torch")


def _result(r):
    return tuple(r.shape), str(r.dtype).split(".")[-1], r.tolist()


# ------------------------------------------------------------- searchsorted / bucketize
_SEARCH = {
    "tensor_0d": lambda M, s: M.searchsorted(s, M.tensor(2.0)),
    "float": lambda M, s: M.searchsorted(s, 2.0),
    "int": lambda M, s: M.searchsorted(s, 2),
    "bool": lambda M, s: M.searchsorted(s, True),
    "right": lambda M, s: M.searchsorted(s, M.tensor(2.0), right=True),
    "side": lambda M, s: M.searchsorted(s, 2.0, side="right"),
    "int32": lambda M, s: M.searchsorted(s, M.tensor(2.0), out_int32=True),
    "int32_right": lambda M, s: M.searchsorted(s, 2.0, out_int32=True, right=True),
    "sorter": lambda M, s: M.searchsorted(M.tensor([3.0, 1.0, 2.0]), 2.5,
                                          sorter=M.tensor([1, 2, 0])),
    "empty_sequence": lambda M, s: M.searchsorted(M.tensor([]), 2.0),
    "requires_grad": lambda M, s: M.searchsorted(s, M.tensor(2.0, requires_grad=True)),
    "one_element": lambda M, s: M.searchsorted(s, M.tensor([2.0])),
    "bucketize_0d": lambda M, s: M.bucketize(M.tensor(2.0), s),
    "bucketize_float": lambda M, s: M.bucketize(2.5, s),
    "bucketize_right": lambda M, s: M.bucketize(2.0, s, right=True),
    "bucketize_int32": lambda M, s: M.bucketize(M.tensor(2.0), s, right=True, out_int32=True),
    "bucketize_empty": lambda M, s: M.bucketize(2.0, M.tensor([])),
}


@pytest.mark.parametrize("name", sorted(_SEARCH))
def test_searchsorted_of_a_scalar_is_0d(name):
    call = _SEARCH[name]
    got = _result(call(jg, jg.tensor([1.0, 2.0, 3.0])))
    if name not in ("one_element",):
        assert got[0] == ()
    torch = _torch()
    assert got == _result(call(torch, torch.tensor([1.0, 2.0, 3.0])))


def test_searchsorted_scalar_fixed_values():
    s = jg.tensor([1.0, 2.0, 3.0])
    r = jg.searchsorted(s, 2.0)
    assert r.shape == () and r.dtype is jg.int64 and r.item() == 1
    r = jg.bucketize(2.5, s, out_int32=True)
    assert r.shape == () and r.dtype is jg.int32 and r.item() == 2
    x = jg.arange(3.0)
    assert x[jg.searchsorted(s, jg.tensor(2.0))].shape == ()


@pytest.mark.parametrize("call", [
    lambda M: M.searchsorted(M.ones(2, 3), M.tensor(2.0)),
    lambda M: M.searchsorted(M.ones(2, 3), 2.0),
    lambda M: M.searchsorted(M.tensor(1.0), M.tensor(2.0)),
    lambda M: M.searchsorted(M.tensor(1.0), M.tensor([2.0])),
    lambda M: M.bucketize(2.0, M.ones(2, 3)),
])
def test_searchsorted_scalar_errors(call):
    assert_raises_like_torch(call, RuntimeError)


# ------------------------------------------------- in-place on multi-output views
_MULTI = {
    "unbind": lambda b: b.unbind(0)[1],
    "unbind_dim1": lambda b: b.unbind(1)[1],
    "unbind_fn": lambda b: type(b).unbind(b)[0],
    "split": lambda b: b.split(1)[1],
    "split_list": lambda b: b.split([1, 1])[1],
    "chunk": lambda b: b.chunk(2)[1],
    "chunk_dim1": lambda b: b.chunk(2, 1)[0],
}
_INPLACE = {
    "mul_": lambda x: x.mul_(2),
    "add_": lambda x: x.add_(1),
    "iadd": lambda x: x.__iadd__(1),
    "zero_": lambda x: x.zero_(),
    "copy_": lambda x: x.copy_(x.detach() + 1),
    "normal_": lambda x: x.normal_(),
    "setitem": lambda x: x.__setitem__(0, 5.0),
    "view_of_it": lambda x: x[0:1].mul_(2),
    "t_": lambda x: x.unsqueeze_(0),
}


def _multi_case(M, make, op, leaf):
    a = M.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = a if leaf else a * 1
    x = make(b)
    before = (b.detach().clone(), x.detach().clone(), x._version)
    with pytest.raises(RuntimeError) as e:
        op(x)
    assert b.detach().tolist() == before[0].tolist()
    assert x.detach().tolist() == before[1].tolist() and x._version == before[2]
    return str(e.value)


@pytest.mark.parametrize("leaf", [False, True])
@pytest.mark.parametrize("op", sorted(_INPLACE))
@pytest.mark.parametrize("make", sorted(_MULTI))
def test_inplace_on_multi_output_view_raises_pytorchs_error(make, op, leaf):
    got = _multi_case(jg, _MULTI[make], _INPLACE[op], leaf)
    assert got.endswith("This view is the output of a function that returns multiple views. "
                        "Such functions do not allow the output views to be modified inplace. "
                        "You should replace the inplace operation by an out-of-place one.")
    torch = _torch()
    assert got == _multi_case(torch, _MULTI[make], _INPLACE[op], leaf)


def test_multi_output_view_error_text():
    a = jg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    x, y = (a * 1).unbind(0)
    with pytest.raises(RuntimeError) as e:
        y.mul_(2)
    assert str(e.value) == (
        "Output 1 of Unbind is a view and is being modified inplace. This view is the output "
        "of a function that returns multiple views. Such functions do not allow the output "
        "views to be modified inplace. You should replace the inplace operation by an "
        "out-of-place one.")
    with pytest.raises(RuntimeError, match="^Output 0 of SplitWithSizes is a view"):
        (a * 1).split([1, 1])[0].add_(1)
    # out of place: fine, and the gradient is right
    (3 * x.sum() + y.sum()).backward()
    assert a.grad.tolist() == [[3.0, 3.0], [1.0, 1.0]]


def _allowed(M):
    a = M.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    out = []
    b = a * 1
    with M.no_grad():  # made and modified in no_grad mode
        b.unbind(0)[0].mul_(2)
    out.append(b.tolist())
    b = a * 1
    x = b.unbind(0)[0]
    with M.no_grad():  # made in grad mode, modified in no_grad mode
        x.mul_(2)
    out.append(b.tolist())
    c = M.ones(2, 2)  # nothing requires grad
    c.unbind(0)[0].mul_(2)
    c.split(1)[1].add_(1)
    out.append(c.tolist())
    b = a * 1  # views of other functions
    b.tensor_split(2)[1].mul_(2)
    b.hsplit(2)[0].add_(1)
    b.narrow(0, 0, 1).mul_(3)
    out.append(b.tolist())
    b = a * 1  # unsafe_* have no such check
    M.unsafe_split(b, 1)[1].mul_(2)
    M.unsafe_chunk(b, 2)[0].mul_(2)
    out.append(b.tolist())
    b = a * 1  # .detach() / .data of one: fine
    b.unbind(0)[0].detach().mul_(2)
    b.unbind(0)[1].data.add_(1)
    out.append(b.tolist())
    return out


def test_inplace_on_multi_output_view_allowed_cases():
    got = _allowed(jg)
    assert got[2] == [[2.0, 2.0], [2.0, 2.0]]
    torch = _torch()
    assert got == _allowed(torch)


def _no_grad_made(M):
    a = M.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = a * 1
    with M.no_grad():
        x = b.unbind(0)[0]
    x.mul_(2)


def _base_without_grad(M):
    c = M.ones(2, 2)
    c.unbind(0)[0].mul_(M.ones(2, requires_grad=True))


@pytest.mark.parametrize("call", [_no_grad_made, _base_without_grad])
def test_multi_output_view_other_messages(call):
    assert_raises_like_torch(call, RuntimeError)


def test_requires_grad_true_on_a_non_leaf_is_a_no_op():
    a = jg.ones(2, requires_grad=True)
    b = a * 2
    assert b.requires_grad_(True) is b and b.grad_fn is not None
    with pytest.raises(RuntimeError, match=r"^you can only change requires_grad flags of leaf "
                                           r"variables.$"):
        b.requires_grad = True


# ------------------------------------------------------------------ broadcast errors
_BROADCAST = {
    "add": lambda M: M.ones(2, 3) + M.ones(3, 2),
    "add_3d": lambda M: M.ones(4, 2, 3) + M.ones(5, 1, 3),
    "lead": lambda M: M.ones(2, 3) + M.ones(4, 3, 1),
    "vector": lambda M: M.ones(2, 3) * M.ones(4),
    "sub": lambda M: M.ones(2, 3) - M.ones(2),
    "div_1d": lambda M: M.ones(3) / M.ones(2),
    "large": lambda M: M.ones(200, 300) + M.ones(300, 200),
    "int": lambda M: M.ones(2, 3, dtype=M.int64) + M.ones(3, 2, dtype=M.int64),
    "lt": lambda M: M.ones(2, 3) < M.ones(3, 2),
    "maximum": lambda M: M.maximum(M.ones(2, 3), M.ones(3, 2)),
    "where": lambda M: M.where(M.ones(2, 3) > 0, M.ones(3, 2), M.ones(2, 3)),
    "where_other": lambda M: M.where(M.ones(2, 3) > 0, M.ones(2, 3), M.ones(4, 3)),
    "lerp": lambda M: M.lerp(M.ones(2, 3), M.ones(3, 2), 0.5),
    "addcmul": lambda M: M.addcmul(M.ones(2, 3), M.ones(2, 3), M.ones(3, 2)),
    "addcdiv": lambda M: M.addcdiv(M.ones(2, 1), M.ones(1, 3), M.ones(4, 1)),
    "pow": lambda M: M.ones(2, 3) ** M.ones(3, 2),
    "add_": lambda M: M.ones(2, 3).add_(M.ones(3, 2)),
    "requires_grad": lambda M: M.ones(2, 3).requires_grad_() * M.ones(3, 2),
    "matmul_batch": lambda M: M.ones(2, 3, 4) @ M.ones(3, 4, 5),
    "matmul_batch_4d": lambda M: M.matmul(M.ones(2, 1, 3, 4), M.ones(3, 5, 4, 5)),
    "broadcast_tensors": lambda M: M.broadcast_tensors(M.ones(2, 3), M.ones(3, 2)),
    "broadcast_tensors_3": lambda M: M.broadcast_tensors(M.ones(2, 1), M.ones(1, 3),
                                                         M.ones(4, 1)),
    "copy_": lambda M: M.ones(2, 3).copy_(M.ones(3, 2)),
    "clamp": lambda M: M.clamp(M.ones(2, 3), M.ones(3, 2)),
    "logical_and": lambda M: M.logical_and(M.ones(2, 3), M.ones(3, 2)),
    "bitwise_and": lambda M: M.ones(2, 3, dtype=M.int32) & M.ones(3, 2, dtype=M.int32),
    "xlogy": lambda M: M.xlogy(M.ones(2, 3), M.ones(3, 2)),
    "add_alpha": lambda M: M.add(M.ones(2, 3), M.ones(3, 2), alpha=2),
    "normal": lambda M: M.normal(M.ones(2, 3), M.ones(3, 2)),
    "masked_scatter": lambda M: M.ones(2, 3).masked_scatter(M.ones(3, 2) > 0, M.ones(6)),
    "masked_fill_": lambda M: M.ones(2, 3).masked_fill_(M.ones(3, 2) > 0, 1.0),
    "mse_loss": lambda M: M.nn.functional.mse_loss(M.ones(2, 3), M.ones(3, 2)),
}


@pytest.mark.filterwarnings("ignore:Using a target size")
@pytest.mark.parametrize("name", sorted(_BROADCAST))
def test_broadcast_error_is_pytorchs(name):
    assert_raises_like_torch(_BROADCAST[name], RuntimeError)


def test_broadcast_error_fixed_text():
    with pytest.raises(RuntimeError) as e:
        jg.ones(2, 3) + jg.ones(3, 2)
    assert str(e.value) == ("The size of tensor a (3) must match the size of tensor b (2) at "
                            "non-singleton dimension 1")
    with pytest.raises(RuntimeError) as e:
        jg.ones(2) + jg.ones(3)
    assert str(e.value) == ("The size of tensor a (2) must match the size of tensor b (3) at "
                            "non-singleton dimension 0")
    x = jg.ones(2, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="^The size of tensor a"):
        y.add_(jg.ones(3))
    assert y._version == 0 and y.tolist() == [2.0, 2.0]


_INDEX_SHAPES = {
    "expand": (lambda M: M.ones(2, 3).expand(3, 2), RuntimeError),
    "expand_3d": (lambda M: M.ones(2, 3, 4).expand(5, 3, 5), RuntimeError),
    "setitem_int": (lambda M: M.ones(4, 3).__setitem__(0, M.ones(2)), RuntimeError),
    "setitem_slice": (lambda M: M.ones(4, 3).__setitem__(slice(0, 2), M.ones(3, 3)),
                      RuntimeError),
    "setitem_recorded": (lambda M: (M.ones(4, 3) * M.ones(1).requires_grad_()).__setitem__(
        0, M.ones(2)), RuntimeError),
    "setitem_value_requires_grad": (lambda M: M.ones(4, 3).__setitem__(
        slice(0, 2), M.ones(3, 3).requires_grad_()), RuntimeError),
    "setitem_index_tensor": (lambda M: M.ones(4, 3).__setitem__(M.tensor([0, 1]),
                                                                 M.ones(3, 3)), RuntimeError),
    "setitem_mask": (lambda M: M.ones(4, 3).__setitem__(M.ones(4) > 0, M.ones(2, 3)),
                     RuntimeError),
    "getitem_indices": (lambda M: M.ones(4, 4)[M.tensor([0, 1]), M.tensor([0, 1, 2])],
                        IndexError),
    "setitem_indices": (lambda M: M.ones(4, 4).__setitem__(
        (M.tensor([0, 1]), M.tensor([0, 1, 2])), 1.0), IndexError),
    "index_put_": (lambda M: M.ones(4, 4).index_put_((M.tensor([0, 1]), M.tensor([0, 1, 2])),
                                                     M.tensor(1.0)), IndexError),
}


@pytest.mark.parametrize("name", sorted(_INDEX_SHAPES))
def test_index_and_expand_shape_errors_are_pytorchs(name):
    call, exc = _INDEX_SHAPES[name]
    assert_raises_like_torch(call, exc)


def test_failed_setitem_changes_nothing():
    x = jg.zeros(4, 3)
    with pytest.raises(RuntimeError, match=r"^The expanded size of the tensor \(3\) must match "
                                           r"the existing size \(2\) at non-singleton dimension "
                                           r"0.  Target sizes: \[3\].  Tensor sizes: \[2\]$"):
        x[0] = jg.ones(2)
    assert x._version == 0 and not x.any()


# ----------------------------------------------------------------------- fork_rng
def _fork(M):
    out = []
    M.manual_seed(3)
    M.rand(2)
    with M.random.fork_rng():
        M.manual_seed(0)
        M.randn(3)
        out.append(M.initial_seed())
    out.append(M.initial_seed())
    after = M.rand(2)
    M.manual_seed(3)
    M.rand(2)
    out.append(bool((after == M.rand(2)).all()))
    with M.random.fork_rng(enabled=False):
        M.rand(2)
    with M.random.fork_rng(devices=[]):
        M.rand(5)
    with M.random.fork_rng(devices=iter([]), device_type="cpu"):
        M.rand(5)
    try:
        with M.random.fork_rng():
            M.rand(3)
            raise ValueError
    except ValueError:
        pass
    x = M.rand(2)
    M.manual_seed(3)
    for _ in range(3):
        M.rand(2)
    out.append(bool((x == M.rand(2)).all()))
    return out


def test_fork_rng_restores_the_default_generator():
    got = _fork(jg)
    assert got == [0, 3, True, True]
    assert jg.random.fork_rng.__module__ == "jitgrad.random"
    torch = _torch()
    assert got == _fork(torch)


# ------------------------------------------------------- anomaly hint / mark_dirty
def test_version_counter_hint_ends_as_pytorchs():
    w = jg.tensor([1.0, 2.0], requires_grad=True)
    y = (w ** 2).sum()
    with jg.no_grad():
        w -= 0.1 * w
    with pytest.raises(RuntimeError) as e:
        y.backward()
    assert str(e.value) == (
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [jitgrad.FloatTensor [2]] is at version 1; expected version 0 instead. "
        "Hint: enable anomaly detection to find the operation that failed to compute its "
        "gradient, with jitgrad.autograd.set_detect_anomaly(True, check_nan=False).")


def _saved_output_modified(M):
    a = M.tensor([1.0, 2.0], requires_grad=True)
    b = a.exp()
    b.add_(1)
    b.sum().backward()


def test_version_counter_error_is_pytorchs():
    assert_raises_like_torch(_saved_output_modified, RuntimeError)


# -------------------------------------------------------------------- view(dtype)
_VIEW_DTYPE = {
    "same": lambda M: M.tensor([1.0, -2.0, 0.5, 3.0]).view(M.float32),
    "float_int32": lambda M: M.tensor([1.0, -2.0, 0.5, 3.0]).view(M.int32),
    "float_uint8": lambda M: M.tensor([1.0, -2.0, 0.5, 3.0]).view(M.uint8),
    "float_int16": lambda M: M.tensor([1.0, -2.0, 0.5, 3.0]).view(M.int16),
    "float_float64": lambda M: M.tensor([1.0, -2.0, 0.5, 3.0]).view(M.float64),
    "float_float16": lambda M: M.tensor([1.0, -2.0, 0.5, 3.0]).view(M.float16),
    "float_bool": lambda M: M.tensor([1.0, -2.0, 0.5, 3.0]).view(M.bool),
    "uint8_float": lambda M: M.arange(8, dtype=M.uint8).view(M.float32),
    "int64_float64": lambda M: M.tensor([1, 2]).view(M.float64),
    "0d_same_size": lambda M: M.tensor(1.0).view(M.int32),
    "2d": lambda M: M.ones(2, 4).view(M.int16),
    "2d_wider": lambda M: M.ones(2, 4).view(M.int64),
    "transposed_same_size": lambda M: M.ones(4, 2).t().view(M.int32),
    "strided_rows": lambda M: M.ones(4, 4)[::2].view(M.int16),
    "strided_rows_wider": lambda M: M.ones(4, 4)[::2].view(M.int64),
    "keyword": lambda M: M.tensor([1.0, 2.0]).view(dtype=M.int32),
    "empty": lambda M: M.ones(0).view(M.int16),
    "requires_grad": lambda M: M.ones(2, requires_grad=True).view(M.float32),
    "requires_grad_other": lambda M: (M.ones(2, requires_grad=True) * 1).view(M.float16),
}


def _view_result(r):
    return (tuple(r.shape), str(r.dtype).split(".")[-1], r.tolist(), r.requires_grad,
            r.grad_fn is None)


@pytest.mark.parametrize("name", sorted(_VIEW_DTYPE))
def test_view_dtype_reinterprets_bits(name):
    got = _view_result(_VIEW_DTYPE[name](jg))
    assert got[3] is False and got[4] is True  # never differentiable
    torch = _torch()
    want = _view_result(_VIEW_DTYPE[name](torch))
    assert got[:2] == want[:2] and got[3:] == want[3:]
    np.testing.assert_array_equal(np.asarray(got[2]), np.asarray(want[2]))


def test_view_dtype_fixed_values_and_memory():
    x = jg.tensor([1.0, -2.0])
    v = x.view(jg.int32)
    assert v.tolist() == [1065353216, -1073741824]
    v[1] = 1065353216  # the same memory, the same version counter
    assert x.tolist() == [1.0, 1.0] and x._version == 1
    y = jg.zeros(2)
    y.view(jg.uint8).add_(1)
    assert y._version == 1 and y.view(jg.uint8).tolist() == [1] * 8


@pytest.mark.parametrize("call", [
    lambda M: M.arange(6, dtype=M.uint8).view(M.float32),
    lambda M: M.ones(3).view(M.float64),
    lambda M: M.tensor(1.0).view(M.int16),
    lambda M: M.tensor(1.0).view(M.float64),
    lambda M: M.ones(4, 2).t().view(M.int16),
    lambda M: M.ones(3, 3).t().view(M.float64),
    lambda M: M.ones(4, 3).t().view(M.float64),
    lambda M: M.ones(3, 1).expand(3, 4).view(M.float64),
    lambda M: M.ones(2, 3)[:, :2].view(M.float64),
    lambda M: M.ones(3, 4)[:, 1:3].view(M.float64),
    lambda M: M.ones(5)[1:].view(M.float64),
])
def test_view_dtype_errors(call):
    assert_raises_like_torch(call, RuntimeError)


# ------------------------------------------------------------------- is_inference
def test_is_inference():
    assert jg.ones(2).is_inference() is False
    with jg.inference_mode():
        t = jg.ones(2)
    # jitgrad's inference_mode is no_grad: no inference tensors
    assert t.is_inference() is False


# ------------------------------------------------------ optimizer / scheduler state
def _lbfgs_keys(M):
    x = M.tensor([-1.5, 2.0], requires_grad=True)
    opt = M.optim.LBFGS([x], max_iter=5, history_size=4)

    def closure():
        opt.zero_grad()
        loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
        loss.backward()
        return loss

    opt.step(closure)
    st = opt.state[x]
    return sorted(st), len(st["al"]), [a is None for a in st["al"]]


def test_lbfgs_state_has_al():
    got = _lbfgs_keys(jg)
    assert "al" in got[0] and got[1] == 4
    torch = _torch()
    assert got == _lbfgs_keys(torch)


_SCHEDULERS = {
    "StepLR": lambda M, o: M.optim.lr_scheduler.StepLR(o, 2),
    "LambdaLR": lambda M, o: M.optim.lr_scheduler.LambdaLR(o, lambda e: 1.0),
    "ExponentialLR": lambda M, o: M.optim.lr_scheduler.ExponentialLR(o, 0.9),
    "CosineAnnealingLR": lambda M, o: M.optim.lr_scheduler.CosineAnnealingLR(o, 3),
    "LinearLR": lambda M, o: M.optim.lr_scheduler.LinearLR(o),
    "MultiStepLR": lambda M, o: M.optim.lr_scheduler.MultiStepLR(o, [1]),
    "OneCycleLR": lambda M, o: M.optim.lr_scheduler.OneCycleLR(o, 1.0, total_steps=10),
    "SequentialLR": lambda M, o: M.optim.lr_scheduler.SequentialLR(
        o, [M.optim.lr_scheduler.LinearLR(o), M.optim.lr_scheduler.ExponentialLR(o, 0.9)],
        milestones=[2]),
    "ReduceLROnPlateau": lambda M, o: M.optim.lr_scheduler.ReduceLROnPlateau(o),
}


def _sched_flag(M, name):
    o = M.optim.SGD([M.nn.Parameter(M.ones(2))], lr=0.1, momentum=0.9)
    s = _SCHEDULERS[name](M, o)
    o.step()
    s.step(*([1.0] if name == "ReduceLROnPlateau" else []))
    sd = s.state_dict()
    return "_get_lr_called_within_step" in sd, sd.get("_get_lr_called_within_step")


@pytest.mark.parametrize("name", sorted(_SCHEDULERS))
def test_scheduler_state_dict_has_get_lr_flag(name):
    got = _sched_flag(jg, name)
    if name not in ("SequentialLR", "ReduceLROnPlateau"):
        assert got == (True, False)
    torch = _torch()
    assert got == _sched_flag(torch, name)


_INT_DEFAULTS = ["Adagrad", "ASGD", "Adamax", "RMSprop", "NAdam", "RAdam", "Adadelta", "LBFGS"]


@pytest.mark.parametrize("name", _INT_DEFAULTS)
def test_optimizer_defaults_print_as_pytorchs(name):
    def defaults(M):
        opt = getattr(M.optim, name)([M.nn.Parameter(M.ones(2))])
        return {k: (type(v).__name__, v) for k, v in opt.defaults.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)}

    got = defaults(jg)
    if name != "LBFGS":
        assert got["weight_decay"] == ("int", 0)
    torch = _torch()
    want = defaults(torch)
    assert {k: got[k] for k in want if k in got} == {k: want[k] for k in want if k in got}
