"""Utilities: ``jitgrad.utils.data`` (datasets and the data loader) and, loaded on first
use, ``jitgrad.utils.checkpoint`` (activation checkpointing) and ``jitgrad.utils.benchmark``
(PyTorch's Timer / Compare)."""

from . import data

__all__ = ["data", "checkpoint", "benchmark"]


def __getattr__(name: str):
    if name in ("checkpoint", "benchmark"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
