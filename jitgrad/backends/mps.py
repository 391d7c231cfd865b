"""``jitgrad.backends.mps``: Apple's Metal backend, which jitgrad does not have."""

from __future__ import annotations

__all__ = ["is_available", "is_built", "is_macos_or_newer"]


def is_available() -> bool:
    """Whether MPS can be used: never (jitgrad has no Metal backend)."""
    return False


def is_built() -> bool:
    """Whether jitgrad was built with MPS support: no."""
    return False


def is_macos_or_newer(major: int, minor: int) -> bool:
    """PyTorch's check of the macOS version for MPS: False without MPS."""
    return False
