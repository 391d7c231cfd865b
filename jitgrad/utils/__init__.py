"""Utilities: ``jitgrad.utils.data`` (datasets and the data loader) and, loaded on first
use, ``jitgrad.utils.checkpoint`` (activation checkpointing)."""

from . import data

__all__ = ["data", "checkpoint"]


def __getattr__(name: str):
    if name == "checkpoint":
        import importlib

        return importlib.import_module(f"{__name__}.checkpoint")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
