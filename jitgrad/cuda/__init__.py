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
           "manual_seed_all", "empty_cache", "is_initialized", "is_bf16_supported"]


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

    d = parse(device)
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
