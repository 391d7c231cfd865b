"""Profiler results as PyTorch gives them: :class:`FunctionEvent` (one recorded call, with its
children), :class:`FunctionEventAvg` (calls of one name averaged) and :class:`EventList`
(``table()``, ``key_averages()``, ``export_chrome_trace()``, ``export_stacks()``).

A recording is a flat list of intervals per thread (``jitgrad._profiling``); the nesting is
rebuilt here from them, so an event's self time is its time less its children's.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Iterable

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList", "Interval", "build_events",
           "chrome_trace", "write_json"]

_ALL_DEVICE_SORTS = ("cuda_time", "cuda_time_total", "self_cuda_time_total", "device_time",
                     "device_time_total", "self_device_time_total", "xpu_time_total")


class Interval:
    """An event's time range, in microseconds from the recording's start."""

    __slots__ = ("start", "end")

    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.end = end

    def elapsed_us(self) -> float:
        """Length of the range in microseconds."""
        return self.end - self.start

    def __repr__(self) -> str:
        return f"Interval(start={self.start}, end={self.end})"


class _Times:
    """What :class:`FunctionEvent` and :class:`FunctionEventAvg` share: averages, and the
    device columns (jitgrad's profiler records host time only: they are zero)."""

    count: int
    cpu_time_total: float

    @property
    def cpu_time(self) -> float:
        """Mean time per call, microseconds."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        """Mean self time per call, microseconds."""
        return self.self_cpu_time_total / self.count if self.count else 0.0

    device_time_total = cuda_time_total = self_device_time_total = 0.0
    self_cuda_time_total = device_time = cuda_time = 0.0
    device_memory_usage = cuda_memory_usage = self_device_memory_usage = 0
    self_cuda_memory_usage = 0


class FunctionEvent(_Times):
    """One recorded call: ``name`` (``aten::mm``, ``nn.Module: Linear``, a
    ``record_function`` label...), its thread, time range, inputs' shapes (with
    ``record_shapes``), Python stack (with ``with_stack``), memory its results allocated
    (with ``profile_memory``), and the events recorded inside it (``cpu_children``)."""

    def __init__(self, id: int, name: str, thread: int, start_us: float, end_us: float,
                 kind: str = "cpu_op", input_shapes: list | None = None,
                 stack: list | None = None, memory: int = 0, flops: int = 0) -> None:
        self.id = id
        self.name = name
        self.thread = thread
        self.time_range = Interval(start_us, end_us)
        self.kind = kind
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.stack = stack if stack is not None else []
        self._own_memory = memory
        self.flops = flops
        self.cpu_children: list[FunctionEvent] = []
        self.cpu_parent: FunctionEvent | None = None
        self.count = 1
        self.device_type = "CPU"
        self.is_async = False
        self.is_legacy = False
        self.node_id = -1
        self.sequence_nr = -1

    @property
    def key(self) -> str:
        """The name events are grouped under."""
        return self.name

    @property
    def trace_name(self) -> str:
        """The name in the chrome trace."""
        return self.name

    @property
    def is_user_annotation(self) -> bool:
        """Whether ``record_function`` made this event."""
        return self.kind == "user_annotation"

    @property
    def cpu_time_total(self) -> float:
        """Microseconds from the call's start to its end."""
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self) -> float:
        """Microseconds not spent in the events recorded inside it."""
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_memory_usage(self) -> int:
        """Bytes the results of this call and of the calls inside it allocated."""
        return self._own_memory + sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_cpu_memory_usage(self) -> int:
        """Bytes this call's own results allocated (its children's not counted)."""
        return self._own_memory

    def __repr__(self) -> str:
        return (f"<FunctionEvent id={self.id} name={self.name} thread={self.thread} "
                f"cpu_time_total={_format_time(self.cpu_time_total)} "
                f"self_cpu_time_total={_format_time(self.self_cpu_time_total)} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage}>")


