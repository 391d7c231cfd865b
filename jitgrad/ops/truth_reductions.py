"""``all`` and ``any``: whether every / some element is nonzero, over all dims, one dim or a
tuple of dims (``keepdim`` as the sums'). As PyTorch: the result is bool, except for a
``uint8`` input, whose result is ``uint8`` (0 or 1); NaN counts as true; an empty reduction
is true for ``all``, false for ``any``; ``dim=()`` reduces nothing (each element's truth).

Eagerly one NumPy (CuPy) reduction; under ``jitgrad.compile`` the same answer from ops
(``(x == 0).sum(dims) == 0``), so a traced function's result follows its inputs.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..devices import array_namespace
from ..shapes import wrap_dims
from ..tensor import Tensor, wrap
from ..trace.state import STATE as _TRACE
from .api import api
from .dispatch import as_tensor_arg
from .inplace import write_out
from .selection import EQ, NE
from .sums import SUM

__all__ = ["all", "any"]


def _dims(input: Tensor, dim) -> tuple | None:
    """None (every dim), or the wrapped dims (``()`` when ``dim`` is an empty tuple)."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return ()
    return wrap_dims(dim, input.dim())


def _truth(input: Tensor, dim, keepdim: bool, every: bool, out, name: str) -> Tensor:
    input = as_tensor_arg(input)
    dims = _dims(input, dim)
    if _TRACE.tracer is None:
        fn = np.all if every else np.any
        a = input._data
        res = fn(a, axis=dims, keepdims=keepdim) if dims != () else (a != 0)
        r = wrap(np.asarray(res) if type(res) is np.bool_ else res)
    else:
        hits = input == 0 if every else input != 0
        if dims == ():
            r = ~hits if every else hits
        else:
            count = hits.sum(dim=dims, keepdim=keepdim) if dims is not None else (
                hits.sum().reshape((1,) * input.dim()) if keepdim else hits.sum())
            r = count == 0 if every else count != 0
    if input.dtype is dtypes.uint8:
        r = r.to(dtypes.uint8)
    return r if out is None else write_out(out, r, name)


@api(EQ, NE, SUM, method="all", export="all")
def all(input: Tensor, dim=None, keepdim: bool = False, *, out=None) -> Tensor:  # noqa: A001
    """Whether every element (along ``dim``: an int or a tuple of ints) is nonzero.

    >>> import jitgrad
    >>> jitgrad.tensor([[1, 0], [2, 3]]).all(dim=1)
    tensor([False,  True])
    """
    return _truth(input, dim, keepdim, True, out, "all")


@api(EQ, NE, SUM, method="any", export="any")
def any(input: Tensor, dim=None, keepdim: bool = False, *, out=None) -> Tensor:  # noqa: A001
    """Whether some element (along ``dim``: an int or a tuple of ints) is nonzero."""
    return _truth(input, dim, keepdim, False, out, "any")



def any_true(t: Tensor) -> bool:
    """Whether some element of ``t`` is nonzero, read from its data. While a function is
    traced that reads the traced call's values only: a caller choosing by it computes both
    choices when traced (``median``), stops the trace (``trace.tracer.needs_value``) or
    checks every call (``trace.effects.run_check``)."""
    a = t._data
    return bool(array_namespace(a).any(a))
