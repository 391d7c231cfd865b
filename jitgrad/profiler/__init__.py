"""PyTorch's ``torch.profiler``: where a program's time goes, op by op.

>>> import jitgrad as torch
>>> from jitgrad.profiler import profile, record_function, ProfilerActivity
>>> with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
...     with record_function("model_inference"):
...         loss = model(x).sum()
...     loss.backward()
>>> print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))

What a window records (all host time, measured with ``time.perf_counter_ns``):

* ``aten::<op>`` -- each call of a public op function or ``Tensor`` op method / operator
  (``jitgrad.mm``, ``F.linear``, ``x + y``, ``x.sum()``), with ``record_shapes`` its
  inputs' shapes, with ``profile_memory`` the bytes its results allocated, with
  ``with_flops`` the flops of the matrix products (``mm``, ``matmul``, ``bmm``, ``addmm``,
  ``linear``, ``baddbmm``, ``addbmm``; other ops count none);
* ``nn.Module: <class>`` -- each module call;
* ``autograd::engine::evaluate_function: <Node>`` -- each backward node the engine runs (a
  region of element-wise nodes that eager backward fuses is one event naming them);
* ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` -- each batch a
  ``DataLoader`` gives (``_MultiProcessingDataLoaderIter`` with workers);
* ``Optimizer.step#<class>.step`` / ``Optimizer.zero_grad#...``, ``Compiled Region: <fn>``
  (a ``jitgrad.compile``'d call), ``ProfilerStep#<n>`` (with a ``schedule``: from one
  ``step()`` to the next) and
  every ``record_function`` label.

Events nest by time on their thread; an event's self time is its time less its
children's. Device (CUDA) time is not measured: ``ProfilerActivity.CUDA`` adds nothing to a
window, and the device columns read zero. The wrappers that record are in place only while
a window records (:mod:`jitgrad.profiler.instruments`); ops reached through jitgrad's own
internal calls (inside a module, inside a composite op) show in their caller's time.
"""

from __future__ import annotations

import enum
import json
import os
import socket
import time
import warnings
from collections.abc import Callable, Iterable
from contextlib import ContextDecorator

from .._profiling import ACTIVE, Recording, now_ns
from . import instruments
from .events import (
    EventList,
    FunctionEvent,
    FunctionEventAvg,
    build_events,
    chrome_trace,
    write_json,
)

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities", "EventList", "FunctionEvent",
           "FunctionEventAvg", "Recorder"]


class ProfilerActivity(enum.Enum):
    """What a window profiles (PyTorch's names). jitgrad measures host time: ``CPU``."""

    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3
    PrivateUse1 = 4


