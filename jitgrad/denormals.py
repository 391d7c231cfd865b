"""``set_flush_denormal``: PyTorch's switch for flushing denormal (subnormal) floats to zero
on the CPU.

PyTorch sets the calling thread's SSE ``FTZ`` / ``DAZ`` flags. jitgrad's kernels run on a
pool of worker threads and in NumPy, whose floating-point control state Python cannot set,
so jitgrad has no flush-denormal mode: :func:`set_flush_denormal` reports that, as PyTorch
does on a CPU without the flags, by returning False (denormals keep their IEEE values).
"""

from __future__ import annotations

__all__ = ["set_flush_denormal"]


def set_flush_denormal(mode: bool) -> bool:
    """Ask to flush denormals to zero (``mode=True``) or keep them (False); returns whether
    the mode is supported and set -- False in jitgrad, which always keeps denormals (see
    the module docstring). ``mode`` must be a bool, as in PyTorch.

    >>> import jitgrad
    >>> jitgrad.set_flush_denormal(True)
    False
    """
    if not isinstance(mode, bool):
        raise RuntimeError(f"flush_denormal expects a bool, but got {type(mode).__name__}")
    return False
