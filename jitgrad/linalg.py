"""``jitgrad.linalg``: the linear-algebra functions of ``torch.linalg`` jitgrad has: products
and norms (``matrix_norm`` / ``norm`` with every ``ord``, ``'nuc'`` and the 2-norms through
singular values), ``inv``, ``det``, ``slogdet``, ``solve``, ``solve_triangular``,
``matrix_power``, ``matrix_exp``; the decompositions ``cholesky`` (``cholesky_ex``, and
``inv_ex``, which report failures in ``info``), ``svd`` / ``svdvals``, ``qr``, ``eigh`` /
``eigvalsh``, and ``pinv``, ``lstsq``, ``matrix_rank`` built on them
(:mod:`jitgrad.ops.decompositions`); the LU factorisation ``lu_factor`` / ``lu_factor_ex`` /
``lu``, ``lu_solve`` and ``solve_ex`` (:mod:`jitgrad.ops.lu`); ``householder_product``
(:mod:`jitgrad.ops.householder`); ``cond``, ``vander``, ``diagonal``, ``tensorinv``,
``tensorsolve`` (:mod:`jitgrad.ops.linalg_composites`). All are differentiable with PyTorch's
gradients, for real (float32, float64) matrices and batches of them; a singular matrix
raises :class:`LinAlgError` with PyTorch's message. ``eig`` / ``eigvals`` of general
matrices give complex results (:mod:`jitgrad.ops.eig`); other complex inputs and the
symmetric-indefinite ``ldl_factor`` / ``ldl_factor_ex`` / ``ldl_solve`` are not there.

>>> import jitgrad
>>> jitgrad.linalg.vector_norm(jitgrad.tensor([[3.0, 4.0], [6.0, 8.0]]), dim=1)
tensor([ 5., 10.])
"""

from __future__ import annotations

from .ops.contractions import linalg_cross as cross
from .ops.contractions import multi_dot
from .ops.decompositions import (
    LinAlgError,
    cholesky_ex,
    eigh,
    eigvalsh,
    inv_ex,
    lstsq,
    matrix_exp,
    matrix_rank,
    pinv,
    solve_triangular,
    svdvals,
)
from .ops.decompositions import linalg_qr as qr
from .ops.decompositions import linalg_svd as svd
from .ops.eig import eig, eigvals
from .ops.householder import householder_product
from .ops.linalg import matmul
from .ops.linalg_composites import cond, diagonal, tensorinv, tensorsolve, vander
from .ops.lu import lu, lu_factor, lu_factor_ex, lu_solve, solve_ex
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
from .ops.numpy_names import accept_numpy_names

__all__ = ["vector_norm", "matrix_norm", "norm", "matmul", "multi_dot", "cross", "inv", "det",
           "slogdet", "solve", "cholesky", "matrix_power", "vecdot", "svd", "svdvals", "qr",
           "eigh", "eigvalsh", "eig", "eigvals", "pinv", "lstsq", "matrix_rank", "solve_triangular",
           "matrix_exp", "cholesky_ex", "inv_ex", "LinAlgError", "cond", "vander", "diagonal",
           "tensorinv", "tensorsolve", "solve_ex", "lu_factor", "lu_factor_ex", "lu", "lu_solve",
           "householder_product"]

# NumPy's names (axis=, keepdims=), as PyTorch's parser takes them
accept_numpy_names(globals())
