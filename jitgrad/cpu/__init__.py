"""``torch.cpu``: the CPU device module (PyTorch's ``torch.cpu``): it is always available,
there is one device, and work on it is synchronous."""

from __future__ import annotations

__all__ = ["is_available", "device_count", "synchronize", "current_device", "amp"]


def is_available() -> bool:
    """Always True: the CPU is there."""
    return True


def device_count() -> int:
    """One CPU device."""
    return 1


def synchronize(device=None) -> None:
    """Nothing to wait for: CPU work is synchronous."""


def current_device() -> str:
    """``"cpu"``."""
    return "cpu"


def __getattr__(name: str):
    if name == "amp":  # (not ``from . import amp``: that asks this __getattr__ again)
        import importlib

        return importlib.import_module(__name__ + ".amp")
    raise AttributeError(f"module 'jitgrad.cpu' has no attribute '{name}'")
