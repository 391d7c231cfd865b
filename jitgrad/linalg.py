"""``jitgrad.linalg``: the linear-algebra functions of ``torch.linalg`` jitgrad has (no
decompositions beyond Cholesky: ``svd``, ``qr``, ``eigh`` are not there).

>>> import jitgrad
>>> jitgrad.linalg.vector_norm(jitgrad.tensor([[3.0, 4.0], [6.0, 8.0]]), dim=1)
tensor([ 5., 10.])
"""

from __future__ import annotations

from .ops.contractions import linalg_cross as cross
from .ops.contractions import multi_dot
from .ops.linalg import matmul
from .ops.matrix_functions import (
    cholesky,
    det,
    inv,
    matrix_norm,
    matrix_power,
    slogdet,
    solve,
    vecdot,
)
from .ops.matrix_functions import linalg_norm as norm
from .ops.norms import vector_norm

__all__ = ["vector_norm", "matrix_norm", "norm", "matmul", "multi_dot", "cross", "inv", "det",
           "slogdet", "solve", "cholesky", "matrix_power", "vecdot"]
