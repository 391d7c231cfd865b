"""PyTorch's legacy ``torch.autograd.profiler``: ``profile`` as a context manager whose object
is the results (``prof.key_averages().table()``, ``print(prof)``), and ``record_function``.
The recording is :mod:`jitgrad.profiler`'s."""

from __future__ import annotations

from ..profiler import EventList, FunctionEvent, FunctionEventAvg, Recorder, record_function
from ..profiler import profile as _profile

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]


class profile:
    """``with torch.autograd.profiler.profile() as prof:`` -- records while inside (with
    ``enabled=False``, nothing); afterwards ``prof`` holds the events: ``function_events``,
    ``key_averages()``, ``table()``, ``total_average()``, ``self_cpu_time_total``,
    ``export_chrome_trace()``. ``use_cuda`` / ``use_device``: jitgrad measures host time
    only (a warning says so)."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False,
                 use_device: str | None = None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False,
                 use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config=None, acc_events: bool = False,
                 custom_trace_id_callback=None) -> None:
        self.enabled = enabled
        self.entered = False
        self._window = _profile(record_shapes=record_shapes, with_flops=with_flops,
                                profile_memory=profile_memory, with_stack=with_stack,
                                use_cuda=bool(use_cuda or (use_device or "cpu") != "cpu")
                                ) if enabled else None
        self._results: Recorder | None = None

    def __enter__(self) -> profile:
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        if self._window is not None:
            self._window.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._window is not None:
            self._window.stop()
            self._results = self._window.profiler

    def _check_finish(self) -> Recorder:
        if self._results is None:
            raise RuntimeError("Profiler didn't finish running")
        return self._results

    @property
    def function_events(self) -> EventList:
        """Every recorded event, nested."""
        return self._check_finish().function_events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The events averaged per name (and shapes / stack where asked)."""
        return self._check_finish().key_averages(group_by_input_shape, group_by_stack_n)

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        """The events' table (:meth:`EventList.table`)."""
        return self.function_events.table(sort_by, row_limit, max_src_column_width,
                                          max_name_column_width, max_shapes_column_width,
                                          header, top_level_events_only)

    def total_average(self) -> FunctionEventAvg:
        """Every event added into one average."""
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self) -> float:
        """The profiled time, microseconds."""
        return self.function_events.self_cpu_time_total

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as a Chrome trace."""
        self.function_events.export_chrome_trace(path)

    def __str__(self) -> str:
        return self.table()

    __repr__ = __str__
