"""``jitgrad.linalg``: the linear-algebra functions of ``torch.linalg`` jitgrad has.

>>> import jitgrad
>>> jitgrad.linalg.vector_norm(jitgrad.tensor([[3.0, 4.0], [6.0, 8.0]]), dim=1)
tensor([ 5., 10.])
"""

from __future__ import annotations

from .ops.contractions import linalg_cross as cross
from .ops.contractions import multi_dot
from .ops.linalg import matmul
from .ops.norms import vector_norm

__all__ = ["vector_norm", "matmul", "multi_dot", "cross"]
