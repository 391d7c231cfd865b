"""Flattening of nested arguments/results (tuples, lists, dicts, None, numbers, tensors).

Arguments and results are flattened alike, except for what a compiled *result* may hold:
a value the plan would hand back as it was at the traced call (a static leaf of the treedef)
must be one that cannot hold that call's tensors or change -- a number, a string, a dtype...
(:data:`STATIC_RESULT_TYPES`). Dataclasses and subclasses of ``list``/``dict`` are rebuilt as
their own types; any other object in a result (a plain object, a closure, a set) raises
:class:`NotRebuildable` (the compiled function runs such calls eagerly).
"""

from __future__ import annotations

import dataclasses
import enum
import types
from collections import defaultdict

import numpy as np

from ..tensor import Tensor
from .numbers import TracedFloat

__all__ = ["flatten", "unflatten", "NotRebuildable", "NumberArg", "number_tensor",
           "STATIC_RESULT_TYPES", "leaf_counts"]


class NotRebuildable(TypeError):
    """A compiled function's result holds an object a plan cannot give back afresh."""


#: the static values a compiled result may hold (everything else is structure or a tensor)
STATIC_RESULT_TYPES = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis),
                       np.dtype, np.generic, type, enum.Enum, range,
                       types.BuiltinFunctionType)


def flatten(obj, result: bool = False) -> tuple[list, tuple]:
    """``(leaves, treedef)``: tensors (NumPy arrays become tensors) are leaves; everything
    else is structure or a static value recorded in the (hashable) treedef. ``result``: obj
    is what a compiled function returned (see the module docstring)."""
    leaves: list = []
    return leaves, _walk(obj, leaves, result)


def _walk(x, leaves: list, result: bool = False):
    # a module-level recursion: a nested one would be a closure that refers to itself, a
    # reference cycle keeping ``leaves`` (the tensors) alive until the next garbage collection
    if isinstance(x, Tensor):
        leaves.append(x)
        return ("T",)
    if type(x) is NumberArg:  # a dynamic float argument: its 0-d float64 tensor
        leaves.append(x.tensor)
        return _N
    if type(x) is TracedFloat:  # a dynamic float returned: its value (it specialises)
        x = x.returned()
    if isinstance(x, np.ndarray):
        if result:
            raise NotRebuildable("a NumPy array")
        from ..creation import as_tensor

        leaves.append(as_tensor(x))
        return ("T",)
    if type(x) is tuple:
        return ("tuple", tuple(_walk(i, leaves, result) for i in x))
    if isinstance(x, tuple):  # a namedtuple, or a subclass such as Size: rebuilt as its type
        tag = "ntuple" if hasattr(x, "_fields") else "subtuple"
        return (tag, type(x), tuple(_walk(i, leaves, result) for i in x))
    if isinstance(x, list):
        if type(x) is list or not result:
            return ("list", tuple(_walk(i, leaves, result) for i in x))
        return ("sublist", type(x), tuple(_walk(i, leaves, result) for i in x))
    if isinstance(x, dict):
        keys = tuple(x.keys())
        kids = tuple(_walk(x[k], leaves, result) for k in keys)
        if type(x) is dict or not result:
            return ("dict", keys, kids)
        factory = x.default_factory if isinstance(x, defaultdict) else None
        return ("subdict", type(x), factory, keys, kids)
    if result:
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            names = tuple(f.name for f in dataclasses.fields(x))
            return ("dataclass", type(x), names,
                    tuple(_walk(getattr(x, n), leaves, result) for n in names))
        if not isinstance(x, STATIC_RESULT_TYPES) and not _is_dtype_or_device(x):
            raise NotRebuildable(f"a {type(x).__name__} object")
    try:
        hash(x)
    except TypeError:
        return ("obj", id(x))  # an unhashable static object: by identity
    return ("const", x, _identity(x))


def numbers_erased(treedef):
    """``treedef`` with its int and float constants replaced by their types: what the
    signatures of calls that differ only in Python numbers share (memoised: asked at every
    call that misses)."""
    try:
        return _ERASED[treedef]
    except (KeyError, TypeError):  # (TypeError: a treedef holding something unhashable)
        pass
    erased = _numbers_erased(treedef)
    try:
        if len(_ERASED) >= 4096:
            _ERASED.clear()
        _ERASED[treedef] = erased
    except TypeError:
        pass
    return erased


