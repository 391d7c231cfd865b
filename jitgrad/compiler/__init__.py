"""Graph compilation: passes, fusion, kernel descriptions and their rendering, the executable
plan. Submodules load on first use (``import jitgrad`` loads only ``pysource``).

Also ``torch.compiler``'s user-facing functions (``jitgrad.compiler.reset()``, ``disable``,
``is_compiling``...: :mod:`jitgrad.jit.compiler_api`)."""

from __future__ import annotations

__all__ = ["Plan", "build_plan"]
_USER_API = frozenset({"reset", "disable", "is_compiling", "is_dynamo_compiling",
                       "allow_in_graph", "cudagraph_mark_step_begin", "mark_dynamic",
                       "mark_static", "maybe_mark_dynamic"})


def __getattr__(name: str):
    if name in __all__:
        from . import executable

        return getattr(executable, name)
    if name in _USER_API:
        from ..jit import compiler_api

        return getattr(compiler_api, name)
    raise AttributeError(f"module 'jitgrad.compiler' has no attribute {name!r}")
