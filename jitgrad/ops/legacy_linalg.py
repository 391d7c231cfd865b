"""PyTorch's linear algebra from before ``torch.linalg``, written with it: ``cholesky``,
``cholesky_solve``, ``cholesky_inverse``, ``triangular_solve``, ``nuclear_norm``,
``frobenius_norm``, ``lu``, ``lu_solve`` (functions and, where PyTorch has them, ``Tensor``
methods); and the top-level names of the LU and Householder functions, exported from here:
``lu_unpack`` (:mod:`jitgrad.ops.lu`), ``geqrf``, ``orgqr``, ``ormqr``
(:mod:`jitgrad.ops.householder`).

Each is ``torch.X``'s signature and checks over the ``torch.linalg`` function that computes
it (``linalg.cholesky``, ``linalg.solve_triangular``, ``linalg.matrix_norm``,
``linalg.vector_norm``), so the gradients are those functions'. The deprecated ones warn as
PyTorch's do. ``cholesky_solve`` and ``cholesky_inverse`` read only the factor's triangle
(as LAPACK does), so the gradient of that factor is on its triangle; PyTorch's formula
also gives values on the other triangle, which the result does not depend on (the two agree
wherever the factor comes from ``cholesky``, whose gradient reads only its triangle).
"""

from __future__ import annotations

import warnings

from ..tensor import Tensor
from .decompositions import _return_type, _type_name
from .householder import geqrf, orgqr, ormqr
from .lu import lu_unpack

__all__ = ["cholesky", "cholesky_solve", "cholesky_inverse", "triangular_solve",
           "nuclear_norm", "frobenius_norm", "lu", "lu_solve", "lu_unpack", "geqrf", "orgqr",
           "ormqr"]

return_triangular_solve = _return_type("triangular_solve", ("solution", "cloned_coefficient"))
return_lu_with_info = _return_type("_lu_with_info", ("LU", "pivots", "info"))


def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """The Cholesky factor of each symmetric positive-definite matrix: lower ``L`` with
    ``A = L L^T``, or with ``upper`` its transpose (deprecated: ``linalg.cholesky``)."""
    from .matrix_functions import cholesky as linalg_cholesky

    warnings.warn(
        "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in "
        "a future PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\n"
        "L = torch.linalg.cholesky(A)\nand\nU = torch.cholesky(A, upper=True)\nshould be "
        "replaced with\nU = torch.linalg.cholesky(A).mH\nThis transform will produce "
        "equivalent results for all valid (symmetric positive definite) inputs.",
        UserWarning, stacklevel=2)
    try:
        return linalg_cholesky(input, upper=upper)
    except RuntimeError as e:  # PyTorch's errors name this function
        msg = str(e)
        if not msg.startswith("linalg.cholesky:"):
            raise
        raise type(e)(msg[len("linalg."):]) from None


def _check_solve(name: str, b: Tensor, A: Tensor) -> None:
    """ATen's checks of ``b`` and ``A`` for a solve: dtypes, square ``A``, matching rows."""
    if b.dtype != A.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{_type_name(b)} and A of type {_type_name(A)} instead.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if A.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"Incompatible matrix sizes for {name}: each A matrix is "
                           f"{A.shape[-2]} by {A.shape[-1]} but each b matrix is "
                           f"{b.shape[-2]} by {b.shape[-1]}")


def _check_matrices(message: str, **tensors: Tensor) -> None:
    """PyTorch's error, ``message`` formatted with ``name`` and ``n``, for the first of
    ``tensors`` with fewer than 2 dims."""
    for name, t in tensors.items():
        if t.dim() < 2:
            raise RuntimeError(message.format(name=name, n=t.dim()))


def _check_float(kernel: str, A: Tensor) -> None:
    if not (A.dtype.is_floating_point and A.dtype.itemsize >= 4):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_type_name(A)}'")


def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """``X`` with ``A X = B`` for ``B = input`` and ``A = L L^T`` given its Cholesky factor
    ``L = input2`` (``upper``: ``A = U^T U``): two triangular solves; batch dims
    broadcast."""
    from .decompositions import solve_triangular

    b, u = input, input2
    _check_matrices("{name} should have at least 2 dimensions, but has {n} dimensions "
                    "instead", b=b, u=u)
    _check_solve("cholesky_solve", b, u)
    _check_float("cholesky_solve_cpu", u)
    if upper:  # U^T (U X) = B
        y = solve_triangular(u.mT, b, upper=False)
        return solve_triangular(u, y, upper=True)
    y = solve_triangular(u, b, upper=False)  # L (L^T X) = B
    return solve_triangular(u.mT, y, upper=True)


