"""Reordering elements along dims: ``flip`` (and ``fliplr`` / ``flipud``) and ``roll``. Each
result is a new contiguous tensor, as PyTorch's are, and each gradient is the same
reordering undone (``FlipBackward0``, ``RollBackward0``)."""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace
from ..shapes import keyword_sizes, wrap_dim
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .registry import MOVEMENT, defop

__all__ = ["flip", "fliplr", "flipud", "roll"]


def _flip_ref(a, dims):
    xp = array_namespace(a)
    if not dims or a.ndim == 0:
        return a.copy()
    return xp.ascontiguousarray(xp.flip(a, axis=dims))


FLIP = defop(name="flip", kind=MOVEMENT, inputs=("a",), params=("dims",),
             node="FlipBackward0", ref=_flip_ref,
             vjp=lambda g, ins, out, p, n: (call(FLIP, (g,), {"dims": p["dims"]}),),
             samples=S.flip)


def _int_list(value, name: str, fn: str) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),)
    if isinstance(value, (tuple, list)) and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        return tuple(int(v) for v in value)
    raise TypeError(f"{fn}(): argument '{name}' must be tuple of ints, not "
                    f"{type(value).__name__}")


@api(FLIP, method="flip", export="flip")
def flip(input: Tensor, *args, dims=None) -> Tensor:
    """``input`` with the order of its elements reversed along ``dims`` (a copy).

    >>> import jitgrad
    >>> jitgrad.arange(4).reshape(2, 2).flip(0)
    tensor([[2, 3],
            [0, 1]])
    """
    input = as_tensor_arg(input, "input")
    dims = keyword_sizes(args, dims, "flip", "dims")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    nd = input._data.ndim
    wrapped = tuple(wrap_dim(d, nd) for d in _int_list(list(dims), "dims", "flip"))
    if len(set(wrapped)) != len(wrapped):
        dup = next(d for i, d in enumerate(wrapped) if d in wrapped[:i])
        raise RuntimeError(f"dim {dup} appears multiple times in the list of dims")
    return call(FLIP, (input,), {"dims": tuple(sorted(wrapped))})


@api(FLIP, method="fliplr", export="fliplr")
def fliplr(input: Tensor) -> Tensor:
    """``input`` flipped left to right (its dim 1; at least 2 dims)."""
    if as_tensor_arg(input, "input")._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, 1)


@api(FLIP, method="flipud", export="flipud")
def flipud(input: Tensor) -> Tensor:
    """``input`` flipped upside down (its dim 0; at least 1 dim)."""
    if as_tensor_arg(input, "input")._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, 0)


def _roll_ref(a, shifts, dims):
    xp = array_namespace(a)
    if dims is None or a.ndim == 0:
        return xp.ascontiguousarray(xp.roll(a.reshape(-1), shifts[0]).reshape(a.shape))
    return xp.ascontiguousarray(xp.roll(a, shifts, axis=dims))


ROLL = defop(name="roll", kind=MOVEMENT, inputs=("a",), params=("shifts", "dims"),
             node="RollBackward0", ref=_roll_ref,
             vjp=lambda g, ins, out, p, n: (call(ROLL, (g,), {
                 "shifts": tuple(-s for s in p["shifts"]), "dims": p["dims"]}),),
             samples=S.roll)


@api(ROLL, method="roll", export="roll")
def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """``input`` with its elements shifted cyclically by ``shifts`` along ``dims`` (each a
    number or a tuple of the same length); without ``dims``, over the flattened tensor and
    reshaped back.

    >>> import jitgrad
    >>> jitgrad.arange(5).roll(2)
    tensor([3, 4, 0, 1, 2])
    """
    input = as_tensor_arg(input, "input")
    s = _int_list(shifts, "shifts", "roll")
    if dims is None or (isinstance(dims, (tuple, list)) and not dims):
        if len(s) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(s)}, dims:0")
        return call(ROLL, (input,), {"shifts": s, "dims": None})
    d = _int_list(dims, "dims", "roll")
    if len(s) != len(d):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(s)}, "
                           f"dims:{len(d)}")
    nd = input._data.ndim
    return call(ROLL, (input,), {"shifts": s, "dims": tuple(wrap_dim(x, nd) for x in d)})
