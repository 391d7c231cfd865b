"""Parts of matrices: ``tril`` and ``triu`` (batched over leading dims), each an op whose
gradient is the same triangle of the output gradient (``TrilBackward0``, ``TriuBackward0``);
``diag`` (a vector's diagonal matrix, a matrix's diagonal) and ``trace``, written with
indexing (their gradients are the indexing ops')."""

from __future__ import annotations

import numpy as np

from .. import devices
from ..amp.autocast_mode import autocast_op
from ..devices import array_namespace
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .indexing import GETITEM, getitem
from .inplace import INDEX_PUT, write_out
from .registry import MOVEMENT, defop

__all__ = ["tril", "triu", "diag", "trace"]


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


def _diagonal_positions(rows: int, cols: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the ``k``-th diagonal of a ``rows x cols`` matrix."""
    n = max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))
    i = np.arange(n, dtype=np.int64)
    return (i, i + k) if k >= 0 else (i - k, i)


@api(GETITEM, INDEX_PUT, method="diag", export="diag")
def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """For a vector: the square matrix with it on the ``diagonal``-th diagonal (0 the main
    one, positive above), zeros elsewhere. For a matrix: that diagonal, as a vector (a copy).

    >>> import jitgrad
    >>> jitgrad.diag(jitgrad.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    input = as_tensor_arg(input, "input")
    a = input._data
    k = int(diagonal)
    if a.ndim == 1:
        n = a.shape[0]
        m = n + abs(k)
        from ..creation import zeros

        out = zeros(m, m, dtype=input.dtype, device=input.device)
        r, c = _diagonal_positions(m, m, k)
        dev = input.device
        out[(wrap_index(r, dev), wrap_index(c, dev))] = input
        return out
    if a.ndim != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {a.ndim}D")
    r, c = _diagonal_positions(a.shape[0], a.shape[1], k)
    dev = input.device
    return getitem(input, (wrap_index(r, dev), wrap_index(c, dev)), "DiagonalBackward0_copy")


def wrap_index(idx: np.ndarray, dev) -> Tensor:
    """Host index array ``idx`` as a constant tensor on ``dev`` (a constant of a traced
    graph, not data it depends on)."""
    from ..creation import const_tensor

    return const_tensor(devices.to_device(idx, dev))


@api(GETITEM, method="trace")  # jitgrad.trace: jitgrad/__init__.py (a package has the name)
@autocast_op
def trace(input: Tensor) -> Tensor:
    """The sum of a matrix's main diagonal."""
    input = as_tensor_arg(input, "input")
    if input._data.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim "
                           f"{input._data.ndim}")
    return diag(input).sum()
