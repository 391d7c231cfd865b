"""Graph compilation: passes, fusion, kernel descriptions and their rendering, the executable
plan. Submodules load on first use (``import jitgrad`` loads only ``pysource``)."""

from __future__ import annotations

__all__ = ["Plan", "build_plan"]


def __getattr__(name: str):
    if name in __all__:
        from . import executable

        return getattr(executable, name)
    raise AttributeError(f"module 'jitgrad.compiler' has no attribute {name!r}")
