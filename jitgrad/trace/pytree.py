"""Flattening of nested arguments/results (tuples, lists, dicts, None, numbers, tensors)."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor

__all__ = ["flatten", "unflatten"]


def flatten(obj) -> tuple[list, tuple]:
    """``(leaves, treedef)``: tensors (NumPy arrays become tensors) are leaves; everything
    else is structure or a static value recorded in the (hashable) treedef."""
    leaves: list = []
    return leaves, _walk(obj, leaves)


def _walk(x, leaves: list):
    # a module-level recursion: a nested one would be a closure that refers to itself, a
    # reference cycle keeping ``leaves`` (the tensors) alive until the next garbage collection
    if isinstance(x, Tensor):
        leaves.append(x)
        return ("T",)
    if isinstance(x, np.ndarray):
        from ..creation import as_tensor

        leaves.append(as_tensor(x))
        return ("T",)
    if type(x) is tuple:
        return ("tuple", tuple(_walk(i, leaves) for i in x))
    if isinstance(x, tuple):  # a namedtuple, or a subclass such as Size: rebuilt as its type
        tag = "ntuple" if hasattr(x, "_fields") else "subtuple"
        return (tag, type(x), tuple(_walk(i, leaves) for i in x))
    if isinstance(x, list):
        return ("list", tuple(_walk(i, leaves) for i in x))
    if isinstance(x, dict):
        keys = tuple(x.keys())
        return ("dict", keys, tuple(_walk(x[k], leaves) for k in keys))
    try:
        hash(x)
    except TypeError:
        return ("obj", id(x))  # an unhashable static object: by identity
    return ("const", x, _identity(x))


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


def unflatten(treedef: tuple, leaves: list):
    """Rebuild the structure of ``treedef`` with ``leaves`` in order."""
    if treedef == _T:
        return leaves[0]
    if treedef[0] == "tuple" and all(c == _T for c in treedef[1]):
        return tuple(leaves)
    return _build(treedef, iter(leaves))


def _build(d, it):
    tag = d[0]
    if tag == "T":
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
    if tag == "const":
        return d[1]
    raise TypeError("cannot rebuild an unhashable static object in a compiled output")
