"""``jitgrad.backends.mkldnn``: jitgrad does not use oneDNN (MKL-DNN); ``enabled`` (default
True) is stored for scripts that set it and changes nothing."""

from __future__ import annotations

__all__ = ["is_available", "enabled"]

enabled = True


def is_available() -> bool:
    """Whether oneDNN can be used: never (jitgrad's CPU kernels are its own)."""
    return False
