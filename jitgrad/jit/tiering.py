"""When a call with new shapes traces, and when it runs eagerly first ("shape tiering").

A compiled plan is specialised on its shapes; a call whose tensors have new shapes traces
again (its kernels are shape-generic: a retrace compiles no kernel, but tracing the function
and building its plan take ~20 ms for a small training step, 10-20 eager steps). A training
loop with one batch shape (and a short last batch) pays that once or twice. A workload whose
shapes keep changing -- batches padded to their longest sequence -- would pay it for every
length, and run slower than eager mode until each length had come back enough times.

As a JIT's tiers do, a call with new shapes runs eagerly until eager mode has cost as much
as a retrace would (the "ski rental" rule: never more than twice the best choice in
hindsight), then traces:

* the first two shapes of a kind of call (its argument structure, dtypes, ``requires_grad``,
  grad mode) whose plans serve later calls trace at once, as always: a training loop's
  batches and its short last batch (an optimizer's first step, whose plan serves only that
  call, does not count);
  every trace of a kind but its first (which also compiled the kernels) measures what a
  retrace costs;
* from the third shapes on, a call with shapes not traced yet runs eagerly; once the eager
  calls of those shapes have taken as long as a retrace (the fastest retrace of the kind:
  the rent paid reaches the price), the next call traces;
* a new shape that comes :data:`STREAK` calls in a row traces at its next call: a phase of
  same-shaped calls (an evaluation loop, a benchmark) compiles at once, where lengths drawn
  at random seldom repeat back to back;
* shapes seen only a few times never pay a trace; shapes that recur are compiled after a
  handful of calls.

Eager mode computes what the plan would (the same kernels, the same bits: the contract of
``jitgrad.compile``), so where a call runs changes its speed, never its result.

``compile(dynamic=False)`` traces every new shape at once (as ``torch.compile(dynamic=False)``
recompiles for each), and so does ``compile(fullgraph=True)`` (every call compiled, a graph
break an error at once); ``jitgrad.config.shape_tiering = False`` does for every function.
``lower()`` / ``eager_reason()`` always trace.
"""

from __future__ import annotations

from collections import OrderedDict

from ..trace.pytree import numbers_erased

__all__ = ["ShapeTiering", "shape_kind"]

#: keys of new shapes whose eager calls are counted, at most (oldest forgotten first)
MAX_WAITING = 4096
#: eager calls of one new shape in a row after which it traces (a same-shaped phase)
STREAK = 2


def shape_kind(key: tuple, erased=None) -> tuple:
    """``key`` (a compiled function's call key) without its tensors' shapes and its Python
    numbers (a step counter passed with each batch is the same kind of call); ``erased``:
    ``numbers_erased(key[0])`` if known."""
    treedef, items, grad_enabled, aliasing = key
    return (numbers_erased(treedef) if erased is None else erased,
            tuple(item[1:] for item in items), grad_enabled, aliasing)


class ShapeTiering:
    """Per compiled function: what retraces of each kind cost, what its eager calls cost,
    and how often each new shape has run eagerly (see the module)."""

    def __init__(self) -> None:
        self.traces: dict = {}       # kind -> compiled traces of it
        self.shapes: dict = {}       # kind -> keys (shapes) traced
        self.retrace_s: dict = {}    # kind -> fastest retrace (trace + plan build), seconds
        # key -> [eager calls run for it, their seconds]: the rent paid so far
        self.waiting: OrderedDict = OrderedDict()
        self._paid = None  # the key runs_eagerly just let trace for having paid
        self._last = None  # the key of the last eager call, and how many in a row
        self._streak = 0

    def clear(self) -> None:
        """Forget everything (``CompiledFunction.reset``)."""
        self.traces.clear()
        self.shapes.clear()
        self.retrace_s.clear()
        self.waiting.clear()
        self._last, self._streak = None, 0

    def runs_eagerly(self, key: tuple) -> bool:
        """Whether a call with ``key`` (no entry yet) runs eagerly rather than trace."""
        kind = shape_kind(key)
        retrace = self.retrace_s.get(kind)
        if retrace is None or len(self.shapes.get(kind, ())) < 2:  # (first two shapes)
            return False
        paid = self.waiting.get(key)
        if paid is not None and (paid[1] >= retrace or (
                key == self._last and self._streak >= STREAK)):
            del self.waiting[key]
            self._paid = key
            return False
        return True

    def paid(self, key: tuple) -> bool:
        """Whether ``key`` traces now because its eager calls paid for it (asked once, right
        after :meth:`runs_eagerly` said no)."""
        paid, self._paid = self._paid == key, None
        return paid

    def ran_eagerly(self, key: tuple, seconds: float) -> int:
        """Count an eager call of ``key`` that took ``seconds``; how many it has run."""
        waiting = self.waiting
        paid = waiting.get(key)
        if paid is None:
            paid = waiting[key] = [0, 0.0]
            if len(waiting) > MAX_WAITING:
                waiting.popitem(last=False)
        else:
            waiting.move_to_end(key)
        paid[0] += 1
        paid[1] += seconds
        if key == self._last:
            self._streak += 1
        else:
            self._last, self._streak = key, 1
        return paid[0]

    def traced(self, key: tuple, seconds: float, kept: bool = True) -> None:
        """A trace of ``key`` compiled (its plan built) in ``seconds``; ``kept``: its entry
        serves later calls (not when the traced call changed the state its guards read: an
        optimizer's first step)."""
        kind = shape_kind(key)
        n = self.traces[kind] = self.traces.get(kind, 0) + 1
        if kept:
            self.shapes.setdefault(kind, set()).add(key)
        self.waiting.pop(key, None)
        if n >= 2:  # (the first trace of a kind compiled its kernels: not a retrace)
            best = self.retrace_s.get(kind)
            self.retrace_s[kind] = seconds if best is None else min(best, seconds)
