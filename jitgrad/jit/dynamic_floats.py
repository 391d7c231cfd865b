"""Which floats a compiled function reads afresh at every call (``trace/numbers.py``).

One :class:`DynamicFloats` per :class:`~jitgrad.jit.function.CompiledFunction` keeps, per
*kind* of call (its key's treedef with the numbers erased, ``pytree.numbers_erased``):

* the first call's top-level float arguments, the arguments made dynamic (a later call
  brought another value: automatic dynamic, as ``torch.compile``; ``dynamic=True``: from the
  first call), and those a trace needed as values (constants for good);
* the kinds whose traces ran eagerly (no dynamic floats there: nothing to gain).

Float globals and closure cells the function reads itself are the closure guard's
(``ClosureGuard.dynamic`` / ``static``): :meth:`DynamicFloats.closure_view` makes them
dynamic, :meth:`DynamicFloats.swap_closure` gives each a :class:`TracedFloat` while a call
is traced, :func:`restore_swapped` puts the floats back.
"""

from __future__ import annotations

import numpy as np

from ..trace.numbers import DynamicNumbers
from ..trace.pytree import NumberArg, flatten, leaf_counts, numbers_erased

__all__ = ["DynamicFloats", "traced_numbers", "restore_swapped", "FLOATS"]

#: the argument types that may be dynamic (float's arithmetic)
FLOATS = (float, np.float64)


def path_name(path) -> str:
    """``("arg", 1)`` -> ``"argument 1"``, ``("kw", "lr")`` -> ``"lr="``."""
    return f"argument {path[1]}" if path[0] == "arg" else f"{path[1]}="


class DynamicFloats:
    """The dynamic-float state of one compiled function (see the module). ``log(msg)``
    reports a change (``JITGRAD_LOGS=recompiles``)."""

    def __init__(self, dynamic: bool | None, closure, log) -> None:
        self.dynamic = dynamic  # compile(dynamic=): None automatic, True always, False never
        self.closure = closure
        self.log = log
        self.first: dict = {}    # kind -> {path: float.hex()} of the first call
        self.args: dict = {}     # kind -> frozenset of dynamic argument paths
        self.static: dict = {}   # kind -> set of paths a trace needed as values
        self.eager_kinds: set = set()

    def clear(self) -> None:
        self.first.clear()
        self.args.clear()
        self.static.clear()
        self.eager_kinds.clear()

    def key_view(self, args: tuple, kwargs: dict, flat: list, treedef) -> tuple:
        """``(flat, treedef)`` of the call with its dynamic float arguments as leaves
        (``pytree.NumberArg``): read afresh at every call, not frozen into the trace. A
        top-level float argument becomes dynamic once a call of the same kind brings
        another value for it (``dynamic=True``: from the first call), unless a trace needed
        its value (it is then a constant, guarded) or the kind's traces run eagerly."""
        floats = [(("arg", i), a) for i, a in enumerate(args) if type(a) in FLOATS]
        if kwargs:
            floats += [(("kw", k), v) for k, v in kwargs.items() if type(v) in FLOATS]
        if not floats:
            return flat, treedef
        kind = numbers_erased(treedef)
        if kind in self.eager_kinds:
            return flat, treedef
        dynamic = self.args.get(kind, frozenset())
        static = self.static.get(kind, ())
        if self.dynamic:
            want = frozenset(p for p, _ in floats if p not in static)
        else:
            first = self.first.get(kind)
            if first is None:
                first = self.first[kind] = {p: v.hex() for p, v in floats}
            want = dynamic.union(p for p, v in floats if p not in static and
                                 first.get(p) != v.hex())
        if want != dynamic:
            self.args[kind] = want = frozenset(want)
            self.log("float arguments read at every call: "
                     + ", ".join(path_name(p) for p in sorted(want)))
        if not want:
            return flat, treedef
        args = tuple(NumberArg(a) if ("arg", i) in want else a for i, a in enumerate(args))
        if kwargs:
            kwargs = {k: NumberArg(v) if ("kw", k) in want else v for k, v in kwargs.items()}
        return flatten((args, kwargs))

    def need_values(self, key, paths) -> bool:
        """A trace of ``key`` needed the values of dynamic floats ``paths``: calls of its
        kind take them as constants from now on (guarded, as any number). Whether a closure
        slot changed (the caller's generated fast path then no longer applies)."""
        cells = [p[1] for p in paths if p[0] == "closure"]
        if cells:
            self.closure.dynamic.difference_update(cells)
            self.closure.static.update(cells)
            self.log("the trace needed the value of a float global or closure cell: a "
                     "constant from now on")
        paths = [p for p in paths if p[0] != "closure"]
        if paths:
            kind = numbers_erased(key[0])
            self.static.setdefault(kind, set()).update(paths)
            self.args[kind] = self.args.get(kind, frozenset()) - set(paths)
            self.log("the trace needed the value of "
                     + ", ".join(path_name(p) for p in sorted(paths)) + ": a constant from now on")
        return bool(cells)

    def closure_view(self, key, closure_ids: tuple, entries) -> tuple:
        """``(closure_ids, changed)``: the closure state to trace ``key`` with, after making
        float globals and cells dynamic -- those whose change is all that failed the newest
        entry's guard (``entries``: the key's, newest first), or, ``dynamic=True``, every
        float one; never for calls that run eagerly or ``dynamic=False``."""
        if self.dynamic is False or numbers_erased(key[0]) in self.eager_kinds:
            return closure_ids, False
        closure = self.closure
        if self.dynamic:
            slots = closure.float_slots()
        else:
            slots = closure.changed_floats(entries[0].closure_ids, closure_ids) \
                if entries else None
        new = [(id(h), n) for h, n in slots or () if (id(h), n) not in closure.dynamic]
        if not new:
            return closure_ids, False
        closure.dynamic.update(new)
        self.log(f"float globals or closure cells read at every call: {len(closure.dynamic)}")
        return closure.current(), True

    def swap_closure(self, numbers, tracer) -> tuple:
        """``(numbers, swaps)``: the dynamic float globals and cells hold a
        :class:`TracedFloat` each while the call is traced (a plan input reading the slot at
        every call, ``Source`` "scalar"); ``swaps`` for :func:`restore_swapped`."""
        closure = self.closure
        swaps: list = []
        if not closure.dynamic:
            return numbers, swaps
        for holder, name in closure.float_slots():
            slot = (id(holder), name)
            if slot not in closure.dynamic:
                continue
            numbers = numbers or DynamicNumbers()
            if name is None:
                value = holder.cell_contents
                t = tracer.scalar_input(_CellItem(holder), 0, np.float64, name="a closure float")
            else:
                value = holder[name]
                t = tracer.scalar_input(holder, name, np.float64, name=name)
            tf = numbers.number(value, t, ("closure", slot))
            swaps.append((holder, name, tf, value))
            if name is None:
                holder.cell_contents = tf
            else:
                holder[name] = tf
        return numbers, swaps


