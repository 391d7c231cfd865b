"""The profiler's recording state, in a module small enough for the backward engine to import
at start-up (``jitgrad.profiler`` itself is loaded on first use).

:data:`ACTIVE` holds the recording :class:`Recording` or None: one global read is all an
instrumented place pays while no profiler records. A recording keeps one flat list of
events -- ``(name, thread id, start ns, end ns, extra)`` -- appended from any thread
(``list.append`` is atomic); :mod:`jitgrad.profiler.events` builds the nesting afterwards
from the intervals, as PyTorch's profiler does.
"""

from __future__ import annotations

import os
import sys
import threading
import time

__all__ = ["ACTIVE", "Recording", "now_ns"]

now_ns = time.perf_counter_ns
_ident = threading.get_ident
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


class Recording:
    """What one profiling window records, and how (``record_shapes``, ``with_stack``,
    ``profile_memory``, ``with_flops``: the options of ``jitgrad.profiler.profile``)."""

    __slots__ = ("events", "record_shapes", "with_stack", "profile_memory", "with_flops",
                 "start_ns")

    def __init__(self, record_shapes: bool = False, with_stack: bool = False,
                 profile_memory: bool = False, with_flops: bool = False) -> None:
        self.events: list = []
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.start_ns = now_ns()

    def add(self, name: str, start: int, end: int, kind: str = "cpu_op",
            args: tuple | None = None, out=None) -> None:
        """One event that ran from ``start`` to ``end`` (``perf_counter_ns``) on this thread:
        ``kind`` is its chrome-trace category (``cpu_op``, ``user_annotation``...); ``args``
        and ``out`` (an op's inputs and result) give its shapes, memory and flops where this
        recording asks for them."""
        extra = None
        if args is not None and (self.record_shapes or self.with_flops or self.profile_memory):
            extra = {}
            if self.record_shapes or self.with_flops:
                extra["shapes"] = input_shapes(args)
            if self.profile_memory:
                extra["memory"] = allocated_bytes(out)
        if self.with_stack:
            extra = extra if extra is not None else {}
            extra["stack"] = caller_stack()
        self.events.append((name, _ident(), start, end, kind, extra))


def input_shapes(args: tuple) -> list:
    """PyTorch's ``input_shapes``: one list per argument, a tensor's sizes or ``[]``."""
    out = []
    for a in args:
        data = getattr(a, "_data", None)
        shape = getattr(data, "shape", None)
        out.append(list(shape) if shape is not None and hasattr(a, "_grad_fn") else [])
    return out


def allocated_bytes(out) -> int:
    """Bytes an op's result(s) allocated: tensors owning their memory (a view allocates
    nothing)."""
    total = 0
    for t in (out if isinstance(out, (tuple, list)) else (out,)):
        data = getattr(t, "_data", None)
        if data is not None and hasattr(t, "_grad_fn") and getattr(data, "base", 0) is None:
            total += int(data.nbytes)
    return total


def caller_stack(limit: int = 16) -> list:
    """The Python frames that led here, innermost first, as ``"file(line): function"``,
    without jitgrad's own frames (PyTorch's ``FunctionEvent.stack``)."""
    frame = sys._getframe(1)
    out = []
    while frame is not None and len(out) < limit:
        code = frame.f_code
        if not code.co_filename.startswith(_PACKAGE):
            out.append(f"{code.co_filename}({frame.f_lineno}): {code.co_name}")
        frame = frame.f_back
    return out


#: the recording now, or None (one item: a list, so readers bind it once)
ACTIVE: list = [None]
