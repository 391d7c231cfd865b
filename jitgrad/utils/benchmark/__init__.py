"""PyTorch's ``torch.utils.benchmark`` for jitgrad code: :class:`Timer` (``timeit``,
``blocked_autorange``, ``adaptive_autorange``), :class:`Measurement` (median, IQR,
significant figures, warnings) and :class:`Compare` (results side by side).

>>> from jitgrad.utils import benchmark
>>> t = benchmark.Timer("x.sum()", globals={"x": x}, label="sum", description="jitgrad")
>>> print(t.blocked_autorange(min_run_time=0.5))
"""

from __future__ import annotations

from .common import (
    Measurement,
    TaskSpec,
    ordered_unique,
    select_unit,
    set_torch_threads,
    trim_sigfig,
    unit_to_english,
)
from .compare import Compare
from .timer import Language, Timer, timer

__all__ = ["Timer", "Measurement", "TaskSpec", "Compare", "Language", "timer", "select_unit",
           "unit_to_english", "trim_sigfig", "ordered_unique", "set_torch_threads"]
