"""Triangular parts of matrices: ``tril`` and ``triu`` (batched over leading dims), each an
op whose gradient is the same triangle of the output gradient (``TrilBackward0``,
``TriuBackward0``)."""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .inplace import write_out
from .registry import MOVEMENT, defop

__all__ = ["tril", "triu"]


def _triangle_op(name: str, ref) -> object:
    op = None

    def vjp(g, ins, out, p, n):
        return (call(op, (g,), {"diagonal": p["diagonal"]}),)

    op = defop(name=name, kind=MOVEMENT, inputs=("a",), params=("diagonal",),
               node=f"{name.capitalize()}Backward0",
               ref=lambda a, diagonal: array_namespace(a).ascontiguousarray(ref(a, diagonal)),
               vjp=vjp,
               samples=S.triangle)
    return op


TRIL = _triangle_op("tril", np.tril)
TRIU = _triangle_op("triu", np.triu)


def _triangle(op, name: str, input, diagonal, out) -> Tensor:
    input = as_tensor_arg(input, "input")
    if input._data.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    if isinstance(diagonal, bool) or not isinstance(diagonal, (int, np.integer)):
        raise TypeError(f"{name}(): argument 'diagonal' must be int, not "
                        f"{type(diagonal).__name__}")
    res = call(op, (input,), {"diagonal": int(diagonal)})
    return res if out is None else write_out(out, res, name)


@api(TRIL, method="tril", inplace="tril_", export="tril")
def tril(input: Tensor, diagonal: int = 0, *, out=None) -> Tensor:
    """The lower triangle of the matrices in ``input`` (its last two dims): elements on and
    below the ``diagonal``-th diagonal (0 the main one, positive above it), zeros elsewhere.

    >>> import jitgrad
    >>> jitgrad.ones(3, 3).tril()
    tensor([[1., 0., 0.],
            [1., 1., 0.],
            [1., 1., 1.]])
    """
    return _triangle(TRIL, "tril", input, diagonal, out)


@api(TRIU, method="triu", inplace="triu_", export="triu")
def triu(input: Tensor, diagonal: int = 0, *, out=None) -> Tensor:
    """The upper triangle of the matrices in ``input`` (its last two dims): elements on and
    above the ``diagonal``-th diagonal, zeros elsewhere.

    >>> import jitgrad
    >>> jitgrad.triu(jitgrad.ones(2, 3), diagonal=1)
    tensor([[0., 1., 1.],
            [0., 0., 1.]])
    """
    return _triangle(TRIU, "triu", input, diagonal, out)
