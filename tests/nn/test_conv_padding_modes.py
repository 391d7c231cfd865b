"""Convolutions with ``padding_mode`` reflect / replicate / circular (CycleGAN and
style-transfer generators, periodic physics grids): the input padded that way, then no
padding, as PyTorch's ``_conv_forward``; checked against torch and by gradcheck."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg

SHAPES = {1: (2, 3, 11), 2: (2, 3, 7, 6), 3: (1, 2, 5, 4, 6)}
MODES = ("reflect", "replicate", "circular")


@pytest.mark.parametrize("dim", [1, 2, 3])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", [1, "same", (2, 1, 1)])
def test_padding_modes_against_torch(dim, mode, padding):
    torch = pytest.importorskip("torch")
    if isinstance(padding, tuple):
        padding = padding[:dim] if dim > 1 else padding[0]
    rng = np.random.default_rng(dim)
    kw = dict(padding=padding, padding_mode=mode, dilation=2 if padding == "same" else 1)
    tm = getattr(torch.nn, f"Conv{dim}d")(SHAPES[dim][1], 4, 3, **kw)
    jm = getattr(jg.nn, f"Conv{dim}d")(SHAPES[dim][1], 4, 3, **kw)
    jm.load_state_dict({k: jg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    for shape in (SHAPES[dim], SHAPES[dim][1:]):  # batched, unbatched
        x = rng.standard_normal(shape).astype(np.float32)
        xt, xj = torch.tensor(x, requires_grad=True), jg.tensor(x, requires_grad=True)
        yt, yj = tm(xt), jm(xj)
        np.testing.assert_allclose(yj.detach().numpy(), yt.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
        yt.square().sum().backward()
        yj.square().sum().backward()
        np.testing.assert_allclose(xj.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(jm.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-4,
                                   atol=1e-4)
        tm.zero_grad()
        jm.zero_grad()
    assert repr(jm) == repr(tm)


@pytest.mark.parametrize("mode", MODES)
def test_padding_modes_gradcheck_and_compiled(mode):
    conv = jg.nn.Conv2d(2, 3, 3, padding=1, padding_mode=mode, dtype=jg.float64)
    x = jg.tensor(np.random.default_rng(0).standard_normal((1, 2, 4, 5)), requires_grad=True)
    assert jg.autograd.gradcheck(conv, (x,))
    f = jg.compile(conv)
    assert np.array_equal(f(x).detach().numpy(), conv(x).detach().numpy())


def test_padding_arguments_are_checked_when_made():
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        jg.nn.Conv2d(2, 3, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        jg.nn.Conv1d(3, 2, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        jg.nn.Conv2d(2, 3, 3, padding="full")
