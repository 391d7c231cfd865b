"""``jitgrad.cuda``: PyTorch's ``torch.cuda`` functions for jitgrad's CUDA backend.

CUDA needs ``pip install jitgrad[cuda]`` (numba-cuda and CuPy) and an NVIDIA GPU, or Numba's
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` in the environment before the first CUDA use),
where the same code paths run on NumPy arrays, slowly. Importing this module loads nothing:
the first call that needs CUDA does.

>>> import jitgrad
>>> jitgrad.cuda.is_available() in (True, False)
True
"""

from __future__ import annotations

__all__ = ["is_available", "is_simulated", "device_count", "current_device", "set_device",
           "synchronize", "get_device_name", "get_device_capability", "manual_seed",
           "manual_seed_all", "empty_cache", "is_initialized", "is_bf16_supported",
           "get_device_properties", "device", "Stream", "Event", "StreamContext", "stream",
           "current_stream", "default_stream", "set_stream", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "memory_stats",
           "mem_get_info", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
           "OutOfMemoryError"]

_STREAMS = ("Stream", "Event", "StreamContext", "stream", "current_stream", "default_stream",
            "set_stream")
_MEMORY = ("memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "reset_max_memory_allocated",
           "memory_stats", "mem_get_info")


class OutOfMemoryError(RuntimeError):
    """Raised when a CUDA allocation fails for lack of device memory (PyTorch's
    ``torch.OutOfMemoryError``, also ``jitgrad.cuda.OutOfMemoryError``; a RuntimeError, so
    ``except RuntimeError`` catches it as in PyTorch)."""


OutOfMemoryError.__module__ = "jitgrad"


def __getattr__(name: str):
    # streams, events and memory statistics live in their own modules, loaded on first use
    if name == "amp":  # (not ``from . import amp``: that asks this __getattr__ again)
        import importlib

        return importlib.import_module(__name__ + ".amp")
    if name in _STREAMS:
        from . import streams

        return getattr(streams, name)
    if name in _MEMORY:
        from . import memory

        return getattr(memory, name)
    from ..tensor_types import CUDA_TYPES

    if name in CUDA_TYPES:
        return CUDA_TYPES[name]
    raise AttributeError(f"module 'jitgrad.cuda' has no attribute '{name}'")


def _rt():
    from . import runtime

    return runtime


def is_available() -> bool:
    """Whether a CUDA device (a GPU, or the simulator) can be used."""
    return _rt().backend() is not None


def is_simulated() -> bool:
    """Whether CUDA tensors run in Numba's CUDA simulator (no GPU)."""
    return _rt().backend() == "sim"


def is_initialized() -> bool:
    """Whether CUDA was looked for in this process (PyTorch's lazy initialisation)."""
    from . import runtime  # noqa: F401 - cheap; reports the detection's state

    return "backend" in runtime._state


def device_count() -> int:
    """How many CUDA devices jitgrad uses: 1 when CUDA is available (jitgrad uses device 0),
    else 0."""
    return 1 if is_available() else 0


def current_device() -> int:
    """The current device's index (always 0)."""
    _rt().require()
    return 0


def set_device(device) -> None:
    """Select the current device; jitgrad uses device 0 only."""
    from ..devices import parse

    d = parse(device if not isinstance(device, int) else f"cuda:{device}")
    if d is None or d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {device}")


def synchronize(device=None) -> None:
    """Wait for every CUDA kernel launched so far to finish."""
    _rt().require()
    _rt().synchronize()


def get_device_name(device=None) -> str:
    """The GPU's name ("Numba CUDA simulator" under the simulator)."""
    if _rt().require() == "sim":
        return "Numba CUDA simulator"
    from numba import cuda

    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else name


def get_device_capability(device=None) -> tuple[int, int]:
    """The GPU's compute capability ``(major, minor)``."""
    if _rt().require() == "sim":
        return (0, 0)
    from numba import cuda

    return tuple(cuda.get_current_device().compute_capability)


class _CudaDeviceProperties:
    """What ``get_device_properties`` returns (PyTorch's fields)."""

    def __init__(self, **fields) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // 2**20}MB, "
                f"multi_processor_count={self.multi_processor_count}, "
                f"L2_cache_size={self.L2_cache_size // 2**20}MB)")


def get_device_properties(device=None) -> _CudaDeviceProperties:
    """The GPU's name, compute capability, memory and multiprocessors (PyTorch's fields:
    ``name``, ``major``, ``minor``, ``total_memory``, ``multi_processor_count``,
    ``warp_size``, ``max_threads_per_multi_processor``, ``regs_per_multiprocessor``,
    ``L2_cache_size``, ``is_integrated``, ``is_multi_gpu_board``). Under the simulator the
    memory is the host's and one block runs at a time (one "multiprocessor")."""
    if device is not None:
        set_device(device)  # checks it is CUDA device 0
    if _rt().require() == "sim":
        from .memory import mem_get_info

        return _CudaDeviceProperties(
            name="Numba CUDA simulator", major=0, minor=0, total_memory=mem_get_info()[1],
            multi_processor_count=1, warp_size=32, max_threads_per_multi_processor=1024,
            regs_per_multiprocessor=0, L2_cache_size=0, is_integrated=0, is_multi_gpu_board=0)
    import cupy

    p = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = p.get("name", b"")
    return _CudaDeviceProperties(
        name=name.decode() if isinstance(name, bytes) else str(name),
        major=int(p.get("major", 0)), minor=int(p.get("minor", 0)),
        total_memory=int(p.get("totalGlobalMem", 0)),
        multi_processor_count=int(p.get("multiProcessorCount", 0)),
        warp_size=int(p.get("warpSize", 32)),
        max_threads_per_multi_processor=int(p.get("maxThreadsPerMultiProcessor", 0)),
        regs_per_multiprocessor=int(p.get("regsPerMultiprocessor", 0)),
        L2_cache_size=int(p.get("l2CacheSize", 0)),
        is_integrated=int(p.get("integrated", 0)),
        is_multi_gpu_board=int(p.get("isMultiGpuBoard", 0)))


class device:  # noqa: N801 - PyTorch's name
    """``with jitgrad.cuda.device(i):`` selects CUDA device ``i`` inside the block; jitgrad
    uses device 0 only, so ``i`` must be 0 (a ``cuda`` device, or -1 / None: no change)."""

    def __init__(self, device) -> None:
        if device is not None and device != -1:
            set_device(device)
        self.idx = 0 if device not in (None, -1) else -1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether bfloat16 tensors can be used on CUDA: never, jitgrad has no bfloat16 storage
    (see ``jitgrad.bfloat16``), so scripts choosing a dtype with this pick another."""
    return False


def manual_seed(seed: int) -> None:
    """Seed the generator of CUDA tensors (jitgrad draws random numbers on the host, from
    the default generator, and moves them: this is ``jitgrad.manual_seed``)."""
    from ..random import manual_seed as seed_all

    seed_all(seed)


manual_seed_all = manual_seed


def empty_cache() -> None:
    """Release cached device memory (CuPy's memory pool) back to the driver."""
    if _rt().backend() == "gpu":
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
