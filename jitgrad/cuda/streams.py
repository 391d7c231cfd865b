"""``torch.cuda.Stream`` / ``Event`` and the current stream, for jitgrad's CUDA backend.

What scripts use them for -- timing GPU work with events (``record``, ``synchronize``,
``elapsed_time``), waiting for a stream, ``with torch.cuda.stream(s):`` -- works, with one
difference from PyTorch: jitgrad's own kernels are launched on the default (legacy) stream,
and a stream made here is a *blocking* CuPy stream, so the legacy stream's implicit
synchronisation orders all work as the program issued it. Nothing runs concurrently across
streams (PyTorch's side streams are non-blocking and can overlap); nothing runs out of
order either, so a program correct under PyTorch's rules is correct here. Inside
``with torch.cuda.stream(s):`` CuPy's current stream is ``s``: CuPy work (cuBLAS products,
a user's own CuPy code) is queued on it, behind the jitgrad kernels issued before.

Under Numba's CUDA simulator every kernel has finished when its launch returns: a stream
has no pending work, an event is complete once recorded, and its timestamp is the host's
clock at ``record()``.
"""

from __future__ import annotations

import threading
import time

from . import runtime

__all__ = ["Stream", "Event", "StreamContext", "stream", "current_stream", "default_stream",
           "set_stream"]


class Stream:
    """A CUDA stream (PyTorch's ``torch.cuda.Stream``): a queue of GPU work.

    ``device`` must be CUDA device 0 (or None); ``priority`` is a scheduling hint passed to
    CUDA where CuPy takes one (lower is higher priority). See the module docstring for how
    jitgrad orders work across streams.
    """

    _next_sim_handle = 1

    def __init__(self, device=None, priority: int = 0) -> None:
        _check_device(device)
        self.priority = int(priority)
        if runtime.require() == "gpu":
            import cupy

            self._cupy = _blocking_stream(cupy, self.priority)
            self.cuda_stream = int(self._cupy.ptr)
        else:
            self._cupy = None
            self.cuda_stream = Stream._next_sim_handle
            Stream._next_sim_handle += 1

    @classmethod
    def _default(cls, cupy_stream) -> Stream:
        """The stream object of the default (legacy) stream: CuPy's ``Stream.null`` on a
        GPU, handle 0 in the simulator."""
        s = cls.__new__(cls)
        s.priority, s._cupy = 0, cupy_stream
        s.cuda_stream = 0 if cupy_stream is None else int(cupy_stream.ptr)
        return s

    @property
    def device(self):
        """The stream's device (``cuda:0``)."""
        from ..devices import CUDA0

        return CUDA0

    def query(self) -> bool:
        """Whether all work queued on this stream has finished."""
        return True if self._cupy is None else bool(self._cupy.done)

    def synchronize(self) -> None:
        """Wait until all work queued on this stream has finished."""
        if self._cupy is not None:
            self._cupy.synchronize()

    def wait_event(self, event: Event) -> None:
        """Make work queued on this stream from now on wait for ``event`` (an event not yet
        recorded is complete: nothing to wait for)."""
        if not isinstance(event, Event):
            raise TypeError(f"wait_event(): argument 'event' must be torch.cuda.Event, not "
                            f"{type(event).__name__}")
        if self._cupy is not None and event._recorded:
            self._cupy.wait_event(event._cupy)

    def wait_stream(self, stream: Stream) -> None:
        """Make work queued on this stream from now on wait for all work queued on
        ``stream`` so far."""
        if not isinstance(stream, Stream):
            raise TypeError(f"wait_stream(): argument 'stream' must be torch.cuda.Stream, "
                            f"not {type(stream).__name__}")
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one when None) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __enter__(self) -> Stream:
        self._context = StreamContext(self)
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._context.__exit__(*exc)

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream

    def __hash__(self) -> int:
        return hash(("cuda-stream", self.cuda_stream))

    def __repr__(self) -> str:
        return f"<jitgrad.cuda.Stream device=cuda:0 cuda_stream={self.cuda_stream:#x}>"


