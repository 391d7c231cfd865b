"""Collectives as ops of a compiled plan.

Under ``jitgrad.compile`` a collective cannot be left to Python code the plan never runs
again: it is recorded as an *effect equation* (``trace.ir.is_effect``) whose function the
plan calls at every call, in its place among the other steps. Passes never drop, merge or
fold an effect equation and fusion never puts one in a loop, so every rank issues its
collectives in the traced order. An allreduce is two equations: ``allreduce_start`` (the
non-blocking allreduce of a flat buffer started, its operands in views of that buffer: the
plan computes them there, ``compiler/placement.py``, else they are copied in) and
``allreduce_wait`` (waited, averaged in place): the work the plan runs between them overlaps
the communication, and whatever reads the result (an optimizer) comes after the wait.

Outside a trace these functions run the collective on the spot, so the same code serves the
eager and the traced call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..tensor import Tensor
from ..trace.effects import in_place, run_effect
from ..trace.state import STATE as _TRACE
from .c10d import ReduceOp, Work, _Group, all_reduce_array, broadcast_array

__all__ = ["PendingAllreduce", "allreduce_start", "allreduce_wait", "broadcast_into"]


class PendingAllreduce:
    """One allreduce site (a DistributedDataParallel bucket): its flat buffer and the views
    of it its operands go into, what its timeout names, the group, and the
    :class:`~jitgrad.distributed.Work` in flight between its start and wait."""

    _jitgrad_guard_by_identity = True  # compiled functions guard it by identity

    def __init__(self, group: _Group, what: str, average: bool, flat: np.ndarray,
                 views: Sequence[np.ndarray]) -> None:
        self.group = group
        self.what = what
        self.average = average
        self.flat = flat
        self.views = list(views)
        self.work: Work | None = None
        self.copied = 0  # operands the last start had to copy into their views

    def start(self, *arrays: np.ndarray) -> np.ndarray:
        """Put ``arrays`` into their views of the flat buffer (nothing to do for those a plan
        computed there: ``placement.py``) and start its allreduce (summing); returns the
        buffer."""
        copied = 0
        for a, view in zip(arrays, self.views):
            if not in_place(a, view):
                np.copyto(view, a)
                copied += 1
        self.copied = copied
        self.work = all_reduce_array(self.flat, ReduceOp.SUM, group=self.group, what=self.what)
        return self.flat

    def wait(self, flat: np.ndarray) -> np.ndarray:
        """Wait for the allreduce started on ``flat`` (a timeout raises, naming ``what``);
        ``flat`` divided by the world size when averaging. Returns ``flat``."""
        work, self.work = self.work, None
        if work is None:
            raise RuntimeError(f"allreduce_wait: no allreduce of {self.what} was started")
        work.wait()
        if self.average:
            np.divide(flat, self.group.size, out=flat)
        return flat


def allreduce_start(site: PendingAllreduce, tensors: Sequence[Tensor],
                    place: bool = True) -> Tensor:
    """Start the allreduce of ``tensors`` in ``site``'s flat buffer (each in its view, where
    a compiled plan computes it when ``place``: no copy); returns the buffer, which only
    :func:`allreduce_wait` may read."""
    return run_effect("allreduce_start", site.start, tensors, site.what,
                      places=site.views if place else None)


def allreduce_wait(site: PendingAllreduce, flat: Tensor) -> Tensor:
    """Wait for ``site``'s allreduce of ``flat``: the summed (or averaged) buffer, in place."""
    return run_effect("allreduce_wait", site.wait, [flat], site.what)


def broadcast_into(tensor: Tensor, src: int, group: _Group, what: str) -> None:
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank: in place when eager; a
    broadcast effect and a traced ``copy_`` under a tracer."""
    tr = _TRACE.tracer
    if tr is None:
        data = tensor._data
        buf = data if data.flags.c_contiguous else np.ascontiguousarray(data)
        broadcast_array(buf.reshape(-1), src, group, what).wait()
        if buf is not data:
            data[...] = buf
        tensor._vc[0] += 1
        return

    def impl(a: np.ndarray) -> np.ndarray:
        buf = np.array(a, order="C")
        broadcast_array(buf.reshape(-1), src, group, what).wait()
        return buf

    tensor.copy_(run_effect("broadcast", impl, [tensor], what))
