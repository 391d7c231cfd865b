"""Thread-local tracing state (a leaf module: imported by the tensor and the dispatchers)."""

from __future__ import annotations

from .._thread_modes import TRACING, CountedLocal

__all__ = ["STATE"]


class _TraceState(CountedLocal):
    COUNTED = {"tracer": (None, TRACING)}  # a thread tracing: an item in TRACING

    def __init__(self) -> None:
        self.tracer = None  # the active Tracer of this thread, or None


STATE = _TraceState()
