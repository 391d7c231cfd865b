"""A process-wide count of changes to module trees.

Every change to a module that a compiled call's guard reads (an attribute set or deleted,
a parameter, buffer or submodule registered or removed, a hook added or removed, the
``training`` flag) bumps :data:`EPOCH`. A guard that read a module tree at epoch ``e`` and
finds the epoch still ``e`` knows the tree is as it was, without walking it again
(``jit/guards.py``: ~40 us per call for a small MLP, milliseconds for a GPT's tree).

What the count cannot see -- the contents of a mutable attribute (a list, a dict, an array,
an object), or a write straight into ``module.__dict__`` -- is never trusted to it: a tree
holding such an attribute is re-read at every call, as before.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["EPOCH", "bump", "TrackedDict", "TrackedOrderedDict", "TrackedSet"]

#: The number of module-tree changes so far (a one-element list: read as ``EPOCH[0]``).
EPOCH = [0]


def bump() -> None:
    """Record a change to some module tree."""
    EPOCH[0] += 1


def _bumping(cls, names):
    """``cls`` with each mutating method in ``names`` bumping :data:`EPOCH` first."""
    for name in names:
        base = getattr(cls.__mro__[1], name)

        def method(self, *args, _base=base, **kwargs):
            EPOCH[0] += 1
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
