"""Which thread-local modes are away from plain eager mode, in globals.

Eager mode's per-op fast paths (:mod:`jitgrad.ops.eager_fast`) must know whether
``jitgrad.compile`` is tracing and whether grad mode is on, on this thread: a
``threading.local`` read each, ~40 ns. :class:`CountedLocal` keeps, per such attribute, a
list with one item per thread whose value is away from the default -- :data:`TRACING`
(threads with a tracer set), :data:`GRAD_OFF` (threads with grad mode off),
:data:`AUTOCASTING` (threads autocasting) -- so a fast path
reads a global list: empty means every thread is at the default, this one included; otherwise
it reads its thread-local as before. ``list.append``/``pop`` are atomic, so no lock is needed.
A thread that ends away from a default leaves its item behind: slower, never wrong.
"""

from __future__ import annotations

import threading

__all__ = ["TRACING", "GRAD_OFF", "AUTOCASTING", "CountedLocal"]

#: one item per thread whose ``trace.state.STATE.tracer`` is set (and one while anomaly
#: detection is on: ``autograd.anomaly``; every reader checks the tracer after it)
TRACING: list = []
#: one item per thread whose grad mode (``autograd.grad_mode.STATE.enabled``) is off
GRAD_OFF: list = []
#: one item per thread whose autocast is on and not excluded
#: (``amp.autocast_mode.STATE.active`` set): what autocast's listed functions test
AUTOCASTING: list = []
_UNCOUNTED = (None, None)


class CountedLocal(threading.local):
    """A ``threading.local`` whose attributes named in ``COUNTED`` (name -> (default value,
    list)) keep one item in their list per thread holding another object than the default
    (an identity test: ``1`` for a default of ``True`` counts, which only costs speed)."""

    COUNTED: dict = {}

    def __setattr__(self, name: str, value) -> None:
        default, where = self.COUNTED.get(name, _UNCOUNTED)
        if where is not None:
            away = value is not default
            if away is not (self.__dict__.get(name, default) is not default):
                if away:
                    where.append(name)
                else:
                    where.pop()
        super().__setattr__(name, value)
