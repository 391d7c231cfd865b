"""Launching compiled Numba CUDA kernels without Numba's per-call dispatch.

``kernel[blocks, threads](*args)`` through numba-cuda builds a launch configuration, types
every argument (a CuPy array through ``__cuda_array_interface__``, wrapping it as a Numba
device array) and packs the arguments on every call: hundreds of microseconds for a small
eager op on an H200 (``asv_benchmarks/cuda_bench.py``'s ``launch`` section). jitgrad's
kernels are called with the same argument types every time (the kernel description fixes
every dtype, and arrays are passed flat and contiguous), so after the first call through the
dispatcher (which compiles or loads the kernel) :func:`call` packs the arguments in Numba's
kernel ABI itself -- an array as ``meminfo, parent, size, itemsize, data, shape..., strides...``
-- and launches the compiled function through ``cuda.core`` as numba-cuda does.

An argument that does not match the compiled signature (another array type, dtype, rank or
layout) goes through the dispatcher, which type-checks it as usual. Under Numba's CUDA
simulator the dispatcher always runs the kernel.

Off by default until a GPU session has run the CUDA suite with it: the packing mirrors
numba-cuda 0.30's ``_Kernel._prepare_args`` but has not run on a GPU yet.
``JITGRAD_CUDA_FAST_LAUNCH=1`` (``tools/gpu_check.sh`` sets it) or ``ENABLED = True`` turns
it on.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

__all__ = ["call", "ENABLED"]

#: launch through the packed fast path when the kernel allows it
ENABLED = os.environ.get("JITGRAD_CUDA_FAST_LAUNCH", "0") not in ("", "0")

_launchers: dict = {}   # dispatcher -> _Launcher, or False where the fast path cannot run


def call(kernel, blocks: int, threads: int, args: tuple) -> None:
    """``kernel[blocks, threads](*args)``, packed and launched directly when possible."""
    if not ENABLED:
        kernel[blocks, threads](*args)
        return
    fast = _launchers.get(kernel)
    if fast:
        try:
            if fast(blocks, threads, args):
                return
        except Exception as e:  # the launch API refused it (nothing ran): the dispatcher
            _launchers[kernel] = False  # launches this kernel from now on
            import warnings

            warnings.warn(f"jitgrad: the packed CUDA launch of {kernel.__name__} failed "
                          f"({type(e).__name__}: {e}); launching it through Numba's "
                          "dispatcher", RuntimeWarning, stacklevel=2)
    kernel[blocks, threads](*args)
    if fast is None:
        _launchers[kernel] = _launcher(kernel)


def _launcher(kernel):
    """The fast launcher of ``kernel``'s one compiled overload, or False."""
    from . import runtime

    if runtime.backend() != "gpu":
        return False
    try:
        overloads = list(kernel.overloads.values())
        if len(overloads) != 1:
            return False
        k = overloads[0]
        if k.debug or getattr(k, "cooperative", False) or getattr(k, "extensions", None):
            return False
        import cupy
        from cuda.core import LaunchConfig, launch
        from numba.cuda.cudadrv import driver

        packers = tuple(_packer(t, cupy.ndarray) for t in k.argument_types)
        fn = k._codelibrary.get_cufunc().kernel
        stream = driver._to_core_stream(0)
    except Exception:  # another numba-cuda: the dispatcher launches this kernel
        return False
    return _Launcher(fn, stream, packers, LaunchConfig, launch)


class _Launcher:
    __slots__ = ("fn", "stream", "packers", "configs", "config_type", "launch")

    def __init__(self, fn, stream, packers, config_type, launch) -> None:
        self.fn, self.stream, self.packers = fn, stream, packers
        self.configs: dict = {}
        self.config_type, self.launch = config_type, launch

    def __call__(self, blocks: int, threads: int, args: tuple) -> bool:
        """Launch; False (nothing launched) when an argument does not fit the signature."""
        if len(args) != len(self.packers):
            return False
        packed: list = []
        for pack, v in zip(self.packers, args):
            if not pack(v, packed):
                return False
        cfg = self.configs.get((blocks, threads))
        if cfg is None:
            cfg = self.configs[(blocks, threads)] = self.config_type(
                grid=blocks, block=threads, shmem_size=0)
        self.launch(self.stream, cfg, self.fn, *packed)
        return True


def _packer(ty, array_type):
    """A function appending argument ``v`` of Numba type ``ty`` to a packed list in Numba's
    kernel ABI (False when ``v`` does not fit ``ty``); raises for types it does not pack."""
    from numba.core import types

    if isinstance(ty, types.Array):
        if ty.layout not in ("C", "A"):
            raise TypeError(f"no fast packing of {ty}")
        dtype, ndim, contiguous = np.dtype(str(ty.dtype)), ty.ndim, ty.layout == "C"

        def pack_array(v, out) -> bool:
            if type(v) is not array_type or v.ndim != ndim or v.dtype != dtype or (
                    contiguous and not v.flags.c_contiguous):
                return False
            out += (0, 0, v.size, v.itemsize, v.data.ptr, *v.shape, *v.strides)
            return True
        return pack_array
    if ty in (types.float32, types.float64) or isinstance(ty, types.Integer):
        ctype = {types.float32: ctypes.c_float, types.float64: ctypes.c_double}.get(ty) or \
            getattr(ctypes, f"c_{ty}")
        is_float = isinstance(ty, types.Float)

        def pack_number(v, out) -> bool:
            if hasattr(v, "__cuda_array_interface__") or (
                    not is_float and isinstance(v, float)):
                return False
            out.append(ctype(v))
            return True
        return pack_number
    if ty == types.boolean:
        def pack_bool(v, out) -> bool:
            out.append(bool(v))
            return True
        return pack_bool
    raise TypeError(f"no fast packing of {ty}")


if os.environ.get("JITGRAD_CUDA_LAUNCH_LOG"):  # every kernel launched, for the PTX check
    from . import launch_log

    call = launch_log.logged(call, os.environ[launch_log.ENV])