class Event:
    """A CUDA event (PyTorch's ``torch.cuda.Event``): a marker in a stream, to wait for or
    to time GPU work between two of them (``enable_timing=True``)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        self.enable_timing, self.blocking, self.interprocess = \
            bool(enable_timing), bool(blocking), bool(interprocess)
        self._recorded = False
        self._time = 0.0
        self._cupy = None
        if runtime.require() == "gpu":
            import cupy

            self._cupy = cupy.cuda.Event(block=self.blocking,
                                         disable_timing=not self.enable_timing,
                                         interprocess=self.interprocess)

    def record(self, stream: Stream | None = None) -> None:
        """Mark the point reached by ``stream`` (the current stream when None)."""
        stream = current_stream() if stream is None else stream
        if not isinstance(stream, Stream):
            raise TypeError(f"record(): argument 'stream' must be torch.cuda.Stream, not "
                            f"{type(stream).__name__}")
        if self._cupy is not None:
            self._cupy.record(stream._cupy)
        else:
            self._time = time.perf_counter()
        self._recorded = True

    def wait(self, stream: Stream | None = None) -> None:
        """Make work queued on ``stream`` (the current stream when None) from now on wait
        for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self) -> bool:
        """Whether the work before the event has finished (True before any record)."""
        return True if self._cupy is None or not self._recorded else bool(self._cupy.done)

    def synchronize(self) -> None:
        """Wait until the work before the event has finished (nothing before a record)."""
        if self._cupy is not None and self._recorded:
            self._cupy.synchronize()

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds from this event to ``end_event``; both must have been created with
        ``enable_timing=True``, recorded, and be complete (PyTorch's errors otherwise)."""
        if not isinstance(end_event, Event):
            raise TypeError(f"elapsed_time(): argument 'end_event' must be torch.cuda.Event, "
                            f"not {type(end_event).__name__}")
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if not (self._recorded and end_event._recorded):
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        if not (self.query() and end_event.query()):
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
        if self._cupy is None:
            return (end_event._time - self._time) * 1e3
        import cupy

        return float(cupy.cuda.get_elapsed_time(self._cupy, end_event._cupy))

    def __repr__(self) -> str:
        state = "recorded" if self._recorded else "not recorded"
        return f"<jitgrad.cuda.Event {state}, enable_timing={self.enable_timing}>"


class _Current(threading.local):
    """This thread's stack of current streams (PyTorch's current stream is per thread)."""

    def __init__(self) -> None:
        self.stack: list[Stream] = []


_CURRENT = _Current()
_DEFAULT: list[Stream] = []


def default_stream(device=None) -> Stream:
    """The default stream: the legacy stream jitgrad's kernels run on."""
    _check_device(device)
    if not _DEFAULT:
        if runtime.require() == "gpu":
            import cupy

            _DEFAULT.append(Stream._default(cupy.cuda.Stream.null))
        else:
            _DEFAULT.append(Stream._default(None))
    return _DEFAULT[0]


def current_stream(device=None) -> Stream:
    """This thread's current stream (the default stream outside ``with stream(s):``)."""
    _check_device(device)
    stack = _CURRENT.stack
    return stack[-1] if stack else default_stream()


def set_stream(stream: Stream) -> None:
    """Make ``stream`` this thread's current stream (until a ``with stream(...)`` block
    that began before returns)."""
    if stream is None:
        return
    _use(stream)
    stack = _CURRENT.stack
    if stack:
        stack[-1] = stream
    else:
        stack.append(stream)


class StreamContext:
    """``with StreamContext(s):`` makes ``s`` the current stream inside the block (None:
    nothing changes)."""

    def __init__(self, stream: Stream | None) -> None:
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"expected a torch.cuda.Stream or None, got {type(stream).__name__}")
        self.stream = stream

    def __enter__(self) -> Stream | None:
        if self.stream is not None:
            _CURRENT.stack.append(self.stream)
            _use(self.stream)
        return self.stream

    def __exit__(self, *exc) -> None:
        if self.stream is not None:
            stack = _CURRENT.stack
            stack.pop()
            _use(stack[-1] if stack else default_stream())


def stream(stream: Stream | None) -> StreamContext:
    """``with jitgrad.cuda.stream(s):`` -- ``s`` is the current stream inside the block."""
    return StreamContext(stream)


def _blocking_stream(cupy, priority: int):
    """A new CuPy stream that synchronises with the legacy default stream."""
    if priority:
        try:
            return cupy.cuda.Stream(non_blocking=False, priority=priority)
        except TypeError:  # a CuPy without stream priorities: the hint is dropped
            pass
    return cupy.cuda.Stream(non_blocking=False)


def _use(s: Stream) -> None:
    """Make ``s`` CuPy's current stream on this thread (CuPy work is queued on it)."""
    if s._cupy is not None:
        s._cupy.use()


def _check_device(device) -> None:
    if device is None or isinstance(device, int) and device == 0:
        return
    from ..devices import parse

    d = parse(device)
    if d is None or d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {device}")
