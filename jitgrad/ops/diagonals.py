"""Diagonals: ``diagonal`` (a view, as PyTorch's: writes through it reach the tensor),
``diag_embed`` and ``fill_diagonal_``.

``diagonal`` is an op whose eager result is the array library's diagonal view (NumPy's is
read-only by default and is made writeable: its base is); its gradient is
``diagonal_backward`` -- zeros of the input's shape with the gradient on that diagonal --
whose own gradient is ``diagonal`` again, so both are differentiable to any order.
``diag_embed`` is ``diagonal_backward`` of a tensor whose last dim becomes the diagonal.
"""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace
from ..shapes import wrap_dim
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .registry import OPAQUE, defop
from .selection import WHERE

__all__ = ["diagonal", "diagonal_backward", "diag_embed", "fill_diagonal_"]


def _view(a, offset: int, dim1: int, dim2: int):
    d = array_namespace(a).diagonal(a, offset, dim1, dim2)
    if isinstance(d, np.ndarray):  # NumPy marks the view read-only; its base is writeable
        flags = np.ndarray.flags.__get__(d)  # (the simulator's arrays show CuPy's flags)
        if not flags.writeable and np.ndarray.flags.__get__(a).writeable:
            flags.writeable = True
    return d


def _diagonal_backward_ref(g, input_shape, offset, dim1, dim2):
    out = array_namespace(g).zeros(tuple(input_shape), g.dtype)
    _view(out, offset, dim1, dim2)[...] = g
    return out


DIAGONAL_BACKWARD = defop(
    name="diagonal_backward", kind=OPAQUE, inputs=("g",),
    params=("input_shape", "offset", "dim1", "dim2"), node="DiagonalBackwardBackward0",
    ref=_diagonal_backward_ref, cast_grads=True,
    vjp=lambda gg, ins, out, p, n: (call(DIAGONAL, (gg,), {
        "offset": p["offset"], "dim1": p["dim1"], "dim2": p["dim2"],
        "input_shape": tuple(p["input_shape"])}),),
    samples=S.diagonal_backward,
    complex="holomorphic")

def _diagonal_vjp(g, ins, out, p, n):
    return (call(DIAGONAL_BACKWARD, (g,), {"input_shape": p["input_shape"],
                                           "offset": p["offset"], "dim1": p["dim1"],
                                           "dim2": p["dim2"]}),)


DIAGONAL = defop(
    name="diagonal", kind=OPAQUE, inputs=("a",), params=("offset", "dim1", "dim2",
                                                         "input_shape"),
    node="DiagonalBackward0", cast_grads=True, vjp=_diagonal_vjp,
    ref=lambda a, offset, dim1, dim2, input_shape=None: _view(a, offset, dim1, dim2),
    samples=S.diagonal,
    complex="holomorphic")


@api(DIAGONAL, method="diagonal", export="diagonal")
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal (``offset`` above the main one; below for negative) of the matrices in
    dims ``dim1`` x ``dim2``, as the last dim of a view of ``input``."""
    input = as_tensor_arg(input)
    nd = input.ndim
    d1, d2 = wrap_dim(dim1, nd), wrap_dim(dim2, nd)  # (fewer than 2 dims: its IndexError)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return call(DIAGONAL, (input,), {"offset": int(offset), "dim1": d1, "dim2": d2,
                                     "input_shape": tuple(input.shape)}, view_of=input)


@api(DIAGONAL_BACKWARD)
def diagonal_backward(grad: Tensor, input_shape, offset: int, dim1: int, dim2: int) -> Tensor:
    """Zeros of ``input_shape`` holding ``grad`` on the diagonal ``diagonal(offset, dim1,
    dim2)`` reads: that function's gradient."""
    nd = len(input_shape)
    return call(DIAGONAL_BACKWARD, (as_tensor_arg(grad),), {
        "input_shape": tuple(input_shape), "offset": int(offset),
        "dim1": wrap_dim(dim1, nd), "dim2": wrap_dim(dim2, nd)})


@api(DIAGONAL_BACKWARD, method="diag_embed", export="diag_embed")
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """A tensor whose diagonals (in dims ``dim1`` x ``dim2``, ``offset`` from the main one)
    hold the last dim of ``input``; zeros elsewhere."""
    input = as_tensor_arg(input)
    nd = input.ndim + 1
    d1, d2 = wrap_dim(dim1, nd), wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] + abs(int(offset))
    rest = list(input.shape[:-1])
    shape = []
    for i in range(nd):
        shape.append(n if i in (d1, d2) else rest.pop(0))
    return call(DIAGONAL_BACKWARD, (input,), {"input_shape": tuple(shape),
                                              "offset": int(offset), "dim1": d1, "dim2": d2})


@api(WHERE)
def fill_diagonal_(self: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """Fill the main diagonal in place (all dims of equal length, or a 2-D matrix; ``wrap``:
    a tall matrix's diagonal restarts every ``cols + 1`` rows, as NumPy's and PyTorch's)."""
    from ..creation import tensor
    from .inplace import apply_inplace
    from .selection import where

    nd = self.ndim
    if nd < 2:
        raise RuntimeError("dimensions must larger than 1")
    if nd > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(tuple(self.shape), dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return apply_inplace(self, where(tensor(mask, device=self.device), fill_value, self))