def cholesky_inverse(input: Tensor, upper: bool = False) -> Tensor:
    """The inverse of ``A = L L^T`` given its Cholesky factor ``L`` (``upper``:
    ``A = U^T U``): ``L^-T L^-1``."""
    from ..creation import eye
    from .decompositions import solve_triangular

    if input.dim() < 2:
        raise RuntimeError("cholesky_inverse: The input tensor A must have at least 2 "
                           "dimensions.")
    if input.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"cholesky_inverse: A must be batches of square matrices, but they "
                           f"are {input.shape[-2]} by {input.shape[-1]} matrices")
    _check_float("cholesky_inverse_out_cpu", input)
    ident = eye(input.shape[-1], dtype=input.dtype, device=input.device)
    if upper:  # A^-1 = U^-1 U^-T
        inv_u = solve_triangular(input, ident, upper=True)
        return inv_u @ inv_u.mT
    inv_l = solve_triangular(input, ident, upper=False)
    return inv_l.mT @ inv_l


def triangular_solve(input: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> return_triangular_solve:
    """``(solution, cloned_coefficient)``: ``X`` with ``A X = b`` (``transpose``:
    ``A^T X = b``) for the upper (``upper``) or lower triangle of ``A``, and a copy of ``A``
    (both with the broadcast batch dims); deprecated: ``linalg.solve_triangular``."""
    from .decompositions import solve_triangular

    warnings.warn(
        "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand "
        "will be removed in a future PyTorch release.\ntorch.linalg.solve_triangular has its "
        "arguments reversed and does not return a copy of one of the inputs.\nX = "
        "torch.triangular_solve(B, A).solution\nshould be replaced with\nX = "
        "torch.linalg.solve_triangular(A, B).", UserWarning, stacklevel=2)
    b = input
    _check_matrices("torch.triangular_solve: Expected {name} to have at least 2 dimensions, "
                    "but it has {n} dimensions instead", b=b, A=A)
    _check_solve("triangular_solve", b, A)
    coef = A.mT if transpose else A
    x = solve_triangular(coef, b, upper=bool(upper) != bool(transpose),
                         unitriangular=unitriangular)
    batch = tuple(x.shape[:-2])
    return return_triangular_solve(x, A.expand(*batch, *A.shape[-2:]).clone())


def nuclear_norm(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """The sum of the singular values of the matrices over ``dim`` (the last two dims by
    default); ``nuclear_norm(input, keepdim)`` as PyTorch's overload (deprecated:
    ``linalg.matrix_norm(A, 'nuc', dim, keepdim)``)."""
    from .matrix_functions import matrix_norm

    warnings.warn("at::nuclear_norm is deprecated and it is just left for JIT compatibility. "
                  "It will be removed in a future PyTorch release. Please use "
                  "`linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead", UserWarning,
                  stacklevel=2)
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    return matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim)


def frobenius_norm(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """The 2-norm over the (at most two) ``dim`` (deprecated: ``linalg.vector_norm(A, 2.,
    dim, keepdim)``)."""
    from .norms import vector_norm

    warnings.warn("at::frobenius_norm is deprecated and it is just left for JIT "
                  "compatibility. It will be removed in a future PyTorch release. Please use "
                  "`linalg.vector_norm(A, 2., dim, keepdim)` instead", UserWarning,
                  stacklevel=2)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions "
                           f"instead.")
    return vector_norm(input, 2, dims, keepdim)


def lu(A: Tensor, pivot: bool = True, get_infos: bool = False, out=None) -> tuple:
    """``(LU, pivots)`` of :func:`jitgrad.linalg.lu_factor` (``get_infos``: ``(LU, pivots,
    info)`` of ``lu_factor_ex``); a singular matrix raises nothing (deprecated:
    ``linalg.lu_factor`` / ``linalg.lu_factor_ex``)."""
    from .decompositions import _write_outs
    from .lu import lu_factor_ex

    warnings.warn(
        "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex "
        "and will be removed in a future PyTorch release.\nLU, pivots = torch.lu(A, "
        "compute_pivots)\nshould be replaced with\nLU, pivots = torch.linalg.lu_factor(A, "
        "compute_pivots)\nand\nLU, pivots, info = torch.lu(A, compute_pivots, get_infos=True)"
        "\nshould be replaced with\nLU, pivots, info = torch.linalg.lu_factor_ex(A, "
        "compute_pivots)", UserWarning, stacklevel=2)
    r = lu_factor_ex(A, pivot=pivot)
    r = return_lu_with_info(*r) if get_infos else (r.LU, r.pivots)
    if out is not None:
        return type(r)(*_write_outs(out, r, "lu")) if get_infos else tuple(
            _write_outs(out, r, "lu"))
    return r


def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor, *, out=None) -> Tensor:  # noqa: N803
    """``X`` with ``A X = b`` given ``A``'s LU factorisation (deprecated:
    ``linalg.lu_solve(LU_data, LU_pivots, b)``, its arguments reversed)."""
    from .lu import lu_solve as linalg_lu_solve

    warnings.warn(
        "torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a "
        "future PyTorch release.\nNote that torch.linalg.lu_solve has its arguments reversed.\n"
        "X = torch.lu_solve(B, LU, pivots)\nshould be replaced with\nX = "
        "torch.linalg.lu_solve(LU, pivots, B)", UserWarning, stacklevel=2)
    return linalg_lu_solve(LU_data, LU_pivots, b, out=out)