class ProfilerAction(enum.Enum):
    """A step's place in a :func:`schedule`."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities() -> set:
    """The activities jitgrad's profiler measures: host time."""
    return {ProfilerActivity.CPU}


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """PyTorch's profiler schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle
    steps, ``warmup`` steps and ``active`` recorded steps (the last of which hands the
    window's results to ``on_trace_ready``), ``repeat`` times (0: for ever).
    ``skip_first_wait``: the first cycle has no wait."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("Invalid profiler schedule arguments")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError("step must be non-negative")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


class record_function(ContextDecorator):
    """A labelled range in the profile (PyTorch's ``record_function``): a context manager or
    a decorator; its event holds the ops run inside it. Costs one global read when no
    window records."""

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self.args = args
        self._start: int | None = None

    def __enter__(self) -> record_function:
        self._start = now_ns() if ACTIVE[0] is not None else None
        return self

    def __exit__(self, *exc) -> bool:
        rec, start = ACTIVE[0], self._start
        self._start = None
        if rec is not None and start is not None:
            rec.add(self.name, start, now_ns(), "user_annotation")
        return False

    def _recreate_cm(self):  # each decorated call its own range (threads, recursion)
        return record_function(self.name, self.args)


class Recorder:
    """One recording window's results: the events of a :class:`Recording` as PyTorch's
    ``EventList`` (also what ``profile.profiler`` is, as PyTorch's legacy profiler)."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self._events: EventList | None = None

    @property
    def function_events(self) -> EventList:
        """Every event, nested (built once, on first read)."""
        if self._events is None:
            r = self.recording
            self._events = EventList(build_events(r.events, r.start_ns, r.with_flops),
                                     profile_memory=r.profile_memory,
                                     with_flops=r.with_flops)
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The events averaged per name (and shapes / stack, where asked)."""
        if group_by_input_shape and not self.recording.record_shapes:
            raise AssertionError("Profiler must be enabled with record_shapes=True to group "
                                 "by input shapes")
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)


class profile:
    """PyTorch's ``torch.profiler.profile``: a context manager (or ``start()`` /
    ``stop()``) recording the events described in :mod:`jitgrad.profiler`.

    ``schedule`` (see :func:`schedule`) decides per ``step()`` whether to record;
    ``on_trace_ready(prof)`` is called when a scheduled window ends (with no schedule: at
    ``stop()``). ``record_shapes``, ``profile_memory``, ``with_stack``, ``with_flops`` add
    what their names say; ``with_modules`` is accepted (module events are always recorded).
    One window records at a time in a process."""

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_flops: bool = False, with_modules: bool = False,
                 experimental_config=None, execution_trace_observer=None,
                 acc_events: bool = False, use_cuda: bool | None = None,
                 custom_trace_id_callback=None) -> None:
        acts = set(activities) if activities is not None else supported_activities()
        if use_cuda:
            acts.add(ProfilerActivity.CUDA)
        if acts - supported_activities():
            warnings.warn("jitgrad's profiler measures host time only: "
                          f"{sorted(a.name for a in acts - supported_activities())} "
                          "activity is not recorded", stacklevel=2)
        self.activities = acts
        self.schedule = schedule if schedule is not None else _always_record
        self.record_steps = schedule is not None  # ProfilerStep#<n> events (PyTorch's)
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.step_num = 0
        self.current_action = self.schedule(0)
        self.profiler: Recorder | None = None
        self._recording: Recording | None = None
        self._step_start: int | None = None
        self._metadata: dict = {}
        self._running = False

    # ------------------------------------------------------------------ the window
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Begin: record from here if the schedule says so for step 0."""
        if self._running:
            raise RuntimeError("Profiler is already started")
        self.current_action = self.schedule(self.step_num)
        if self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._begin()
        self._running = True
        self._mark_step()

    def stop(self) -> None:
        """End: the window's results go to ``profiler`` (and ``on_trace_ready``)."""
        if not self._running:
            return
        self._running = False
        if self._recording is not None:
            self._close_step()
            self._end(save=True)

    def step(self) -> None:
        """Mark the end of a training step: the schedule moves on (closing and handing over
        a recorded window, opening the next)."""
        if not self._running:
            return
        self._close_step()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if prev == ProfilerAction.RECORD_AND_SAVE or (
                prev in recording and self.current_action not in recording):
            self._end(save=True)
        if self.current_action in recording and self._recording is None:
            self._begin()
        self._mark_step()

    def _mark_step(self) -> None:
        self._step_start = now_ns() if self._recording is not None and self.record_steps \
            else None

    def _close_step(self) -> None:
        if self._recording is not None and self._step_start is not None:
            self._recording.add(f"ProfilerStep#{self.step_num}", self._step_start, now_ns(),
                                "user_annotation")
        self._step_start = None

    def _begin(self) -> None:
        if ACTIVE[0] is not None:
            raise RuntimeError("Profiler is already enabled: jitgrad records one profiling "
                               "window at a time")
        rec = Recording(self.record_shapes, self.with_stack, self.profile_memory,
                        self.with_flops)
        instruments.install()
        ACTIVE[0] = rec
        self._recording = rec

    def _end(self, save: bool) -> None:
        rec, self._recording = self._recording, None
        if ACTIVE[0] is rec:
            ACTIVE[0] = None
            instruments.uninstall()
        if rec is not None and save:
            self.profiler = Recorder(rec)
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)

    # ------------------------------------------------------------------- results
    def _results(self) -> Recorder:
        if self.profiler is None:
            raise AssertionError("the profiler has recorded nothing yet: results are there "
                                 "after stop() or a scheduled window's last step")
        return self.profiler

    def events(self) -> EventList:
        """Every event of the last finished window."""
        return self._results().function_events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The last window's events averaged per name (and per input shapes with
        ``group_by_input_shape``, per the first ``group_by_stack_n`` frames)."""
        return self._results().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        """Write the last window as a Chrome trace (``.json``; ``.gz``: compressed)."""
        trace = chrome_trace(self.events())
        if self._metadata:
            trace.update(self._metadata)
        write_json(trace, path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Write the stacks of the last window (``with_stack=True``) for flame graphs."""
        if not self.with_stack:
            raise AssertionError("export_stacks() needs with_stack=True")
        self.events().export_stacks(path, metric)

    def add_metadata(self, key: str, value: str) -> None:
        """A string entry in the exported trace's top level."""
        self._metadata[key] = value

    def add_metadata_json(self, key: str, value: str) -> None:
        """A JSON entry (given as its text) in the exported trace's top level."""
        self._metadata[key] = json.loads(value)


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False) -> Callable[[profile], None]:
    """An ``on_trace_ready`` writing each window as
    ``<dir_name>/<worker_name>.<time ms>.pt.trace.json[.gz]`` (what TensorBoard's profiler
    plugin reads)."""
    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json"
        prof.export_chrome_trace(os.path.join(dir_name, name + (".gz" if use_gzip else "")))
    return handler
