"""Thread-local tracing state (a leaf module: imported by the tensor and the dispatchers)."""

from __future__ import annotations

import threading

__all__ = ["STATE"]


class _TraceState(threading.local):
    def __init__(self) -> None:
        self.tracer = None  # the active Tracer of this thread, or None


STATE = _TraceState()
