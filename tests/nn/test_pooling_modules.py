"""Average pooling as PyTorch code reaches it: ``F.avg_pool2d`` / ``nn.AvgPool2d`` and
``F.adaptive_avg_pool2d`` / ``nn.AdaptiveAvgPool2d`` (the ops' values and gradients are
checked on every registry sample by tests/ops): argument handling, the 1x1 special case,
errors, module reprs, PyTorch conformance and a compiled model."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F


def _x(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


def test_avg_pool2d_is_exported_and_module_matches_functional():
    x = jitgrad.tensor(_x((2, 3, 7, 6)))
    m = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
    np.testing.assert_array_equal(m(x).numpy(), F.avg_pool2d(
        x, 3, 2, 1, ceil_mode=True, count_include_pad=False).numpy())
    assert repr(nn.AvgPool2d(3, stride=2)) == "AvgPool2d(kernel_size=3, stride=2, padding=0)"
    assert nn.AvgPool2d(2).stride == 2


def test_adaptive_avg_pool2d_values_and_nodes():
    x = jitgrad.arange(16.0).reshape(1, 1, 4, 4).requires_grad_()
    y = F.adaptive_avg_pool2d(x, (2, 1))
    np.testing.assert_array_equal(y.detach().numpy().ravel(), [3.5, 11.5])
    assert type(y.grad_fn).__name__ == "AdaptiveAvgPool2DBackward0"
    assert type(F.adaptive_avg_pool2d(x, 1).grad_fn).__name__ == "MeanBackward1"
    assert F.adaptive_avg_pool2d(x, (None, 3)).shape == (1, 1, 4, 3)
    assert F.adaptive_avg_pool2d(x, 0).shape == (1, 1, 0, 0)
    assert F.adaptive_avg_pool2d(jitgrad.ones(0, 2, 3, 3), 2).shape == (0, 2, 2, 2)
    (g,) = jitgrad.autograd.grad(y, x, jitgrad.ones_like(y), create_graph=True)
    assert type(g.grad_fn).__name__ == "AdaptiveAvgPool2DBackwardBackward0"
    np.testing.assert_array_equal(g.detach().numpy(), np.full((1, 1, 4, 4), 0.125))


@pytest.mark.parametrize("args,err,msg", [
    ((jitgrad.ones(2, 3), 2), RuntimeError,
     r"adaptive_avg_pool2d\(\): Expected 3D or 4D tensor, but got \[2, 3\]"),
    ((jitgrad.ones(1, 2, 3, 4, 5), 2), RuntimeError, "Expected 3D or 4D tensor"),
    ((jitgrad.ones(1, 2, 3, 3), (2,)), RuntimeError, "adaptive_avg_pool2d: output_size must be 2"),
    ((jitgrad.ones(1, 2, 3, 3), -1), RuntimeError,
     r"elements of output_size must be greater than or equal to 0 but received \{-1, -1\}"),
    ((jitgrad.ones(1, 2, 3, 3), (2.5, 2)), TypeError,
     "must be tuple of ints, but found element of type float at pos 0"),
    ((jitgrad.ones(1, 2, 3, 3, dtype=jitgrad.int64), 2), NotImplementedError,
     "\"adaptive_avg_pool2d\" not implemented for 'Long'"),
])
def test_adaptive_avg_pool2d_errors(args, err, msg):
    with pytest.raises(err, match=msg):
        F.adaptive_avg_pool2d(*args)


def test_adaptive_module():
    m = nn.AdaptiveAvgPool2d((5, 7))
    assert repr(m) == "AdaptiveAvgPool2d(output_size=(5, 7))"
    assert repr(nn.AdaptiveAvgPool2d(3)) == "AdaptiveAvgPool2d(output_size=3)"
    assert m(jitgrad.ones(2, 3, 9, 9)).shape == (2, 3, 5, 7)


@pytest.mark.parametrize("shape,size", [((2, 3, 7, 7), 3), ((1, 2, 5, 9), (2, 4)),
                                        ((1, 2, 3, 4), (5, 7)), ((3, 6, 6), (None, 4)),
                                        ((2, 3, 5, 5), 1)])
def test_adaptive_matches_torch(shape, size):
    torch = pytest.importorskip("torch")
    a = _x(shape)
    j = jitgrad.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    jy, ty = F.adaptive_avg_pool2d(j, size), torch.nn.functional.adaptive_avg_pool2d(t, size)
    np.testing.assert_allclose(jy.detach().numpy(), ty.detach().numpy(), rtol=1e-12,
                               atol=1e-14)
    w = _x(tuple(ty.shape), 1)
    (jy * jitgrad.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(j.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert type(jy.grad_fn).__name__ == type(ty.grad_fn).__name__


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                     count_include_pad=False),
                                dict(kernel_size=(2, 3), stride=1, divisor_override=4)])
def test_avg_pool_module_matches_torch(kw):
    torch = pytest.importorskip("torch")
    a = _x((2, 3, 7, 6)).astype(np.float32)
    j = jitgrad.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    jy, ty = nn.AvgPool2d(**kw)(j), torch.nn.AvgPool2d(**kw)(t)
    np.testing.assert_allclose(jy.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-6)
    jy.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(j.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-6)
    assert repr(nn.AvgPool2d(**kw)) == repr(torch.nn.AvgPool2d(**kw))


def test_compiled_cnn_with_adaptive_pooling_equals_eager():
    jitgrad.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                          nn.AdaptiveAvgPool2d((3, 2)), nn.Flatten(), nn.Linear(24, 3))
    x = jitgrad.tensor(_x((2, 2, 8, 8)).astype(np.float32))

    def loss_fn(inp):
        return model(inp).square().mean()

    eager = loss_fn(x)
    ge = jitgrad.autograd.grad(eager, list(model.parameters()))
    f = jitgrad.compile(loss_fn, fullgraph=True)
    for _ in range(2):
        out = f(x)
        gc = jitgrad.autograd.grad(out, list(model.parameters()))
        np.testing.assert_array_equal(out.detach().numpy(), eager.detach().numpy())
        for a, b in zip(gc, ge):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