class _CellItem:
    """A closure cell as a mapping (item 0: its contents), for a ``Source`` "scalar"."""

    __slots__ = ("cell",)

    def __init__(self, cell):
        self.cell = cell

    def __getitem__(self, key):
        return self.cell.cell_contents


def restore_swapped(swaps: list) -> None:
    """Put back the floats :meth:`DynamicFloats.swap_closure` swapped out (a slot the call
    assigned meanwhile keeps the call's value)."""
    while swaps:
        holder, name, tf, value = swaps.pop()
        if name is None:
            if holder.cell_contents is tf:
                holder.cell_contents = value
        elif holder.get(name) is tf:
            holder[name] = value


def traced_numbers(args: tuple, kwargs: dict, flat: list, treedef) -> tuple:
    """``(numbers, args, kwargs)`` for tracing a call of ``treedef``: its dynamic float
    arguments (``("N",)`` leaves) as :class:`TracedFloat` s of their 0-d inputs in ``flat``
    (``numbers`` None when it has none)."""
    numbers = DynamicNumbers()
    arg_tree, kw_tree = treedef[1]
    at = 0
    args = list(args)
    for i, c in enumerate(arg_tree[1]):
        if c == ("N",):
            args[i] = numbers.number(args[i], flat[at], ("arg", i))
        at += leaf_counts(c)
    if kwargs:
        kwargs = dict(kwargs)
        for k, c in zip(kw_tree[1], kw_tree[2]):
            if c == ("N",):
                kwargs[k] = numbers.number(kwargs[k], flat[at], ("kw", k))
            at += leaf_counts(c)
    if not numbers.paths:
        return None, tuple(args), kwargs
    return numbers, tuple(args), kwargs
