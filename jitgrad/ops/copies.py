"""Copies and dtype conversion: clone, contiguous, to_dtype (``tensor.to(dtype)``)."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .api import api
from .dispatch import call
from .registry import MOVEMENT, defop

__all__ = ["clone", "contiguous", "to_dtype"]


CLONE = defop(name="clone", kind=MOVEMENT, inputs=("a",), node="CloneBackward0",
              ref=lambda a: np.array(a, copy=True, order="C"), expr="a", copies=True,
              vjp=lambda g, ins, out, p, n: (g,))


@api(CLONE, method="clone", export="clone")
def clone(input: Tensor, memory_format=None) -> Tensor:
    """A copy that stays in the graph (``memory_format`` is accepted and ignored: jitgrad
    tensors are C-contiguous or views)."""
    return call(CLONE, (input,), None)


@api(CLONE, method="contiguous")
def contiguous(input: Tensor, memory_format=None) -> Tensor:
    """``input`` itself when C-contiguous, else a contiguous copy (``memory_format`` is
    accepted and ignored)."""
    if input._data.flags.c_contiguous:
        return input
    return clone(input)


TO_DTYPE = defop(name="to_dtype", kind=MOVEMENT, inputs=("a",), params=("dtype", "in_dtype"),
                 node="ToCopyBackward0", ref=lambda a, dtype, in_dtype: a.astype(dtype),
                 vjp=lambda g, ins, out, p, n: (to_dtype(g, dtypes.from_numpy_dtype(
                     p["in_dtype"])) if np.dtype(p["in_dtype"]).kind == "f" else None,))


@api(TO_DTYPE)
def to_dtype(input: Tensor, dtype, copy: bool = False) -> Tensor:
    """Convert to ``dtype`` (``input`` itself when already of it, unless ``copy``)."""
    d = dtypes.to_dtype(dtype)
    if input._data.dtype == d.np and not copy:
        return input
    return call(TO_DTYPE, (input,), {"dtype": d.np, "in_dtype": input._data.dtype})
