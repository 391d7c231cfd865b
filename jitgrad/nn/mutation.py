"""A process-wide count of changes to module trees.

Every change to a module that a compiled call's guard reads (an attribute set or deleted,
a parameter, buffer or submodule registered or removed, a hook added or removed, the
``training`` flag) bumps :data:`EPOCH`. A guard that read a module tree at epoch ``e`` and
finds the epoch still ``e`` knows the tree is as it was, without walking it again
(``jit/guards.py``: ~40 us per call for a small MLP, milliseconds for a GPT's tree).

What the count cannot see -- the contents of a mutable attribute (a list, a dict, an array,
an object), or a write straight into ``module.__dict__`` -- is never trusted to it: a tree
holding such an attribute is re-read at every call, as before.

Optimizers have a count of their own, :data:`OPTIM_EPOCH`: jitgrad's ``Optimizer`` keeps
its parameter groups, their parameter lists and its per-parameter state in the tracked
containers below (:class:`OptimList`, :class:`OptimDict`, :class:`OptimState`), and
rebinding any of its attributes bumps it too. (An eager step writing its state does not
make module guards walk their trees again.)
"""

from __future__ import annotations

import sys
from collections import OrderedDict, defaultdict

from .._thread_modes import TRACING
from ..trace.state import STATE as _TRACE

__all__ = ["EPOCH", "bump", "TrackedDict", "TrackedOrderedDict", "TrackedSet", "OPTIM_EPOCH",
           "OptimDict", "OptimList", "OptimState", "OptimHookDict"]

#: The number of module-tree changes so far (a one-element list: read as ``EPOCH[0]``).
EPOCH = [0]
#: The number of changes to optimizers' groups and state so far (read as ``OPTIM_EPOCH[0]``).
OPTIM_EPOCH = [0]


def bump() -> None:
    """Record a change to some module tree."""
    EPOCH[0] += 1


def _bumping(cls, names, epoch: list = EPOCH):
    """``cls`` with each mutating method in ``names`` bumping ``epoch`` first."""
    for name in names:
        base = getattr(cls.__mro__[1], name)

        def method(self, *args, _base=base, **kwargs):
            epoch[0] += 1
            return _base(self, *args, **kwargs)
        method.__name__ = name
        setattr(cls, name, method)
    return cls


_DICT_MUTATORS = ("__setitem__", "__delitem__", "pop", "popitem", "clear", "update",
                  "setdefault", "__ior__")


class TrackedDict(dict):
    """A ``dict`` whose changes bump :data:`EPOCH` (a module's ``_parameters``,
    ``_buffers``, ``_modules``)."""

    __slots__ = ()


class TrackedOrderedDict(OrderedDict):
    """An ``OrderedDict`` whose changes bump :data:`EPOCH` (hook dicts)."""


class TrackedSet(set):
    """A ``set`` whose changes bump :data:`EPOCH` (``_non_persistent_buffers_set``)."""

    __slots__ = ()


_bumping(TrackedDict, _DICT_MUTATORS)
_bumping(TrackedOrderedDict, _DICT_MUTATORS + ("move_to_end",))
_bumping(TrackedSet, ("add", "discard", "remove", "pop", "clear", "update",
                      "difference_update", "intersection_update",
                      "symmetric_difference_update", "__ior__", "__iand__", "__isub__",
                      "__ixor__"))


class OptimDict(dict):
    """A ``dict`` whose changes bump :data:`OPTIM_EPOCH` (a parameter group, a parameter's
    optimizer state)."""

    __slots__ = ()


class OptimList(list):
    """A ``list`` whose changes bump :data:`OPTIM_EPOCH` (``param_groups``, a group's
    ``params``)."""

    __slots__ = ()


class OptimState(defaultdict):
    """The per-parameter state of an optimizer: a ``defaultdict(OptimDict)`` whose changes
    bump :data:`OPTIM_EPOCH`."""

    __slots__ = ()

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(OptimDict, *args, **kwargs)

    def __reduce__(self):  # pickles (and deep-copies) as itself, without the factory
        return (type(self), (), None, None, iter(self.items()))


def _optim_bumping(cls, names, watched=None):
    """``cls`` with each mutating method in ``names`` bumping :data:`OPTIM_EPOCH`, and -- on
    a ``watched`` instance (an optimizer's param groups), called from user code while a
    compiled function is traced (``for g in opt.param_groups: g["lr"] = lr``, written
    through a name the observer cannot follow) -- a graph break before the write: a
    compiled plan would not repeat it. (Per-parameter state a custom optimizer's first step
    makes is not watched: the trace's guards see it, and the next call compiles.)"""
    for name in names:
        base = getattr(cls.__mro__[1], name)

        def method(self, *args, _base=base, _name=name, **kwargs):
            OPTIM_EPOCH[0] += 1
            if TRACING and _TRACE.tracer is not None and watched is not None and \
                    watched(self):
                caller = sys._getframe(1).f_globals.get("__name__", "")
                if caller != "jitgrad" and not caller.startswith("jitgrad."):
                    _TRACE.tracer.graph_break(
                        f"{_name} on an optimizer's param groups (a hyper-parameter set in "
                        "the call, which a plan would not set again)")
            return _base(self, *args, **kwargs)
        method.__name__ = name
        setattr(cls, name, method)
    return cls


class OptimHookDict(OrderedDict):
    """An optimizer's (or the global) hook dict: an ``OrderedDict`` whose changes bump
    :data:`OPTIM_EPOCH`, so a compiled step's guard sees a hook registered or removed."""


def _is_group(d: dict) -> bool:
    return "params" in d  # (a param group; a parameter's state has no such key)


_optim_bumping(OptimDict, _DICT_MUTATORS, _is_group)
_optim_bumping(OptimState, _DICT_MUTATORS)
_optim_bumping(OptimList, ("__setitem__", "__delitem__", "append", "extend", "insert", "pop",
                           "remove", "clear", "sort", "reverse", "__iadd__", "__imul__"),
               lambda lst: True)
_optim_bumping(OptimHookDict, _DICT_MUTATORS + ("move_to_end",))
