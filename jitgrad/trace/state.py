"""Thread-local tracing state (a leaf module: imported by the tensor and the dispatchers)."""

from __future__ import annotations

from .._thread_modes import CountedLocal

__all__ = ["STATE"]


class _TraceState(CountedLocal):
    DEFAULTS = {"tracer": None}  # a thread tracing counts in NONDEFAULT

    def __init__(self) -> None:
        self.tracer = None  # the active Tracer of this thread, or None


STATE = _TraceState()
