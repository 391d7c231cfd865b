"""What a stop-49 probe of 37 PyTorch scripts (U-Net, SimCLR, CTC decoding, MAML, einsum
attention, EMA...) found apart from torch: slices bounded by 0-d tensors, ``t == None``,
PyTorch's keyword names of the size/dim methods, einsum's sublist form, anomaly detection
that checks for NaN, and errors in PyTorch's words. Compared live with torch when it is
installed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_raises_like_torch

import jitgrad as jg

_MISUSE = {  # name -> (call on the module M, exception type)
    "arange_step_sign": (lambda M: M.arange(0, 5, -1), RuntimeError),
    "arange_step_sign_down": (lambda M: M.arange(5, 0, 1), RuntimeError),
    "arange_infinite": (lambda M: M.arange(0.0, float("inf")), RuntimeError),
    "randint_empty_range": (lambda M: M.randint(5, 3, (2,)), RuntimeError),
    "randint_equal_bounds": (lambda M: M.randint(3, 3, (2,)), RuntimeError),
    "randint_negative_high": (lambda M: M.randint(-1, (2,)), RuntimeError),
    "copy_size": (lambda M: M.zeros(2).copy_(M.ones(3)), RuntimeError),
    "copy_rows": (lambda M: M.zeros(2, 3).copy_(M.ones(4, 3)), RuntimeError),
    "copy_more_dims": (lambda M: M.zeros(2).copy_(M.ones(2, 2)), RuntimeError),
    "ragged": (lambda M: M.tensor([[1, 2], [3]]), ValueError),
    "ragged_deeper": (lambda M: M.tensor([[[1, 2]], [[3, 4], [5, 6]]]), ValueError),
    "ragged_longer": (lambda M: M.tensor([[1, 2], [3, 4, 5]]), ValueError),
    "conv1d_kernel": (lambda M: M.nn.functional.conv1d(M.ones(1, 1, 3), M.ones(1, 1, 5)),
                      RuntimeError),
    "conv1d_kernel_dilated": (lambda M: M.nn.functional.conv1d(
        M.ones(1, 1, 5), M.ones(1, 1, 3), padding=1, dilation=4), RuntimeError),
    "normal_negative_std": (lambda M: M.zeros(3).normal_(0, -1), RuntimeError),
    "normal_integer": (lambda M: M.zeros(3, dtype=M.long).normal_(), NotImplementedError),
    "uniform_reversed": (lambda M: M.zeros(3).uniform_(2, 1), RuntimeError),
    "uniform_integer": (lambda M: M.zeros(3, dtype=M.long).uniform_(), NotImplementedError),
    "bernoulli_p": (lambda M: M.zeros(3).bernoulli_(1.5), RuntimeError),
    "bernoulli_p_tensor": (lambda M: M.empty(3).bernoulli_(M.tensor([0.2, 1.5, 0.9])),
                           RuntimeError),
    "narrow_start_range": (lambda M: M.arange(5.0).narrow(0, -6, 1), IndexError),
    "narrow_past_end": (lambda M: M.arange(5.0).narrow(0, 4, 2), RuntimeError),
    "narrow_negative_length": (lambda M: M.arange(5.0).narrow(0, 2, -1), RuntimeError),
    "movedim_repeated": (lambda M: M.ones(2, 3, 4).movedim((0, 1), (1, 1)), RuntimeError),
    "movedim_lengths": (lambda M: M.ones(2, 3, 4).movedim((0, 1), (1,)), RuntimeError),
    "diagonal_1d": (lambda M: M.ones(3).diagonal(), IndexError),
    "diagonal_same_dims": (lambda M: M.ones(3).diagonal(0, 0, 0), RuntimeError),
    "einsum_sublist_range": (lambda M: M.einsum(M.ones(2, 3), [0, 52], M.ones(3), [52]),
                             ValueError),
}


@pytest.mark.parametrize("name", sorted(_MISUSE))
def test_misuse_raises_pytorchs_error(name):
    assert_raises_like_torch(*_MISUSE[name])


def test_slices_bounded_by_0d_tensors():
    x = jg.arange(10)
    assert x[: jg.tensor(4)].tolist() == [0, 1, 2, 3]
    assert x[jg.tensor(7):].tolist() == [7, 8, 9]
    assert x[jg.tensor(1):: jg.tensor(3)].tolist() == [1, 4, 7]
    y = jg.arange(12.0).reshape(3, 4).requires_grad_()
    z = y[:, : jg.tensor(2)]
    assert type(z.grad_fn).__name__ == "SliceBackward0"
    z.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [[1, 1, 0, 0]] * 3)


def test_equality_with_what_is_not_a_tensor_or_number_is_python_identity():
    x = jg.arange(3)
    assert (x == None) is False and (x != None) is True  # noqa: E711
    assert (None == x) is False and (x == "a") is False  # noqa: E711
    assert (x == [0, 1, 2]) is False
    assert (x == 1).tolist() == [False, True, False]
    assert (x != np.int64(1)).tolist() == [True, False, True]
    assert (x == np.arange(3)).tolist() == [True, True, True]
    assert (x == jg.tensor([0, 0, 2])).tolist() == [True, False, True]


_KEYWORDS = {
    "flip": lambda M, x: M.flip(x, dims=[0]),
    "flip_method": lambda M, x: x.flip(dims=(1,)),
    "permute": lambda M, x: x.permute(dims=(1, 0)),
    "permute_function": lambda M, x: M.permute(x, dims=(1, 0)),
    "tile": lambda M, x: M.tile(x, dims=(2,)),
    "repeat": lambda M, x: x.repeat(repeats=(2, 1)),
    "reshape": lambda M, x: x.reshape(shape=(3, 2)),
    "reshape_function": lambda M, x: M.reshape(x, shape=(3, 2)),
    "view": lambda M, x: x.view(size=(3, 2)),
    "expand": lambda M, x: x[:1].expand(size=(2, 3)),
    "type_as": lambda M, x: x.type_as(other=M.ones(1, dtype=M.float64)).reshape(3, 2),
}


@pytest.mark.parametrize("name", sorted(_KEYWORDS))
def test_pytorchs_keyword_names_of_sizes_and_dims(name):
    call = _KEYWORDS[name]
    got = call(jg, jg.arange(6.0).reshape(2, 3))
    positional = {"flip": [[3, 4, 5], [0, 1, 2]], "flip_method": [[2, 1, 0], [5, 4, 3]],
                  "permute": [[0, 3], [1, 4], [2, 5]], "tile": [[0, 1, 2] * 2, [3, 4, 5] * 2],
                  "repeat": [[0, 1, 2], [3, 4, 5]] * 2, "reshape": [[0, 1], [2, 3], [4, 5]]}
    positional["permute_function"] = positional["permute"]
    positional["reshape_function"] = positional["view"] = positional["reshape"]
    positional["type_as"] = positional["reshape"]
    positional["expand"] = [[0, 1, 2]] * 2
    assert got.tolist() == positional[name]
    try:
        import torch
    except ImportError:
        return
    assert got.tolist() == call(torch, torch.arange(6.0).reshape(2, 3)).tolist()


def test_a_size_given_both_ways_is_an_error():
    x = jg.ones(2, 3)
    for call in (lambda: x.flip(0, dims=(1,)), lambda: x.reshape(6, shape=(6,)),
                 lambda: x.permute(1, 0, dims=(1, 0))):
        with pytest.raises(TypeError, match="got multiple values for argument"):
            call()


def test_einsum_sublist_form_values_and_gradients():
    rng = np.random.default_rng(0)
    a = jg.tensor(rng.standard_normal((5, 2, 3)), requires_grad=True)
    b = jg.tensor(rng.standard_normal(3), requires_grad=True)
    got = jg.einsum(a, [..., 0, 1], b, [1], [..., 0])
    want = jg.einsum("...ab,b->...a", a, b)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    got.sum().backward()
    ga, gb = a.grad.numpy().copy(), b.grad.numpy().copy()
    a.grad = b.grad = None
    want.sum().backward()
    np.testing.assert_array_equal(ga, a.grad.numpy())
    np.testing.assert_array_equal(gb, b.grad.numpy())
    c = jg.ones(3, 4)
    assert jg.einsum(jg.ones(2, 3), [0, 30], c, [30, 51]).shape == (2, 4)  # implicit output
    assert jg.einsum(jg.ones(2, 3), [0, 1], [1, 0]).shape == (3, 2)


def test_detect_anomaly_raises_where_a_gradient_is_nan():
    z = jg.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        mode = jg.autograd.detect_anomaly()
    with mode:
        y = jg.sqrt(z) * 0
        with pytest.warns(UserWarning, match=r"(?s)Error detected in SqrtBackward0\. Traceback "
                                             r"of forward call.*y = jg\.sqrt\(z\) \* 0"):
            with pytest.raises(RuntimeError, match=r"^Function 'SqrtBackward0' returned nan "
                                                   r"values in its 0th output\.$"):
                y.sum().backward()
    assert z.grad is None and not jg.is_anomaly_enabled()
    y = jg.sqrt(z) * 0  # made outside: no forward stack
    with jg.autograd.set_detect_anomaly(True):
        assert jg.is_anomaly_enabled()
        with pytest.warns(UserWarning, match="No forward pass information available"):
            with pytest.raises(RuntimeError, match="returned nan values"):
                y.sum().backward()
    assert not jg.is_anomaly_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with jg.autograd.detect_anomaly(check_nan=False):
            (jg.sqrt(z) * 0).sum().backward()  # no check: NaN as without anomaly mode
    assert np.isnan(z.grad.numpy()[0])


def test_set_detect_anomaly_as_a_call_stays_on():
    try:
        jg.autograd.set_detect_anomaly(True)
        assert jg.is_anomaly_enabled()
    finally:
        jg.autograd.set_detect_anomaly(False)
    assert not jg.is_anomaly_enabled()


def test_anomaly_mode_names_the_node_whose_backward_raised():
    class Fails(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    x = jg.ones(2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mode = jg.autograd.detect_anomaly()
    with mode:
        out = Fails.apply(x).sum()
        with pytest.warns(UserWarning, match="Error detected in FailsBackward"):
            with pytest.raises(ValueError, match="boom"):
                out.backward()


def test_a_compiled_function_runs_eagerly_under_anomaly_detection():
    """Anomaly detection checks each backward node: a compiled step runs eagerly while it
    is on (a NaN gradient raises as in eager mode), and compiled again after."""
    w = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def step(x):
        w.grad = None
        jg.sqrt(x * w).sum().backward()

    f = jg.compile(step)
    f(jg.ones(3))
    f(jg.ones(3))
    hits = f.stats["cache_hits"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with jg.autograd.detect_anomaly():
            with pytest.raises(RuntimeError, match="returned nan values"):
                f(jg.tensor([1.0, 0.0, 3.0]))
            f(jg.ones(3))
    assert f.stats["anomaly_eager"] == 2 and f.stats["cache_hits"] == hits
    f(jg.ones(3))
    assert f.stats["cache_hits"] == hits + 1 and f.stats["traces"] == 1


def test_narrow_from_the_end_and_movedim_of_several_dims():
    x = jg.arange(5.0, requires_grad=True)
    assert x.narrow(0, -2, 2).tolist() == [3.0, 4.0]
    assert x.narrow(0, jg.tensor(1), 2).tolist() == [1.0, 2.0]
    assert x.narrow(0, 5, 0).shape == (0,)
    x.narrow(0, -1, 1).sum().backward()
    assert x.grad.tolist() == [0, 0, 0, 0, 1]
    a = np.arange(24.0).reshape(2, 3, 4)
    got = jg.tensor(a).movedim((0, 1), (2, 0))
    np.testing.assert_array_equal(got.numpy(), np.moveaxis(a, (0, 1), (2, 0)))
    assert jg.tensor(a).moveaxis([0], [2]).shape == (3, 4, 2)
    assert jg.tensor(a).movedim(-1, 0).shape == (4, 2, 3)


def test_legacy_linalg_tensor_methods_and_atens_instance_norm():
    """``Tensor.lu`` / ``lu_solve`` / ``geqrf`` / ``orgqr`` / ``ormqr`` are the functions;
    ``torch.instance_norm`` (ATen's) takes a single position, which ``F.instance_norm``
    refuses."""
    rng = np.random.default_rng(0)
    a = jg.tensor(rng.standard_normal((3, 3)))
    b = jg.tensor(rng.standard_normal((3, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (deprecated: torch.lu, torch.lu_solve)
        lu, piv = a.lu()
        lu_f, piv_f = jg.lu(a)
        x = b.lu_solve(lu, piv)
    np.testing.assert_array_equal(lu.numpy(), lu_f.numpy())
    np.testing.assert_array_equal(piv.numpy(), piv_f.numpy())
    np.testing.assert_allclose(a.numpy() @ x.numpy(), b.numpy(), atol=1e-12)
    h, tau = a.geqrf()
    q = h.orgqr(tau)
    np.testing.assert_allclose(q.numpy().T @ q.numpy(), np.eye(3), atol=1e-12)
    np.testing.assert_allclose(h.ormqr(tau, b).numpy(), q.numpy() @ b.numpy(), atol=1e-12)
    out = jg.instance_norm(jg.ones(1, 2, 1), None, None, None, None, True, 0.1, 1e-5, False)
    assert out.tolist() == [[[0.0], [0.0]]]
    with pytest.raises(ValueError, match="Expected more than 1 spatial element"):
        jg.nn.functional.instance_norm(jg.ones(1, 2, 1))
