"""Utilities: ``jitgrad.utils.data`` (datasets and the data loader) and, loaded on first
use, ``jitgrad.utils.checkpoint`` (activation checkpointing), ``jitgrad.utils.benchmark``
(PyTorch's Timer / Compare), ``jitgrad.utils.hooks`` (``RemovableHandle``) and
``jitgrad.utils._pytree`` (nested containers: ``tree_map``, ``tree_flatten``...)."""

from . import data

__all__ = ["data", "checkpoint", "benchmark", "hooks"]


def __getattr__(name: str):
    if name in ("checkpoint", "benchmark", "hooks", "_pytree"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
