"""``interpolate``'s bicubic, area and antialiased (bilinear / bicubic) modes -- a probe of
tutorial scripts stopped at them: against torch (values and gradients, every
align_corners, up- and downscaling, sizes and scale factors), gradcheck, compiled."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F

RNG = np.random.default_rng(0)
X4 = RNG.standard_normal((2, 3, 9, 13)).astype(np.float32)
CASES = [dict(mode="bicubic", size=s, align_corners=ac)
         for s in ((18, 26), (5, 7), (4, 30), (1, 1)) for ac in (False, True)] + [
    dict(mode=m, size=s, align_corners=ac, antialias=True)
    for m in ("bilinear", "bicubic") for s in ((5, 7), (4, 30), (17, 3))
    for ac in (False, True)] + [
    dict(mode="bicubic", scale_factor=sf) for sf in (0.5, 1.7)] + [
    dict(mode="bilinear", scale_factor=0.3, antialias=True),
    dict(mode="area", size=(4, 5)), dict(mode="area", scale_factor=0.5),
    dict(mode="area", size=(12, 20))]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: "-".join(map(str, kw.values())))
def test_modes_against_torch(kw):
    torch = pytest.importorskip("torch")
    xt, xj = torch.tensor(X4, requires_grad=True), jg.tensor(X4, requires_grad=True)
    yt = torch.nn.functional.interpolate(xt, **kw)
    yj = F.interpolate(xj, **kw)
    assert tuple(yj.shape) == tuple(yt.shape)
    np.testing.assert_allclose(yj.detach().numpy(), yt.detach().numpy(), atol=1e-5)
    g = RNG.standard_normal(tuple(yt.shape)).astype(np.float32)
    (yt * torch.tensor(g)).sum().backward()
    (yj * jg.tensor(g)).sum().backward()
    np.testing.assert_allclose(xj.grad.numpy(), xt.grad.numpy(), atol=1e-4)


def test_area_in_one_and_three_dims_against_torch():
    torch = pytest.importorskip("torch")
    for shape, size in (((2, 3, 11), 4), ((1, 2, 5, 6, 7), (3, 4, 2))):
        x = RNG.standard_normal(shape).astype(np.float32)
        want = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode="area")
        np.testing.assert_allclose(F.interpolate(jg.tensor(x), size=size, mode="area").numpy(),
                                   want.numpy(), atol=1e-6)


@pytest.mark.parametrize("kw", [dict(mode="bicubic", size=(5, 3)),
                                dict(mode="bicubic", size=(2, 7), align_corners=True),
                                dict(mode="bilinear", size=(2, 3), antialias=True),
                                dict(mode="bicubic", size=(2, 3), antialias=True),
                                dict(mode="area", size=(2, 3))])
def test_gradcheck_and_compiled(kw):
    x = jg.tensor(RNG.standard_normal((1, 2, 4, 5)), requires_grad=True)
    assert jg.autograd.gradcheck(lambda t: F.interpolate(t, **kw), (x,))
    f = jg.compile(lambda t: F.interpolate(t, **kw))
    assert np.array_equal(f(x).detach().numpy(), F.interpolate(x, **kw).detach().numpy())


def test_bicubic_needs_a_4d_input():
    with pytest.raises(NotImplementedError, match="bicubic mode needs 4D input"):
        F.interpolate(jg.ones(1, 1, 4), size=3, mode="bicubic")
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(jg.ones(1, 1, 4, 4), size=3, mode="area", align_corners=True)
