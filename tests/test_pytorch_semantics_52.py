"""PyTorch behaviours a probe of tutorial scripts found different (stop 52): Size slices and
sums are Sizes; tensors inside a list are numbers; ``range`` data; a 0-d integer tensor as
a size; ``from_numpy`` of negative strides; no CUDA is an AssertionError too."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import python_prints

import jitgrad as jg


def test_size_slices_sums_and_repeats_are_sizes():
    s = jg.ones(2, 3, 4).shape
    for out, ref in ((s[1:], (3, 4)), (s + (5,), (2, 3, 4, 5)), ((1,) + s, (1, 2, 3, 4)),
                     (s * 2, (2, 3, 4) * 2), (2 * s, (2, 3, 4) * 2), (s[::-1], (4, 3, 2))):
        assert type(out) is jg.Size and out == ref
    assert type(s[0]) is int and s[-1] == 4
    assert repr(s[1:]) == "jitgrad.Size([3, 4])"
    with pytest.raises(TypeError):
        s + [1]


def test_tensors_inside_a_list_are_numbers():
    t = jg.tensor([jg.tensor([1.0]), jg.tensor([2.0])])
    assert t.shape == (2,) and t.tolist() == [1.0, 2.0]
    assert jg.tensor([[jg.tensor([1.0])], [jg.tensor(2)]]).shape == (2, 1)
    assert jg.tensor([jg.tensor(1.0, dtype=jg.float64)]).dtype == jg.float64
    with pytest.raises(ValueError, match="only one element tensors can be converted"):
        jg.tensor([jg.tensor([1.0, 2.0]), jg.tensor([2.0, 3.0])])


def test_range_data_and_integer_tensor_sizes():
    assert jg.tensor(range(4)).tolist() == [0, 1, 2, 3] and jg.tensor(range(4)).dtype == \
        jg.int64
    assert jg.tensor([range(2), range(2)]).shape == (2, 2)
    assert jg.ones(jg.tensor(3)).shape == (3,)
    assert jg.zeros(np.int64(2)).shape == (2,)
    assert jg.randn(2, jg.tensor([1, 2]).sum()).shape == (2, 3)
    for bad in (jg.tensor(2.5), np.float64(2.0)):
        with pytest.raises(TypeError, match="size must be a sequence of ints"):
            jg.ones(bad)


def test_from_numpy_refuses_negative_strides():
    with pytest.raises(ValueError, match="negative strides are not currently supported"):
        jg.from_numpy(np.arange(3.0)[::-1])
    assert jg.from_numpy(np.arange(3.0)[::-1].copy()).tolist() == [2.0, 1.0, 0.0]
    x = jg.ones(1)
    assert x.reshape(()).shape == () and x.view(()).shape == ()


def test_no_cuda_raises_what_pytorch_code_catches():
    """(A process without the simulator: the suite's own runs with it.)"""
    code = """
import jitgrad as jg
if jg.cuda.is_available():
    print("has-cuda")
else:
    for call in (lambda: jg.ones(1).cuda(), lambda: jg.ones(1).to("cuda"),
                 lambda: jg.zeros(2, device="cuda"), jg.cuda.synchronize):
        try:
            call()
        except AssertionError as e:
            print(isinstance(e, RuntimeError), "Torch not compiled with CUDA enabled" in str(e))
"""
    out = python_prints(code, NUMBA_ENABLE_CUDASIM="0")
    if out == ["has-cuda"]:
        pytest.skip("a CUDA device is present")
    assert out == ["True", "True"] * 4


def test_the_same_as_torch():
    torch = pytest.importorskip("torch")
    s, ts = jg.ones(2, 3, 4).shape, torch.ones(2, 3, 4).shape
    assert list(s[1:]) == list(ts[1:]) and list(s + (5,)) == list(ts + (5,))
    assert jg.tensor([jg.tensor([1.0]), jg.tensor([2.0])]).tolist() == \
        torch.tensor([torch.tensor([1.0]), torch.tensor([2.0])]).tolist()
    assert jg.tensor(range(5)).tolist() == torch.tensor(range(5)).tolist()
    assert jg.ones(jg.tensor(3)).shape == tuple(torch.ones(torch.tensor(3)).shape)
