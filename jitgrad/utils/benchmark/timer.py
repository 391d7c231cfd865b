"""PyTorch's ``torch.utils.benchmark.Timer`` on jitgrad: ``timeit``'s timer with a thread count
fixed while timing, CUDA synchronised around each block, and ``Measurement`` results."""

from __future__ import annotations

import enum
import statistics
import timeit
from collections.abc import Callable
from typing import Any

from .common import Measurement, TaskSpec, set_torch_threads

__all__ = ["Timer", "Language", "timer"]


class Language(enum.Enum):
    """The statement's language: Python (jitgrad has no C++ front end)."""

    PYTHON = 0
    CPP = 1


def timer() -> float:
    """``time.perf_counter()``, after ``jitgrad.cuda.synchronize()`` when a GPU is in use
    (so a block's time includes its device work)."""
    import sys

    cuda = sys.modules.get("jitgrad.cuda")
    if cuda is not None and cuda.is_available() and cuda.is_initialized():
        cuda.synchronize()
    return timeit.default_timer()


class Timer:
    """Time ``stmt`` (after ``setup``, in ``globals`` plus ``torch`` = jitgrad), PyTorch's
    API: ``timeit(number)``, ``blocked_autorange(min_run_time=0.2)`` and
    ``adaptive_autorange(threshold=0.1)`` return a :class:`Measurement`. While timing,
    jitgrad runs on ``num_threads`` threads (default 1, as PyTorch's Timer)."""

    def __init__(self, stmt: str = "pass", setup: str = "pass", global_setup: str = "",
                 timer: Callable[[], float] = timer, globals: dict[str, Any] | None = None,
                 label: str | None = None, sub_label: str | None = None,
                 description: str | None = None, env: str | None = None,
                 num_threads: int = 1, language: Language | str = Language.PYTHON) -> None:
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError("jitgrad's Timer times Python statements only "
                             f"(language={language!r})")
        if global_setup:
            raise ValueError("global_setup is C++ only.")
        import jitgrad

        self._globals = dict(globals or {})
        self._globals.setdefault("torch", jitgrad)
        self._language = Language.PYTHON
        stmt, setup = _dedent(stmt), _dedent(setup)
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._task_spec = TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup,
                                   label=label, sub_label=sub_label, description=description,
                                   env=env, num_threads=num_threads)

    def _timeit(self, number: int) -> float:
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number: int = 1000000) -> Measurement:
        """``number`` runs timed as one block (after a warm-up of ``number // 100``)."""
        with set_torch_threads(self._task_spec.num_threads):
            self._timeit(max(number // 100, 2))
            return Measurement(number, [self._timeit(number)], self._task_spec)

    def repeat(self, repeat: int = -1, number: int = -1) -> None:
        """Not in PyTorch's Timer either: use :meth:`blocked_autorange`."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback: Callable[[int, float], Any] | None = None) -> None:
        """Not in PyTorch's Timer either: use :meth:`blocked_autorange`."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _estimate_block_size(self, min_run_time: float) -> int:
        """The fewest runs per block (a power of ten) whose time dwarfs the timer's own
        overhead (1e-4 of it and a thousandth of ``min_run_time``), or exceeds
        ``min_run_time``."""
        with set_torch_threads(self._task_spec.num_threads):
            overhead = statistics.median(self._timeit(0) for _ in range(5))
            number = 1
            while True:
                taken = self._timeit(number)
                if (overhead / taken <= 1e-4 and taken >= min_run_time / 1000) or \
                        taken > min_run_time or number * 10 > 2147483647:
                    return number
                number *= 10

    def _measure(self, number: int, stop: Callable[[list], bool], min_run_time: float,
                 max_run_time: float | None, callback) -> list[float]:
        total, times, can_stop = 0.0, [], False
        with set_torch_threads(self._task_spec.num_threads):
            while total < min_run_time or not can_stop:
                spent = self._timeit(number)
                times.append(spent)
                total += spent
                if callback:
                    callback(number, spent)
                can_stop = stop(times)
                if max_run_time and total > max_run_time:
                    break
        return times

    def blocked_autorange(self, callback: Callable[[int, float], Any] | None = None,
                          min_run_time: float = 0.2) -> Measurement:
        """Blocks of a fixed number of runs (see :meth:`_estimate_block_size`) until
        ``min_run_time`` seconds are spent; ``callback(number, seconds)`` after each."""
        number = self._estimate_block_size(min_run_time)
        times = self._measure(number, lambda t: True, min_run_time, None, callback)
        return Measurement(number, times, self._task_spec)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01,
                           max_run_time: float = 10.0,
                           callback: Callable[[int, float], Any] | None = None
                           ) -> Measurement:
        """Blocks until more than 3 of them have an IQR under ``threshold`` of the median
        (and ``min_run_time`` is spent), or ``max_run_time`` is."""
        number = self._estimate_block_size(0.05)

        def stop(times: list) -> bool:
            return len(times) > 3 and Measurement(
                number, times, self._task_spec).meets_confidence(threshold)

        times = self._measure(number, stop, min_run_time, max_run_time, callback)
        return Measurement(number, times, self._task_spec)


def _dedent(code: str) -> str:
    import textwrap

    return textwrap.dedent(code).strip() or "pass"
