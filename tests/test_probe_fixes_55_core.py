"""What a stop-55 probe of 50 PyTorch scripts found in the core: float sizes truncated
(``x.view(B, C / 2)``), ``var``'s gradient with no degrees of freedom (a batch of one)
raising ZeroDivisionError, ``grid_sample``'s coordinate gradient on a border (PyTorch
counts a border as outside: gradient 0), and results NumPy computed in a transposed
input's memory order (``cat``, ``stack``, ``pad``, reductions, ``batch_norm``), which
``.view()`` then refused. Compared live with torch when it is installed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jitgrad as jg


def _torch():
    return pytest.importorskip("torch")


# ------------------------------------------------------------------------ float sizes
_FLOAT_SIZES = {
    "view": lambda M: M.arange(12.0).view(2, 6.0),
    "reshape": lambda M: M.arange(12.0).reshape(3, 4.5),
    "zeros": lambda M: M.zeros((2, 1.5)),
    "randn": lambda M: M.randn(2, 3.9),
    "empty_tuple": lambda M: M.empty((2.5,)),
    "linear": lambda M: M.nn.Linear(3.7, 2),
    "new_zeros": lambda M: M.arange(3.0).new_zeros((2.5, 1)),
    "expand": lambda M: M.arange(12.0).expand(2.0, 12),
    "numpy_float": lambda M: M.zeros(np.float64(2)),
    "float_tensor": lambda M: M.zeros(M.tensor(2.0)),
}


@pytest.mark.parametrize("name", sorted(_FLOAT_SIZES))
def test_a_float_size_raises_type_error_as_pytorch(name):
    with pytest.raises(TypeError):
        _FLOAT_SIZES[name](jg)
    with pytest.raises(TypeError):
        _FLOAT_SIZES[name](_torch())


def test_integer_sizes_of_every_kind_still_work():
    a = jg.arange(12.0)
    assert a.view(2, np.int64(6)).shape == (2, 6)
    assert a.view(jg.tensor(2), 6).shape == (2, 6)
    assert jg.zeros(np.int32(3)).shape == (3,)
    assert a.view(-1, 4).shape == (3, 4)


# ------------------------------------------------------------- var with no dof
_NO_DOF = {
    "var_dim0": lambda M, x: x.var(0),
    "var_one_element": lambda M, x: x[:, :1].var(),
    "std_dim0": lambda M, x: x.std(0),
    "var_correction_n": lambda M, x: x.var(1, correction=2),
    "var_correction_past_n": lambda M, x: x.var(1, correction=3),
    "var_mean": lambda M, x: M.var_mean(x, 0)[0],
    "std_correction_n": lambda M, x: x.std(1, correction=2),
}


def _no_dof_grad(M, name):
    x = M.tensor([[1.0, 2.0]], requires_grad=True)
    _NO_DOF[name](M, x).sum().backward()
    return x.grad.tolist()


@pytest.mark.parametrize("name", sorted(_NO_DOF))
def test_var_gradient_without_degrees_of_freedom_is_ieee_as_pytorch(name):
    got = _no_dof_grad(jg, name)
    if name == "var_dim0":  # d = 0 everywhere, 2 / 0 = inf: NaN
        assert all(math.isnan(v) for v in got[0])
    if name == "var_correction_n":  # d = -0.5, 0.5 times inf
        assert got == [[-math.inf, math.inf]]
    want = _no_dof_grad(_torch(), name)
    np.testing.assert_array_equal(np.array(got), np.array(want))


# ------------------------------------------------------------ grid_sample borders
@pytest.mark.parametrize("padding_mode", ["border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("x", [1.0, 1.2, 0.999, 0.5, -1.0])
def test_grid_sample_coordinate_gradient_on_a_border(padding_mode, align_corners, x):
    """A coordinate on (or past) a border gets gradient 0 through the clamp, as PyTorch's
    ``clip_coordinates_set_grad`` (``clamp``'s own gradient passes the boundary)."""
    img = [[[[1.0, 2.0, 4.0, 7.0], [3.0, 5.0, 9.0, 11.0]]]]

    def run(M):
        grid = M.tensor([[[[x, 0.0], [0.25, -1.0]]]], requires_grad=True)
        out = M.nn.functional.grid_sample(M.tensor(img), grid, mode="bilinear",
                                          padding_mode=padding_mode,
                                          align_corners=align_corners)
        out.sum().backward()
        return out.detach().numpy(), grid.grad.numpy()

    out, grad = run(jg)
    right = (x + 1) / 2 * 3 if align_corners else ((x + 1) * 4 - 1) / 2
    if padding_mode == "border" and right >= 3:  # on or past the right border
        assert grad[0, 0, 0, 0] == 0.0
    t_out, t_grad = run(_torch())
    np.testing.assert_allclose(out, t_out, rtol=1e-6)
    np.testing.assert_allclose(grad, t_grad, rtol=1e-6, atol=1e-7)


def test_grid_sample_border_gradient_3d():
    vol = (jg.arange(8.0).view(1, 1, 2, 2, 2) ** 2)
    g = jg.tensor([[[[[1.0, 0.0, -1.0]]]]], requires_grad=True)
    jg.nn.functional.grid_sample(vol, g, padding_mode="border",
                                 align_corners=True).sum().backward()
    assert g.grad.flatten().tolist() == [0.0, 4.0, 0.0]


# ------------------------------------------------------------------- row-major results
def _transposed(M):
    return M.arange(12.0).view(3, 4).t(), M.arange(24.0).view(2, 3, 4).transpose(1, 2)


_ROW_MAJOR = {
    "cat": lambda M, xt, x3: M.cat([xt, xt]),
    "cat_dim1": lambda M, xt, x3: M.cat([xt, xt], 1),
    "stack": lambda M, xt, x3: M.stack([xt, xt]),
    "stack_dim1": lambda M, xt, x3: M.stack([xt, xt], 1),
    "hstack": lambda M, xt, x3: M.hstack([xt, xt]),
    "vstack": lambda M, xt, x3: M.vstack([xt, xt]),
    "dstack": lambda M, xt, x3: M.dstack([xt, xt]),
    "column_stack": lambda M, xt, x3: M.column_stack([xt, xt]),
    "pad": lambda M, xt, x3: M.nn.functional.pad(xt, (1, 1)),
    "one_hot": lambda M, xt, x3: M.nn.functional.one_hot(xt.long() % 3).float(),
    "norm_dim": lambda M, xt, x3: x3.norm(dim=0),
    "amax": lambda M, xt, x3: x3.amax(0),
    "amin": lambda M, xt, x3: x3.amin(0),
    "aminmax": lambda M, xt, x3: M.aminmax(x3, dim=0)[0],
    "var": lambda M, xt, x3: x3.var(0),
    "std": lambda M, xt, x3: x3.std(0),
    "std_mean": lambda M, xt, x3: M.std_mean(x3, 0)[0],
    "batch_norm": lambda M, xt, x3: M.nn.functional.batch_norm(x3, None, None,
                                                               training=True),
    "batch_norm_eval": lambda M, xt, x3: M.nn.functional.batch_norm(
        x3, M.zeros(4), M.ones(4), training=False),
}


@pytest.mark.parametrize("name", sorted(_ROW_MAJOR))
def test_results_of_transposed_inputs_are_row_major_as_pytorch(name):
    """``.view()`` of these results works, as in PyTorch (NumPy computed them in the
    transposed input's memory order), with the same values."""
    got = _ROW_MAJOR[name](jg, *_transposed(jg))
    assert got.is_contiguous()
    flat = got.view(-1)
    torch = _torch()
    want = _ROW_MAJOR[name](torch, *_transposed(torch))
    assert want.is_contiguous()
    np.testing.assert_allclose(flat.numpy(), want.reshape(-1).numpy(), rtol=1e-6)


def test_batch_norm_keeps_a_channels_last_layout_as_pytorch():
    x = jg.arange(120.0).view(2, 3, 4, 5).contiguous(memory_format=jg.channels_last)
    y = jg.nn.functional.batch_norm(x, None, None, training=True)
    assert y.is_contiguous(memory_format=jg.channels_last)
    assert y.stride() == (60, 1, 15, 3)


def test_row_major_results_keep_their_gradients():
    xt, _ = _transposed(jg)
    xt = xt.detach().requires_grad_()
    (jg.cat([xt, 2 * xt]).view(-1) * jg.arange(24.0)).sum().backward()
    want = np.arange(24.0).reshape(8, 3)
    np.testing.assert_array_equal(xt.grad.numpy(), want[:4] + 2 * want[4:])
