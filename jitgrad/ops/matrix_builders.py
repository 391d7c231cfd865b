"""Matrices built from a vector with ops (so differentiable and compilable): ``diagflat``
(the flattened input on a diagonal) and ``vander`` (the Vandermonde matrix of powers,
PyTorch's running product, so its gradient is finite at 0 too)."""

from __future__ import annotations

from .. import dtypes
from ..tensor import Tensor
from .api import api
from .concat import CAT
from .diagonals import DIAGONAL_BACKWARD, diag_embed
from .dispatch import as_tensor_arg
from .products import CUMPROD
from .reorder import FLIP

__all__ = ["diagflat", "vander"]


@api(DIAGONAL_BACKWARD, method="diagflat", export="diagflat")
def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A square matrix with the flattened ``input`` on its diagonal ``offset`` (above the
    main one; below for negative), zeros elsewhere."""
    return diag_embed(as_tensor_arg(input).reshape(-1), offset)


@api(CUMPROD, CAT, FLIP, export="vander")
def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """The Vandermonde matrix of the vector ``x``: column ``j`` is ``x ** (N - 1 - j)``
    (``increasing``: ``x ** j``); ``N`` columns (default ``len(x)``). Integer and bool
    inputs give int64.

    >>> import jitgrad
    >>> jitgrad.vander(jitgrad.tensor([1, 2, 3]))
    tensor([[1, 1, 1],
            [4, 2, 1],
            [9, 3, 1]])
    """
    from ..creation import ones
    from .concat import cat

    x = as_tensor_arg(x, "x")
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0]
    cols = n if N is None else int(N)
    if cols < 0:
        raise RuntimeError("N must be non-negative.")
    dt = x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else dtypes.int64
    x = x.to(dt)
    if cols <= 1:
        out = ones(n, cols, dtype=dt, device=x.device)
    else:
        powers = x.unsqueeze(1).expand(n, cols - 1).cumprod(1)
        out = cat([ones(n, 1, dtype=dt, device=x.device), powers], 1)
    return out if increasing else out.flip(1)
