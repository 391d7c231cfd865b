"""How many thread-local modes are away from plain eager mode, in one global.

Eager mode's per-op fast paths (:mod:`jitgrad.ops.eager_fast`) must know whether grad mode
is on and whether ``jitgrad.compile`` is tracing on this thread: two ``threading.local``
reads, ~40 ns each. :class:`CountedLocal` keeps :data:`NONDEFAULT` = the number of
(thread, attribute) pairs holding another value than their default (grad mode off on some
thread, a tracer set on some thread), so a fast path reads one list: empty means every
thread is in plain eager mode, this one included; otherwise it reads its thread-locals as
before. A thread that ends away from a default leaves the list non-empty: slower, never wrong.
"""

from __future__ import annotations

import threading

__all__ = ["NONDEFAULT", "CountedLocal"]

#: one item per (thread, attribute) pair of :class:`CountedLocal` states away from their
#: default: empty in plain eager mode (``list.append``/``pop`` are atomic: no lock needed)
NONDEFAULT: list = []
_UNCOUNTED = object()


class CountedLocal(threading.local):
    """A ``threading.local`` whose attributes named in ``DEFAULTS`` (name -> default value)
    count in :data:`NONDEFAULT` while they hold another object than the default (an
    identity test: ``1`` for a default of ``True`` counts, which only costs speed)."""

    DEFAULTS: dict = {}

    def __setattr__(self, name: str, value) -> None:
        default = self.DEFAULTS.get(name, _UNCOUNTED)
        if default is not _UNCOUNTED:
            away = value is not default
            if away is not (self.__dict__.get(name, default) is not default):
                if away:
                    NONDEFAULT.append(name)
                else:
                    NONDEFAULT.pop()
        super().__setattr__(name, value)
