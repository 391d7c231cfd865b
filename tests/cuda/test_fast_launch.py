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


_ABI_CHECK = r'''
import ctypes, re, sys
import numpy as np
from numba import cuda
from numba.core import types
sys.path.insert(0, TOOLS)
import cuda_ptx_check
from jitgrad.cuda import fast_launch
try:
    from cuda.core._kernel_arg_handler import ParamHolder
except ImportError:
    from cuda.core.cu13._kernel_arg_handler import ParamHolder

cuda_ptx_check._without_a_gpu((9, 0))

class Mem:
    def __init__(self, ptr): self.ptr = ptr
class Flags:
    def __init__(self, c): self.c_contiguous = c
class Dev:  # what the packer reads of a CuPy array
    def __init__(self, a, ptr):
        self.ndim, self.dtype, self.size, self.itemsize = a.ndim, a.dtype, a.size, a.itemsize
        self.shape, self.strides = a.shape, a.strides
        self.flags, self.data = Flags(a.flags.c_contiguous), Mem(ptr)

def kernel(n, a, b, s, f, d, flag, out):
    i = cuda.grid(1)
    if i < n and flag:
        out[i] = a[i] * f + b[i, 0] * d + s + a.shape[0] + b.strides[1] + out.shape[1]

sig = (types.int64, types.Array(types.float32, 1, "C"), types.Array(types.float64, 2, "C"),
       types.int64, types.float32, types.float64, types.boolean,
       types.Array(types.float64, 3, "C"))
ptx, _ = cuda.compile_ptx(kernel, sig, cc=(9, 0))
entry = ptx[ptx.index(".entry"):]
params = re.findall(r"\.param \.(\w+) ", entry[:entry.index(")")])
A = Dev(np.zeros(7, np.float32), 0x7F00_1234_5600)
B = Dev(np.zeros((3, 4)), 0x7F00_AAAA_0000)
O = Dev(np.zeros((2, 3, 5)), 0x7F00_BBBB_0000)
values = (11, A, B, -(1 << 40), np.float32(0.75), -2.5, True, O)
packed = []
for t, v in zip(sig, values):
    assert fast_launch._packer(t, Dev)(v, packed), t
def arr(d):
    return [0, 0, d.size, d.itemsize, d.data.ptr, *d.shape, *d.strides]
expected = [11, *arr(A), *arr(B), -(1 << 40), 0.75, -2.5, True, *arr(O)]
assert len(params) == len(packed) == len(expected), (params, len(packed), len(expected))
holder = ParamHolder(packed)
ptrs = (ctypes.c_void_p * len(params)).from_address(holder.ptr)
read = {"u64": ctypes.c_int64, "b64": ctypes.c_int64, "s64": ctypes.c_int64,
        "f32": ctypes.c_float, "f64": ctypes.c_double, "u8": ctypes.c_uint8,
        "b8": ctypes.c_uint8, "u32": ctypes.c_int32, "s32": ctypes.c_int32}
got = [read[p].from_address(ptr).value for p, ptr in zip(params, ptrs)]
assert got == [int(e) if isinstance(e, bool) else e for e in expected], (params, got, expected)
print("ABI OK", len(params), "parameters:", " ".join(params))
'''


def test_packed_arguments_match_the_compiled_kernels_parameters():
    """The packing checked against the real ABI without a GPU: a kernel compiled to PTX by
    NVVM (its ``.param`` list: each parameter's type, in order) and cuda.core's own argument
    packing (``ParamHolder``, what ``cuda.core.launch`` hands the driver), read back
    parameter by parameter with the PTX type. A count, an order or a width that differs
    (say a Python int packed in 4 bytes where the kernel reads 8) fails here."""
    import subprocess
    import sys

    from helpers import ROOT, real_cuda_env, skip_without_nvvm

    skip_without_nvvm()
    r = subprocess.run([sys.executable, "-c", f"TOOLS = {str(ROOT / 'tools')!r}\n" + _ABI_CHECK],
                       capture_output=True, text=True, env=real_cuda_env(), cwd=ROOT,
                       timeout=300)
    if "No module named 'cuda.core" in r.stderr:
        pytest.skip("cuda.core is not installed")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ABI OK 32 parameters" in r.stdout  # 1 + 7 + 9 + 4 + 11


def test_a_launch_the_api_refuses_falls_back_to_the_dispatcher(monkeypatch):
    """A packed launch that raises (cuda.core refusing an argument, say) launched nothing:
    the dispatcher launches that call and every later one of the kernel, with a warning."""
    monkeypatch.setattr(fast_launch, "ENABLED", True)
    calls = []

    class Refusing:
        def __call__(self, blocks, threads, args):
            calls.append(args)
            raise TypeError("unsupported argument")

    x = torch.arange(4.0, device="cuda")
    (x + x).cpu()  # the op's kernel, compiled and remembered
    kernels = [k for k in list(fast_launch._launchers) if not fast_launch._launchers[k]]
    assert kernels
    monkeypatch.setattr(fast_launch, "_launchers",
                        {k: Refusing() for k in fast_launch._launchers})
    with pytest.warns(RuntimeWarning, match="packed CUDA launch .* failed"):
        y = (x + x).cpu().tolist()
    assert y == [0.0, 2.0, 4.0, 6.0] and len(calls) == 1
    assert not any(fast_launch._launchers.values())  # the dispatcher from now on
    assert ((x + x).cpu().tolist()) == [0.0, 2.0, 4.0, 6.0] and len(calls) == 1
