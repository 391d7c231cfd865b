"""``torch._dynamo``'s names that scripts call directly, for ``jitgrad.compile``: ``reset``,
``disable``, ``graph_break``, ``mark_dynamic`` / ``mark_static`` / ``maybe_mark_dynamic``,
``allow_in_graph``, ``is_compiling``, and ``config`` (``cache_size_limit`` and
``recompile_limit`` are ``jitgrad.config``'s; ``suppress_errors`` is accepted: jitgrad never
fails a call because its trace failed -- a call it cannot trace runs eagerly)."""

from __future__ import annotations

from ..jit.compiler_api import (
    allow_in_graph,
    disable,
    graph_break,
    is_compiling,
    mark_dynamic,
    mark_static,
    maybe_mark_dynamic,
    reset,
)

__all__ = ["reset", "disable", "graph_break", "mark_dynamic", "mark_static",
           "maybe_mark_dynamic", "allow_in_graph", "is_compiling", "config"]


class _Config:
    """``torch._dynamo.config``: the limits are ``jitgrad.config``'s."""

    suppress_errors = False
    verbose = False

    def __getattr__(self, name: str):
        from .. import config

        if name in ("cache_size_limit", "recompile_limit"):
            return getattr(config, name)
        if name == "accumulated_cache_size_limit":
            return config.cache_size_limit
        raise AttributeError(f"jitgrad._dynamo.config has no setting {name!r}")

    def __setattr__(self, name: str, value) -> None:
        from .. import config

        if name in ("cache_size_limit", "recompile_limit"):
            setattr(config, name, value)
        elif name == "accumulated_cache_size_limit":
            config.cache_size_limit = value
        elif name in ("suppress_errors", "verbose"):
            object.__setattr__(self, name, value)
        else:
            raise AttributeError(f"jitgrad._dynamo.config has no setting {name!r}")


config = _Config()
