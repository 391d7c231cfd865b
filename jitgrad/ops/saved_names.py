"""PyTorch's names for what a node saved: ``grad_fn._saved_self``, ``_saved_other``,
``_saved_result``, ``_saved_exponent``, ``_saved_dim``...

A registered op's node (:class:`~jitgrad.ops.registry.OpNode`) answers these from its saved
entries and params. The default follows PyTorch's convention: the first input is ``self``,
the second ``other``, the output ``result``, and op params keep their meaning under
PyTorch's names (``dims`` is ``dim``, the input's ``shape`` is ``self_sym_sizes``); nodes
whose PyTorch names differ are listed in :data:`NAMES`. A saved tensor is unpacked as
backward unpacks it: version-checked, through ``saved_tensors_hooks``' unpack hook, and an
error once the graph was freed. A name the node does not have is an ``AttributeError``.
"""

from __future__ import annotations

import math

__all__ = ["saved_attribute", "NAMES"]

IN0, IN1, OUT = ("in", 0), ("in", 1), ("out",)


def _param(key, fn=None):
    return ("param", key, fn)


#: node name -> {PyTorch attribute (without ``_saved_``): source}
NAMES: dict[str, dict] = {
    "PowBackward0": {"self": IN0, "exponent": _param("exponent")},
    "PowBackward1": {"self": IN0, "exponent": IN1, "result": OUT},
    "PowBackward2": {"self": _param("base"), "exponent": IN0, "result": OUT},
    "MmBackward0": {"self": IN0, "mat2": IN1, "self_sym_sizes": ("sizes", 0),
                    "self_sym_strides": ("strides", 0), "mat2_sym_sizes": ("sizes", 1),
                    "mat2_sym_strides": ("strides", 1)},
    "BmmBackward0": {"self": IN0, "mat2": IN1},
    "MvBackward0": {"self": IN0, "vec": IN1},
    "DotBackward0": {"self": IN0, "tensor": IN1},
    "WhereBackward0": {"condition": IN0},
    "AddBackward0": {"alpha": _param("alpha", lambda p: p.get("alpha", 1))},
    "SubBackward0": {"alpha": _param("alpha", lambda p: p.get("alpha", 1))},
    "GeluBackward0": {"self": IN0,
                      "approximate": _param("approx", lambda p: "tanh" if p["approx"] else "none")},
}


def _default(op, key: str):
    if key == "self" and 0 in op.save:
        return IN0
    if key == "other" and op.nin == 2 and 1 in op.save:
        return IN1
    if key == "result" and op.save_out:
        return OUT
    return None


def _from_params(p: dict | None, key: str):
    """``(found, value)`` for a param under PyTorch's name."""
    if not p:
        return False, None
    if key == "dim":
        if "dims" in p:
            return True, tuple(p["dims"])
        if "dim" in p:
            return True, p["dim"]
    if key == "self_sym_sizes":
        shape = p.get("in_shape", p.get("shape"))
        return (shape is not None), (tuple(shape) if shape is not None else None)
    if key == "self_sym_numel" and "shape" in p:
        return True, math.prod(p["shape"])
    if key in p and not key.startswith("_"):
        return True, p[key]
    return False, None


def _number_tensor(v):
    """A number saved as it was (``x * 2``): PyTorch's wrapped-number tensor."""
    from ..creation import tensor
    from ..dtypes import float64, int64

    return tensor(v, dtype=int64 if isinstance(v, int) and not isinstance(v, bool) else float64)


def saved_attribute(node, key: str):
    """The value of ``node._saved_<key>``."""
    from ..autograd.node import FREED_MESSAGE, HookedSaved, unpack

    op = node.op
    src = NAMES.get(type(node).__name__, {}).get(key) or _default(op, key)
    if src is None:
        found, value = _from_params(node.params, key)
        if found:
            return value
        raise AttributeError(f"'{type(node).__name__}' object has no attribute '_saved_{key}'")
    if src[0] == "param":
        p = node.params or {}
        return src[2](p) if src[2] else p[src[1]]
    if src[0] in ("sizes", "strides"):  # of a saved input
        a = saved_attribute(node, ("self", "mat2")[src[1]])._data
        return a.shape if src[0] == "sizes" else tuple(st // a.itemsize for st in a.strides)
    saved = node.saved
    if saved is None:
        if node._freed:
            raise RuntimeError(FREED_MESSAGE)
        raise AttributeError(f"'{type(node).__name__}' object has no attribute '_saved_{key}'")
    e = saved[src[1]] if src[0] == "in" else saved[op.nin]
    if type(e) is tuple:
        return unpack(e, node)
    if type(e) is HookedSaved:
        return e.unpack_for(node)
    return None if e is None else _number_tensor(e)
