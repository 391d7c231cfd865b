"""Cumulative sums along a dim (``cumsum``; ``CumsumBackward0``): floats are added in float64
and each prefix rounded once to the input's dtype, as PyTorch's CPU ``cumsum`` does (its
bits); integers and bools add in int64. The gradient is the reversed cumulative sum of the
output gradient. On CUDA the scan is CuPy's (float64 too; its association differs, so a
prefix may differ from the CPU's in its last bit when rounded)."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..amp.autocast_mode import autocast_op
from ..devices import array_namespace
from ..shapes import wrap_dim
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .inplace import write_out
from .registry import REDUCE, defop

__all__ = ["cumsum"]


def _cumsum_ref(a, dim, dtype):
    xp = array_namespace(a)
    out = np.dtype(dtype)
    if a.ndim == 0:
        return a.astype(out)
    if out.kind == "f":
        return xp.ascontiguousarray(xp.cumsum(a, axis=dim, dtype=np.float64).astype(out))
    return xp.ascontiguousarray(xp.cumsum(a, axis=dim, dtype=out))


def _cumsum_vjp(g, ins, out, p, n):
    if g._data.ndim == 0:
        return (g,)
    from .reorder import flip

    d = p["dim"]
    rev = call(CUMSUM, (flip(g, d),), {"dim": d, "dtype": g._data.dtype})
    return (flip(rev, d),)


CUMSUM = defop(name="cumsum", kind=REDUCE, inputs=("a",), params=("dim", "dtype"),
               node="CumsumBackward0", ref=_cumsum_ref, vjp=_cumsum_vjp, cast_grads=True,
               samples=S.cumsum)


@api(CUMSUM, method="cumsum", inplace="cumsum_", export="cumsum")
@autocast_op
def cumsum(input: Tensor, dim: int, *, dtype=None, out=None) -> Tensor:
    """Cumulative sums of ``input`` along ``dim`` (``dtype``: of the result, and of the
    sums; integer and bool inputs sum to int64 by default, as PyTorch's).

    >>> import jitgrad
    >>> jitgrad.tensor([1.0, 2.0, 3.0]).cumsum(0)
    tensor([1., 3., 6.])
    """
    input = as_tensor_arg(input, "input")
    a = input._data
    if dtype is not None:
        dt = dtypes.to_dtype(dtype).np
    else:
        dt = a.dtype if a.dtype.kind in "fc" else np.dtype(np.int64)
    d = wrap_dim(dim, a.ndim)
    res = call(CUMSUM, (input,), {"dim": d, "dtype": dt})
    return res if out is None else write_out(out, res, "cumsum")