_ERASED: dict = {}


def _numbers_erased(treedef):
    if type(treedef) is not tuple or not treedef:
        return treedef
    if treedef == _N:  # a dynamic float: the kind of the same call with plain floats
        return ("number", float)
    if treedef[0] == "const" and (type(treedef[1]) in (int, float) or (
            isinstance(treedef[1], (np.floating, np.integer)))):  # (np.float64(lr) too)
        return ("number", type(treedef[1]))
    return tuple(_numbers_erased(c) if type(c) is tuple else c for c in treedef)


def _is_dtype_or_device(x) -> bool:
    from ..devices import device
    from ..dtypes import DType

    return isinstance(x, (DType, device))


def _identity(x):
    """What tells equal numbers apart: ``2``, ``2.0`` and ``True`` are equal keys to Python
    (as are ``0.0`` and ``-0.0``), but a traced call depends on the type (int * tensor keeps
    its dtype, a float promotes) and on the sign of a zero (``x / -0.0``): the type, and a
    float's exact bits (NaN's too: one key for every NaN)."""
    t = type(x)
    if t is float:
        return t, x.hex()
    return t


_T = ("T",)
_N = ("N",)


class NumberArg:
    """A dynamic float argument as :func:`flatten` takes it (``trace/numbers.py``): a leaf,
    its call's value as a 0-d float64 tensor, tagged ``("N",)`` in the treedef (a key apart
    from a 0-d tensor passed by the caller, whose dtype rules differ)."""

    __slots__ = ("tensor",)

    def __init__(self, value: float):
        self.tensor = number_tensor(value)


def number_tensor(value: float) -> Tensor:
    """A dynamic float argument's 0-d float64 tensor (what a plan reads it from)."""
    from ..tensor import wrap

    return wrap(np.array(value, dtype=np.float64))


def unflatten(treedef: tuple, leaves: list):
    """Rebuild the structure of ``treedef`` with ``leaves`` in order."""
    if treedef == _T:
        return leaves[0]
    if treedef[0] == "tuple" and all(c == _T for c in treedef[1]):
        return tuple(leaves)
    return _build(treedef, iter(leaves))


def _build(d, it):
    tag = d[0]
    if tag == "T" or tag == "N":
        return next(it)
    if tag == "tuple":
        return tuple(_build(c, it) for c in d[1])
    if tag == "ntuple":
        return d[1](*(_build(c, it) for c in d[2]))
    if tag == "subtuple":
        items = [_build(c, it) for c in d[2]]
        try:
            return d[1](items)
        except TypeError:  # (a tuple subclass built from its fields: aminmax, slogdet)
            return d[1](*items)
    if tag == "list":
        return [_build(c, it) for c in d[1]]
    if tag == "dict":
        return {k: _build(c, it) for k, c in zip(d[1], d[2])}
    if tag == "sublist":
        return d[1](_build(c, it) for c in d[2])
    if tag == "subdict":
        items = [(k, _build(c, it)) for k, c in zip(d[3], d[4])]
        return d[1](d[2], items) if d[2] is not None else d[1](items)
    if tag == "dataclass":
        obj = object.__new__(d[1])
        for name, c in zip(d[2], d[3]):
            object.__setattr__(obj, name, _build(c, it))
        return obj
    if tag == "const":
        return d[1]
    raise TypeError("cannot rebuild an unhashable static object in a compiled output")


def leaf_counts(d) -> int:
    """How many leaves (tensors, dynamic numbers) treedef ``d`` holds."""
    tag = d[0]
    if tag == "T" or tag == "N":
        return 1
    kids = _KIDS.get(tag)
    return 0 if kids is None else sum(leaf_counts(c) for c in d[kids])


_KIDS = {"tuple": 1, "list": 1, "ntuple": 2, "subtuple": 2, "sublist": 2, "dict": 2,
         "subdict": 4, "dataclass": 3}  # tag -> where its children are
