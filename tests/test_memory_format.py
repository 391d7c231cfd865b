"""Memory formats (``jitgrad/memory_format.py``): ``channels_last`` orders a 4-D tensor's
memory NHWC while its shape and values stay, as PyTorch's; ``Module.to(memory_format=)``
converts the 4-D and 5-D parameters; training through such tensors gives the row-major
results."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg


def _layouts(M):
    x = M.arange(120.0).reshape(2, 3, 4, 5)
    y = x.to(memory_format=M.channels_last)
    z = M.arange(240.0).reshape(2, 3, 2, 4, 5).contiguous(memory_format=M.channels_last_3d)
    return {"strides": y.stride(), "contiguous": y.is_contiguous(),
            "channels_last": y.is_contiguous(memory_format=M.channels_last),
            "row-major is not channels_last": x.is_contiguous(memory_format=M.channels_last),
            "values": y.tolist() == x.tolist(), "3d strides": z.stride(),
            "same object when already": y.contiguous(memory_format=M.channels_last) is y,
            "clone": x.clone(memory_format=M.channels_last).stride(),
            "preserve on contiguous": x.contiguous(memory_format=M.preserve_format) is x,
            "preserve asked": y.is_contiguous(memory_format=M.preserve_format),
            "repr": repr(M.channels_last).split(".")[1]}


WANT = {"strides": (60, 1, 15, 3), "contiguous": False, "channels_last": True,
        "row-major is not channels_last": False, "values": True,
        "3d strides": (120, 1, 60, 15, 3), "same object when already": True,
        "clone": (60, 1, 15, 3), "preserve on contiguous": True, "preserve asked": False,
        "repr": "channels_last"}


@pytest.mark.parametrize("M", ["jitgrad", "torch"])
def test_channels_last_layouts(M):
    M = jg if M == "jitgrad" else pytest.importorskip("torch")
    assert _layouts(M) == WANT
    y = M.arange(120.0).reshape(2, 3, 4, 5).to(memory_format=M.channels_last)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        y.view(2, -1)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last"):
        M.ones(2, 3).to(memory_format=M.channels_last)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        y.contiguous(memory_format=M.preserve_format)


def test_channels_last_model_trains_as_row_major():
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    results = []
    for fmt in (None, jg.channels_last):
        jg.manual_seed(0)
        model = jg.nn.Sequential(jg.nn.Conv2d(3, 4, 3), jg.nn.ReLU(), jg.nn.Flatten(),
                                 jg.nn.Linear(64, 2))
        x = jg.tensor(x0)
        if fmt is not None:
            model = model.to(memory_format=fmt)
            x = x.to(memory_format=fmt)
            assert model[0].weight.is_contiguous(memory_format=fmt)
            assert model[3].weight.is_contiguous()  # 2-D: left as it is
        loss = model(x).square().sum()
        loss.backward()
        results.append((loss.item(), model[0].weight.grad.numpy().copy()))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)
