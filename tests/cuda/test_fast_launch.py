"""The packed launch path's argument packing (jitgrad/cuda/fast_launch.py): Numba's kernel
ABI for arrays and numbers, and a refusal (so the dispatcher runs) for anything that does
not fit the compiled signature. The launch itself needs a GPU (tools/gpu_check.sh runs the
CUDA suite with it); in the simulator every call goes through the dispatcher."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from numba.core import types

import jitgrad as torch
from jitgrad.cuda import fast_launch


class _Mem:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class _Flags:
    def __init__(self, c: bool) -> None:
        self.c_contiguous = c


class FakeDeviceArray:
    """What the packer reads of a CuPy array."""

    def __init__(self, a: np.ndarray, ptr: int = 4096) -> None:
        self.ndim, self.dtype, self.size, self.itemsize = a.ndim, a.dtype, a.size, a.itemsize
        self.shape, self.strides = a.shape, a.strides
        self.flags, self.data = _Flags(a.flags.c_contiguous), _Mem(ptr)


def test_arrays_pack_as_numbas_kernel_abi():
    pack = fast_launch._packer(types.Array(types.float32, 2, "C"), FakeDeviceArray)
    out: list = []
    assert pack(FakeDeviceArray(np.zeros((3, 5), np.float32), ptr=1 << 20), out)
    # meminfo, parent, nitems, itemsize, data, shape..., strides... (in bytes)
    assert out == [0, 0, 15, 4, 1 << 20, 3, 5, 20, 4]


@pytest.mark.parametrize("bad", [np.zeros((3, 5), np.float64), np.zeros(15, np.float32),
                                 np.zeros((5, 3), np.float32).T])
def test_arrays_that_do_not_fit_the_signature_go_to_the_dispatcher(bad):
    pack = fast_launch._packer(types.Array(types.float32, 2, "C"), FakeDeviceArray)
    out: list = []
    assert not pack(FakeDeviceArray(bad), out) and out == []
    assert not pack(bad, out)  # not the device array type at all


def test_numbers_pack_as_ctypes_of_the_signatures_type():
    out: list = []
    assert fast_launch._packer(types.float32, FakeDeviceArray)(np.float32(1.5), out)
    assert fast_launch._packer(types.float64, FakeDeviceArray)(2.5, out)
    assert fast_launch._packer(types.int64, FakeDeviceArray)(7, out)
    assert fast_launch._packer(types.boolean, FakeDeviceArray)(True, out)
    assert [type(v) for v in out] == [ctypes.c_float, ctypes.c_double, ctypes.c_int64, bool]
    assert [getattr(v, "value", v) for v in out] == [1.5, 2.5, 7, True]
    assert not fast_launch._packer(types.int64, FakeDeviceArray)(7.5, out)  # a float


def test_unsupported_types_have_no_fast_path():
    with pytest.raises(TypeError):
        fast_launch._packer(types.Array(types.float32, 2, "F"), FakeDeviceArray)
    with pytest.raises(TypeError):
        fast_launch._packer(types.complex128, FakeDeviceArray)


def test_the_simulator_launches_through_the_dispatcher(monkeypatch):
    monkeypatch.setattr(fast_launch, "ENABLED", True)
    monkeypatch.setattr(fast_launch, "_launchers", {})
    x = torch.arange(5.0, device="cuda")
    assert ((x + x) * 2).cpu().tolist() == [0.0, 4.0, 8.0, 12.0, 16.0]
    if torch.cuda.is_simulated():
        assert fast_launch._launchers and not any(fast_launch._launchers.values())