class FunctionEventAvg(_Times):
    """The calls of one key (a name; with ``group_by_input_shape`` a name and shapes) added
    up: ``count``, ``cpu_time_total``, ``self_cpu_time_total``, memory and flops."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.flops = 0
        self.input_shapes: list | None = None
        self.stack: list | None = None
        self.node_id = -1
        self.is_async = False
        self.is_legacy = False
        self.is_user_annotation = False
        self.device_type = "CPU"
        self.cpu_children: list = []
        self.cpu_parent = None

    def add(self, other, any_key: bool = False) -> FunctionEventAvg:
        """Add an event (or an average) of the same key (``any_key``: of any key, into a
        total)."""
        if self.key is None:
            self.key = other.key
            self.input_shapes = other.input_shapes
            self.stack = other.stack
            self.is_user_annotation = other.is_user_annotation
        elif other.key != self.key and not any_key:
            raise AssertionError(f"adding an event of key {other.key!r} to {self.key!r}")
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.flops += other.flops
        return self

    __iadd__ = add

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time="
                f"{_format_time(self.self_cpu_time_total)} cpu_time="
                f"{_format_time(self.cpu_time_total)} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


class EventList(list):
    """A list of events (or of averages) with PyTorch's reports on it."""

    def __init__(self, *args, profile_memory: bool = False, with_flops: bool = False,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._profile_memory = profile_memory
        self._with_flops = with_flops

    @property
    def self_cpu_time_total(self) -> float:
        """Self time of every event, added: the profiled time, microseconds."""
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes: bool = False,
                     group_by_stack_n: int = 0, group_by_overload_name: bool = False
                     ) -> EventList:
        """One :class:`FunctionEventAvg` per name (and per input shapes, and per the first
        ``group_by_stack_n`` stack frames, where asked), in order of first appearance."""
        groups: dict = {}
        for e in self:
            key = (e.key,)
            if group_by_input_shapes:
                key += (str(e.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(e.stack[:group_by_stack_n])
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg()
            avg.add(e)
        return EventList(groups.values(), profile_memory=self._profile_memory,
                         with_flops=self._with_flops)

    def total_average(self) -> FunctionEventAvg:
        """Every event added into one average keyed ``"Total"``."""
        total = FunctionEventAvg()
        total.key = "Total"
        for e in self:
            total.add(e, any_key=True)
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        """PyTorch's profiler table: one row per event (per key, for ``key_averages()``),
        sorted by ``sort_by`` (``"cpu_time_total"``, ``"self_cpu_time_total"``,
        ``"count"``, ``"cpu_memory_usage"``...; largest first), at most ``row_limit`` rows
        (negative: all), then the profiled time."""
        return _build_table(self, sort_by, row_limit, max_src_column_width,
                            max_name_column_width, max_shapes_column_width, header,
                            top_level_events_only, time_unit)

    def __str__(self) -> str:
        return self.table()

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as a Chrome trace (``chrome://tracing``, Perfetto): one
        complete ("X") event per call, its category, thread, start and duration."""
        write_json(chrome_trace(self), path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Write one line per event recorded with its stack (``with_stack=True``):
        ``outer;...;inner;name value`` -- the input of flame-graph tools."""
        with open(path, "w") as f:
            for e in self:
                if e.stack:
                    frames = ";".join(reversed(e.stack))
                    f.write(f"{frames};{e.name} {int(getattr(e, metric))}\n")


def write_json(obj: dict, path: str) -> None:
    """``obj`` as JSON at ``path`` (gzip-compressed when it ends in ``.gz``)."""
    if path.endswith(".gz"):
        with gzip.open(path, "wt") as f:
            json.dump(obj, f)
    else:
        with open(path, "w") as f:
            json.dump(obj, f)


def chrome_trace(events: Iterable) -> dict:
    """The events as a Chrome trace object (times in microseconds)."""
    pid = os.getpid()
    trace = []
    for e in events:
        item = {"ph": "X", "cat": e.kind, "name": e.name, "pid": pid, "tid": e.thread,
                "ts": e.time_range.start, "dur": e.time_range.elapsed_us(),
                "args": {"External id": e.id}}
        if e.input_shapes:
            item["args"]["Input Dims"] = e.input_shapes
        if e.stack:
            item["args"]["Call stack"] = ";".join(e.stack)
        trace.append(item)
    return {"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms",
            "traceEvents": trace}


# ---------------------------------------------------------------------------- building
_MATMUL_FLOPS = {"aten::mm", "aten::matmul", "aten::bmm", "aten::addmm", "aten::linear",
                 "aten::baddbmm", "aten::addbmm"}


def matmul_flops(name: str, shapes: list) -> int:
    """Multiply-add flops (2 per) of a matrix product from its input shapes, as PyTorch's
    ``with_flops`` counts them; 0 for other ops (jitgrad counts the matmul family only)."""
    if name not in _MATMUL_FLOPS or not shapes:
        return 0
    if name in ("aten::addmm", "aten::baddbmm", "aten::addbmm"):
        shapes = shapes[1:]
    if len(shapes) < 2 or not shapes[0] or not shapes[1]:
        return 0
    a, b = shapes[0], shapes[1]
    if name == "aten::linear":  # weight (out, in): input (..., in)
        return 2 * math.prod(a) * b[0] if len(b) == 2 else 2 * math.prod(a)
    k = a[-1]
    n = b[-1] if len(b) > 1 else 1
    rows = math.prod(a[:-1]) if len(a) > 1 else 1
    batch = math.prod(b[:-2]) if len(b) > 2 and len(a) <= 2 else 1
    return 2 * rows * batch * k * n


def build_events(raw: list, start_ns: int, with_flops: bool = False) -> list:
    """:class:`FunctionEvent` objects from a recording's raw tuples, in start order, each
    linked to its parent (the innermost event of its thread containing it)."""
    events = []
    for i, (name, tid, t0, t1, kind, extra) in enumerate(raw):
        extra = extra or {}
        shapes = extra.get("shapes")
        ev = FunctionEvent(i + 1, name, tid, (t0 - start_ns) / 1e3, (t1 - start_ns) / 1e3,
                           kind, shapes, extra.get("stack"), extra.get("memory", 0),
                           matmul_flops(name, shapes) if with_flops and shapes else 0)
        events.append(ev)
    events.sort(key=lambda e: (e.thread, e.time_range.start, -e.time_range.end))
    stack: list = []
    thread = None
    for ev in events:
        if ev.thread != thread:
            stack, thread = [], ev.thread
        while stack and not (ev.time_range.start >= stack[-1].time_range.start
                             and ev.time_range.end <= stack[-1].time_range.end):
            stack.pop()
        if stack:
            ev.cpu_parent = stack[-1]
            stack[-1].cpu_children.append(ev)
        stack.append(ev)
    events.sort(key=lambda e: (e.time_range.start, e.thread))
    return events


# ------------------------------------------------------------------------------ table
def _format_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_memory(nbytes: int) -> str:
    kb, mb, gb = 1024, 1024 ** 2, 1024 ** 3
    if abs(nbytes) >= gb:
        return f"{nbytes / gb:.2f} Gb"
    if abs(nbytes) >= mb:
        return f"{nbytes / mb:.2f} Mb"
    if abs(nbytes) >= kb:
        return f"{nbytes / kb:.2f} Kb"
    return f"{nbytes} b"


def _flops_unit(values: list) -> tuple:
    top = max(values, default=0)
    for unit, scale in (("PFLOPs", 1e15), ("TFLOPs", 1e12), ("GFLOPs", 1e9),
                        ("MFLOPs", 1e6), ("KFLOPs", 1e3)):
        if top >= scale:
            return unit, scale
    return "FLOPs", 1.0


_SORT_KEYS = {"cpu_time", "cpu_time_total", "self_cpu_time_total", "self_cpu_time", "count",
              "cpu_memory_usage", "self_cpu_memory_usage", "flops", *_ALL_DEVICE_SORTS,
              "device_memory_usage", "cuda_memory_usage", "self_device_memory_usage",
              "self_cuda_memory_usage"}


def _build_table(events: EventList, sort_by, row_limit, max_src_column_width,
                 max_name_column_width, max_shapes_column_width, header,
                 top_level_events_only, time_unit) -> str:
    if sort_by is not None and sort_by not in _SORT_KEYS:
        raise AttributeError(f"'FunctionEventAvg' object has no attribute '{sort_by}'")
    rows = list(events)
    if sort_by is not None:
        rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
    if top_level_events_only:
        rows = [e for e in rows if e.cpu_parent is None]
    total_self = sum(e.self_cpu_time_total for e in events)
    if row_limit is not None and row_limit >= 0:
        rows = rows[:row_limit]
    has_shapes = any(e.input_shapes for e in rows)
    has_stack = any(e.stack for e in rows)
    with_memory = getattr(events, "_profile_memory", False)
    with_flops = getattr(events, "_with_flops", False)
    name_width = max([len(e.key) for e in rows] + [4])
    name_width = min(name_width, max_name_column_width) + 4
    width = 12
    cols = [("Name", name_width)]
    cols += [(h, width) for h in ("Self CPU %", "Self CPU", "CPU total %", "CPU total",
                                  "CPU time avg")]
    if with_memory:
        cols += [("CPU Mem", width), ("Self CPU Mem", width)]
    cols.append(("# of Calls", width))
    if has_shapes:
        shapes_width = min(max(len(str(e.input_shapes)) for e in rows) + 4,
                           max_shapes_column_width)
        cols.append(("Input Shapes", shapes_width))
    flops_unit = None
    if with_flops:
        flops_unit, scale = _flops_unit([e.flops for e in rows])
        cols.append((f"Total {flops_unit}", width))
    if has_stack:
        cols.append(("Source Location", max_src_column_width))

    def fmt_time(us: float) -> str:
        if time_unit == "s":
            return f"{us / 1e6:.3f}s"
        if time_unit == "ms":
            return f"{us / 1e3:.3f}ms"
        if time_unit == "us":
            return f"{us:.3f}us"
        return _format_time(us)

    def cut(text: str, n: int) -> str:
        return text if len(text) <= n - 4 else text[:n - 7] + "..."

    line = "  ".join("-" * w for _, w in cols)
    out = []
    if header is not None:
        out += ["=" * len(line), header]
    out += [line, "  ".join(f"{h:>{w}}" for h, w in cols), line]
    pct = (lambda x: f"{100 * x / total_self:.2f}%") if total_self else (lambda x: "0.00%")
    for e in rows:
        cells = [cut(e.key, name_width), pct(e.self_cpu_time_total),
                 fmt_time(e.self_cpu_time_total), pct(e.cpu_time_total),
                 fmt_time(e.cpu_time_total), fmt_time(e.cpu_time)]
        if with_memory:
            cells += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage)]
        cells.append(str(e.count))
        if has_shapes:
            cells.append(cut(str(e.input_shapes or []), shapes_width))
        if flops_unit is not None:
            cells.append(f"{e.flops / scale:.3f}" if e.flops else "--")
        if has_stack:
            cells.append(cut(e.stack[0] if e.stack else "", max_src_column_width))
        out.append("  ".join(f"{c:>{w}}" for c, (_, w) in zip(cells, cols)))
    out += [line, f"Self CPU time total: {fmt_time(total_self)}", ""]
    return "\n".join(out)
