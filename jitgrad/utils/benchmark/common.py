"""What a :class:`~jitgrad.utils.benchmark.Timer` measures and returns: :class:`TaskSpec` (the
statement and its labels) and :class:`Measurement` (run times, with median, IQR and the
warnings PyTorch's ``torch.utils.benchmark`` prints)."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import textwrap
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig",
           "ordered_unique", "set_torch_threads"]

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # seconds: no claim finer than 25 ns
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A timed statement with its setup, labels and thread count (no globals)."""

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """``label: sub_label``, else the statement."""
        if self.label is not None:
            return self.label + (f": {self.sub_label}" if self.sub_label else "")
        if "\n" not in self.stmt:
            return self.stmt + (f": {self.sub_label}" if self.sub_label else "")
        sub = f" ({self.sub_label})" if self.sub_label else ""
        return f"stmt:{sub}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self) -> str:
        """The setup as a measurement's summary shows it (nothing for ``pass``)."""
        if self.setup in ("pass", ""):
            return ""
        if "\n" in self.setup:
            return f"setup:\n{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        """Title, description and setup, one per line."""
        parts = [p for p in (self.title, self.description or "", self.setup_str()) if p]
        return "\n".join(f"{p}\n" if "\n" in p else p for p in parts)


_TASK_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


def _quantile(sorted_values: tuple, q: float) -> float:
    """Linear-interpolation quantile (NumPy's and PyTorch's default) of sorted values."""
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclasses.dataclass(repr=False)
class Measurement:
    """Times of one statement: ``raw_times`` (seconds per block of ``number_per_run``
    runs), ``times`` (seconds per run), ``median``, ``mean``, ``iqr``,
    ``significant_figures``, and warnings when the spread is large."""

    number_per_run: int
    raw_times: list[float]
    task_spec: TaskSpec
    metadata: dict | None = None

    def __post_init__(self) -> None:
        self._sorted_times: tuple = ()
        self._warnings: tuple = ()
        self._median = self._mean = self._p25 = self._p75 = -1.0

    def __getattr__(self, name: str) -> Any:
        if name in _TASK_FIELDS:  # stmt, label, num_threads...: the task's
            return getattr(self.task_spec, name)
        raise AttributeError(f"'Measurement' object has no attribute '{name}'")

    @property
    def times(self) -> list[float]:
        """Seconds per run, one per block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        """Median seconds per run."""
        self._lazy_init()
        return self._median

    @property
    def mean(self) -> float:
        """Mean seconds per run."""
        self._lazy_init()
        return self._mean

    @property
    def iqr(self) -> float:
        """Interquartile range of the seconds per run."""
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self) -> int:
        """How many digits of the median the spread supports (1 to 4): from a 90% confidence
        interval of the interquartile points' mean."""
        self._lazy_init()
        n = len(self._sorted_times)
        middle = self._sorted_times[n // 4:math.ceil(3 * n / 4)]
        mean = sum(middle) / len(middle)
        std = math.sqrt(sum((t - mean) ** 2 for t in middle) / len(middle))
        ci = max(1.645 * std / math.sqrt(len(middle)), _MIN_CONFIDENCE_INTERVAL)
        return min(max(math.floor(math.log10(self._median / ci)), 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self) -> bool:
        """Whether the IQR is 10% of the median or more."""
        self._lazy_init()
        return bool(self._warnings)

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        """Whether IQR / median is under ``threshold``."""
        return self.iqr / self.median < threshold

    def _lazy_init(self) -> None:
        if not self.raw_times or self._sorted_times:
            return
        s = self._sorted_times = tuple(sorted(self.times))
        self._median = _quantile(s, 0.5)
        self._mean = sum(s) / len(s)
        self._p25, self._p75 = _quantile(s, 0.25), _quantile(s, 0.75)
        if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
            self._warn("This suggests significant environmental influence.")
        elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
            self._warn("This could indicate system fluctuation.")

    def _warn(self, msg: str) -> None:
        rel = self.iqr / self.median * 100
        self._warnings += (f"  WARNING: Interquartile range is {rel:.1f}% of the median "
                           f"measurement.\n           {msg}",)

    @property
    def title(self) -> str:
        """The task's title."""
        return self.task_spec.title

    @property
    def env(self) -> str:
        """The task's environment label."""
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self) -> str:
        """A row's name in :class:`Compare`: the sub-label, else the statement."""
        return self.task_spec.sub_label or self.task_spec.stmt or "[Unknown]"

    def __repr__(self) -> str:
        self._lazy_init()
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        threads = self.task_spec.num_threads
        lines = [object.__repr__(self), self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}"]
        if n >= 4:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} ({self._p25 / scale:.2f} "
                         f"to {self._p75 / scale:.2f})")
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {threads} "
                     f"thread{'s' if threads > 1 else ''}")
        lines.extend(self._warnings)
        return "\n".join(line for line in "\n".join(lines).strip().splitlines())

    @staticmethod
    def merge(measurements: Iterable[Measurement]) -> list[Measurement]:
        """Replicates of one task merged into one measurement (one run per block; metadata
        dropped)."""
        groups: dict = collections.defaultdict(list)
        for m in measurements:
            groups[m.task_spec].append(m)
        return [Measurement(1, [t for m in group for t in m.times], spec)
                for spec, group in groups.items()]


def select_unit(t: float) -> tuple[str, float]:
    """The unit (``ns``, ``us``, ``ms``, ``s``) and its scale in seconds for showing ``t``."""
    exponent = math.floor(math.log10(t) // 3) if t > 0 else -3
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(exponent, "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


def unit_to_english(u: str) -> str:
    """``us`` -> ``microsecond``."""
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x: float, n: int) -> float:
    """``x`` rounded to ``n`` significant figures."""
    if x == 0:
        return 0.0
    magnitude = math.floor(math.log10(abs(x)))
    scale = 10 ** (magnitude - n + 1)
    return round(x / scale) * scale


def ordered_unique(elements: Iterable) -> list:
    """The distinct elements in order of first appearance."""
    return list(dict.fromkeys(elements))


@contextlib.contextmanager
def set_torch_threads(n: int) -> Iterator[None]:
    """jitgrad's thread count set to ``n`` inside (restored after)."""
    from ...threads import get_num_threads, set_num_threads

    prior = get_num_threads()
    try:
        set_num_threads(n)
        yield
    finally:
        set_num_threads(prior)
