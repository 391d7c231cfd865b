"""``pdist``: the ``p``-norm distances between the rows of a matrix, for each pair
``i < j`` in row-major order, as PyTorch's (the norms are ``linalg.vector_norm``, whose
gradient at a zero distance is PyTorch's)."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor

__all__ = ["pdist"]


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """``||x_i - x_j||_p`` for the rows ``i < j`` of the ``(N, M)`` ``input``: a vector of
    ``N (N - 1) / 2`` distances.

    >>> import jitgrad
    >>> pdist(jitgrad.tensor([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]]))
    tensor([ 5., 10.,  5.])
    """
    from .. import creation
    from ..linalg import vector_norm

    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.is_floating_point():
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    i, j = np.triu_indices(n, 1)
    rows_i = creation.tensor(i.astype(np.int64), device=input.device)
    rows_j = creation.tensor(j.astype(np.int64), device=input.device)
    diff = input.index_select(0, rows_i) - input.index_select(0, rows_j)
    return vector_norm(diff, p, dim=1)
