"""Flattening of nested arguments/results (tuples, lists, dicts, None, numbers, tensors)."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor

__all__ = ["flatten", "unflatten"]


def flatten(obj) -> tuple[list, tuple]:
    """``(leaves, treedef)``: tensors (NumPy arrays become tensors) are leaves; everything
    else is structure or a static value recorded in the (hashable) treedef."""
    leaves: list = []

    def walk(x):
        if isinstance(x, Tensor):
            leaves.append(x)
            return ("T",)
        if isinstance(x, np.ndarray):
            from ..creation import as_tensor

            leaves.append(as_tensor(x))
            return ("T",)
        if isinstance(x, tuple) and not hasattr(x, "_fields"):
            return ("tuple", tuple(walk(i) for i in x))
        if isinstance(x, tuple):  # namedtuple
            return ("ntuple", type(x), tuple(walk(i) for i in x))
        if isinstance(x, list):
            return ("list", tuple(walk(i) for i in x))
        if isinstance(x, dict):
            keys = tuple(x.keys())
            return ("dict", keys, tuple(walk(x[k]) for k in keys))
        try:
            hash(x)
        except TypeError:
            return ("obj", id(x))  # an unhashable static object: by identity
        return ("const", x)

    return leaves, walk(obj)


_T = ("T",)


def unflatten(treedef: tuple, leaves: list):
    """Rebuild the structure of ``treedef`` with ``leaves`` in order."""
    if treedef == _T:
        return leaves[0]
    if treedef[0] == "tuple" and all(c == _T for c in treedef[1]):
        return tuple(leaves)
    it = iter(leaves)

    def build(d):
        tag = d[0]
        if tag == "T":
            return next(it)
        if tag == "tuple":
            return tuple(build(c) for c in d[1])
        if tag == "ntuple":
            return d[1](*(build(c) for c in d[2]))
        if tag == "list":
            return [build(c) for c in d[1]]
        if tag == "dict":
            return {k: build(c) for k, c in zip(d[1], d[2])}
        if tag == "const":
            return d[1]
        raise TypeError("cannot rebuild an unhashable static object in a compiled output")

    return build(treedef)
