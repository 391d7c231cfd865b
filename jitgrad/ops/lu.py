"""LU factorisation with partial pivoting, and what is built on it: ``torch.linalg``'s
``lu_factor`` / ``lu_factor_ex`` / ``lu`` / ``lu_solve`` / ``solve_ex`` and
``torch.lu_unpack``; :func:`singular_info`, the ``info`` PyTorch's singular-matrix errors of
``inv`` / ``solve`` report.

The factorisation (:func:`getrf`) is LAPACK ``getrf``'s, in the array library's row
operations over the whole batch at once: in column ``j`` the pivot is the first row of
largest magnitude (``idamax``), the rows are exchanged, the column below the pivot is scaled
by its reciprocal and the trailing matrix updated. A zero pivot is left in place (nothing is
scaled) and ``info`` is the 1-based column of the first one, as LAPACK's. ``pivots`` are
LAPACK's (1-based, int32): row ``i`` was exchanged with row ``pivots[i] - 1``. float32
updates are made in float64 and rounded once, as the fused multiply-adds of MKL (PyTorch's
LAPACK on the CPU) round them where the CPU has that path (Intel's; MKL on an AMD EPYC
rounds each multiply and add): small float32 factorisations have PyTorch's bits. Otherwise
the rounding differs from a blocked LAPACK's by a few ulp; the pivots are the same but for
near ties.

Gradients: ``lu_factor`` / ``lu_factor_ex`` and ``lu`` are custom autograd Functions (nodes
``LinalgLuFactorExBackward0``, ``LinalgLuBackward0``) whose backward is PyTorch's
``linalg_lu_backward`` (square, wide and tall matrices) written with jitgrad ops, so it is
differentiable again; ``lu_unpack`` is triangles of the factor, ``lu_solve`` two triangular
solves and a row permutation, ``solve_ex`` ``solve`` (or the LU path where a matrix is
singular): their gradients are those ops'. The forward reads the input's values, so under
``jitgrad.compile`` these functions are a graph break (they run eagerly).
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd.function import BackwardCFunction, Function
from ..autograd.node import node_class
from ..devices import array_namespace
from ..tensor import Tensor, wrap
from ..trace.tracer import needs_value
from .decompositions import (
    LinAlgError,
    _batch_str,
    _return_type,
    _type_name,
    _write_outs,
    solve_triangular,
)
from .dispatch import as_tensor_arg

__all__ = ["getrf", "singular_info", "lu_factor", "lu_factor_ex", "lu", "lu_unpack", "lu_solve",
           "solve_ex", "linalg_lu_backward", "lu_factor_ex_backward", "return_linalg_lu_factor",
           "return_linalg_lu_factor_ex", "return_linalg_lu", "return_lu_unpack",
           "return_linalg_solve_ex"]

return_linalg_lu_factor = _return_type("linalg_lu_factor", ("LU", "pivots"))
return_linalg_lu_factor_ex = _return_type("linalg_lu_factor_ex", ("LU", "pivots", "info"))
return_linalg_lu = _return_type("linalg_lu", ("P", "L", "U"))
return_lu_unpack = _return_type("lu_unpack", ("P", "L", "U"))
return_linalg_solve_ex = _return_type("linalg_solve_ex", ("result", "info"))


# ----------------------------------------------------------------------------- arrays
def getrf(a, pivot: bool = True) -> tuple:
    """LAPACK ``getrf`` on each matrix of ``a`` (``(..., m, n)``, float): ``(LU, pivots,
    info)`` arrays, ``LU`` the unit lower factor below the diagonal and the upper one on and
    above it, ``pivots`` ``(..., min(m, n))`` 1-based int32, ``info`` ``(...)`` int32 (the
    1-based column of the first zero pivot, 0: none). ``pivot=False``: no row exchanges
    (``pivots`` are ``1..k``; a zero pivot then divides by zero, as cuSOLVER's)."""
    xp = array_namespace(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    lead = tuple(a.shape[:-2])
    b = math.prod(lead)
    w = xp.array(xp.reshape(a, (b, m, n)), copy=True)
    piv = xp.empty((b, k), dtype=np.int32)
    info = xp.zeros((b,), dtype=np.int32)
    rows = xp.arange(b)
    tiny = np.finfo(a.dtype).tiny
    acc = np.float64 if a.dtype == np.float32 else None
    with np.errstate(all="ignore"):
        for j in range(k):
            if pivot:
                p = j + xp.argmax(xp.abs(w[:, j:, j]), axis=1)
                piv[:, j] = p + 1
                row_j = w[rows, j]  # (a copy: advanced indexing)
                w[rows, j] = w[rows, p]
                w[rows, p] = row_j
            else:
                piv[:, j] = j + 1
            d = w[:, j, j]
            zero = d == 0
            info = xp.where(zero & (info == 0), np.int32(j + 1), info)
            if j + 1 < m:
                col = w[:, j + 1:, j]
                # LAPACK scales by the reciprocal, or divides where that would overflow
                scaled = xp.where((xp.abs(d) >= tiny)[:, None], col * (1 / d)[:, None],
                                  col / d[:, None])
                if pivot:  # a zero pivot of a pivoted column: the column is zero, kept
                    scaled = xp.where(zero[:, None], col, scaled)
                w[:, j + 1:, j] = scaled
                if j + 1 < n:
                    _update(w, j, acc)
    return (w.reshape(lead + (m, n)), piv.reshape(lead + (k,)),
            xp.asarray(info, dtype=np.int32).reshape(lead))


def _update(w, j: int, acc) -> None:
    """The trailing update of column ``j``: ``A22 -= l u^T``. float32 in float64, rounded
    once, as the fused multiply-adds of an optimised LAPACK (MKL's, PyTorch's on the CPU)
    do: its small factorisations then have the same bits."""
    a22 = w[:, j + 1:, j + 1:]
    if acc is None:
        a22 -= w[:, j + 1:, j, None] * w[:, j, None, j + 1:]
    else:
        a22[...] = (a22.astype(acc) - w[:, j + 1:, j, None].astype(acc)
                    * w[:, j, None, j + 1:].astype(acc))


def _lapack_singular(xp, m) -> bool:
    """Whether the array library's LAPACK finds the square matrix ``m`` singular."""
    try:
        with np.errstate(all="ignore"):
            r = xp.linalg.inv(m)
    except np.linalg.LinAlgError:
        return True
    return not bool(xp.isfinite(r).all()) and bool(xp.isfinite(m).all())


def singular_info(a) -> list[int]:
    """LAPACK's ``info`` of each square matrix of ``a`` (C order over the batch): the 1-based
    column of the first zero pivot of its LU factorisation, 0 where there is none. Called
    once the array library's LAPACK found a matrix singular: where :func:`getrf`'s rounding
    leaves a tiny nonzero pivot for one LAPACK rounded to zero, that matrix's smallest
    pivot's column."""
    xp = array_namespace(a)
    n = a.shape[-1]
    lu_, _, info = getrf(a)
    b = math.prod(a.shape[:-2])
    out = [int(v) for v in np.asarray(xp.reshape(info, (b,)).tolist(), dtype=np.int64)]
    if any(out) or n == 0:
        return out
    flat = xp.reshape(a, (b, n, n))
    diag = xp.abs(xp.diagonal(xp.reshape(lu_, (b, n, n)), 0, -2, -1))
    for i in range(flat.shape[0]):
        if _lapack_singular(xp, flat[i]):
            out[i] = int(xp.argmin(diag[i])) + 1
    return out


def _perm_from_pivots(xp, piv, m: int):
    """The row permutation of LAPACK ``pivots`` (``(..., k)``, 1-based): ``perm`` with
    ``(P^T A)[j] = A[perm[j]]`` for ``A = P L U``."""
    lead = tuple(piv.shape[:-1])
    k = piv.shape[-1]
    b = math.prod(lead)
    perm = xp.array(xp.broadcast_to(xp.arange(m), lead + (m,)), copy=True).reshape(b, m)
    p = xp.reshape(piv, (b, k)).astype(np.int64) - 1
    rows = xp.arange(perm.shape[0])
    for i in range(k):
        t = p[:, i]
        held = perm[:, i].copy()
        perm[:, i] = perm[rows, t]
        perm[rows, t] = held
    return perm.reshape(lead + (m,))


def _check_pivots(xp, piv, m: int, message: str) -> None:
    if piv.size and bool(((piv < 1) | (piv > m)).any()):
        raise RuntimeError(message)


# -------------------------------------------------------------------------- backward
def linalg_lu_backward(gL: Tensor | None, gU: Tensor | None, P: Tensor, L: Tensor, U: Tensor,
                       pivot: bool = True) -> Tensor | None:
    """PyTorch's ``linalg_lu_backward`` (real case): the gradient of ``A = P L U`` (``L``
    m x k unit lower, ``U`` k x n upper, ``k = min(m, n)``) for the gradients ``gL``, ``gU``
    of its factors (each ``None`` where unused), written with jitgrad ops."""
    from ..creation import zeros_like
    from .concat import cat

    if gL is None and gU is None:
        return None
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    if m == n:  # P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T
        gA = (L.mT @ gL).tril(-1) if gL is not None else None
        if gU is not None:
            t = (gU @ U.mT).triu()
            gA = t if gA is None else gA + t
        gA = solve_triangular(U.mT, gA, upper=False, left=False)
        gA = solve_triangular(L.mT, gA, upper=True, unitriangular=True)
    elif m < n:  # wide: U = [U1 U2]
        gA = L.mT @ gL if gL is not None else None
        if gU is not None:
            t = gU.triu() @ U.mT
            gA = -t if gA is None else gA - t
        gA = solve_triangular(U.narrow(-1, 0, k).mT, gA.tril(-1), upper=False, left=False)
        if gU is not None:
            gA = cat([gA + gU.narrow(-1, 0, k).triu(), gU.narrow(-1, k, n - k)], -1)
        gA = solve_triangular(L.mT, gA, upper=True, unitriangular=True)
        if gU is None:
            gA = cat([gA, zeros_like(U.narrow(-1, k, n - k))], -1)
    else:  # tall: L = [L1; L2]
        gA = gU @ U.mT if gU is not None else None
        if gL is not None:
            t = L.mT @ gL.tril(-1)
            gA = -t if gA is None else gA - t
        gA = solve_triangular(L.narrow(-2, 0, k).mT, gA.triu(), upper=True, unitriangular=True)
        if gL is not None:
            gA = cat([gA + gL.narrow(-2, 0, k).tril(-1), gL.narrow(-2, k, m - k)], -2)
        gA = solve_triangular(U.mT, gA, upper=False, left=False)
        if gL is None:
            gA = cat([gA, zeros_like(L.narrow(-2, k, m - k))], -2)
    return P @ gA if pivot else gA


def lu_factor_ex_backward(grad: Tensor, LU: Tensor, pivots: Tensor,  # noqa: N803
                          pivot: bool = True) -> Tensor:
    """PyTorch's ``lu_factor_ex_backward``: the gradient of ``A`` from that of its packed
    factor ``LU`` (its strict lower part is ``L``'s, the rest ``U``'s)."""
    P, L, U = lu_unpack(LU, pivots)
    k = min(LU.shape[-2], LU.shape[-1])
    return linalg_lu_backward(grad.narrow(-1, 0, k), grad.narrow(-2, 0, k), P, L, U, pivot)


class _LuFactorEx(Function):
    """``(LU, pivots, info)`` of :func:`getrf`; backward: :func:`lu_factor_ex_backward`."""

    @staticmethod
    def forward(ctx, A: Tensor, pivot: bool):
        needs_value(A, "linalg.lu_factor (a factorisation with pivoting)")
        lu_, piv, info = getrf(A._data, pivot)
        LU, pivots, infos = wrap(lu_), wrap(piv), wrap(info)
        ctx.mark_non_differentiable(pivots, infos)
        ctx.save_for_backward(LU, pivots)
        ctx.pivot = pivot
        return LU, pivots, infos

    @staticmethod
    def backward(ctx, gLU, gpivots, ginfo):
        LU, pivots = ctx.saved_tensors
        return lu_factor_ex_backward(gLU, LU, pivots, ctx.pivot), None


class _Lu(Function):
    """``(P, L, U)`` of :func:`getrf`; backward: :func:`linalg_lu_backward`."""

    @staticmethod
    def forward(ctx, A: Tensor, pivot: bool):
        needs_value(A, "linalg.lu (a factorisation with pivoting)")
        xp = array_namespace(A._data)
        lu_, piv, _ = getrf(A._data, pivot)
        P, L, U = (wrap(x) for x in _unpack_arrays(xp, lu_, piv))
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(P)
        ctx.save_for_backward(P, L, U)
        ctx.pivot = pivot
        return P, L, U

    @staticmethod
    def backward(ctx, gP, gL, gU):
        P, L, U = ctx.saved_tensors
        return linalg_lu_backward(gL, gU, P, L, U, ctx.pivot), None


# PyTorch's node names
_LuFactorEx._backward_cls = node_class("LinalgLuFactorExBackward0", BackwardCFunction)
_Lu._backward_cls = node_class("LinalgLuBackward0", BackwardCFunction)


def _unpack_arrays(xp, lu_, piv) -> tuple:
    """``(P, L, U)`` arrays of a packed factor and its pivots."""
    m, n = lu_.shape[-2:]
    k = min(m, n)
    L = xp.tril(lu_[..., :, :k], -1)
    L[..., xp.arange(k), xp.arange(k)] = 1
    U = xp.triu(lu_[..., :k, :])
    perm = _perm_from_pivots(xp, piv, m)
    P = (xp.arange(m)[:, None] == perm[..., None, :]).astype(lu_.dtype)
    return P, L, U


# -------------------------------------------------------------------------- functions
def _check_lu_input(A: Tensor, name: str, pivot: bool) -> None:
    if A.ndim < 2:
        raise RuntimeError(f"{name}: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(A.shape)} instead")
    if not (A.dtype.is_floating_point and A.dtype.np.itemsize >= 4):
        raise NotImplementedError(f"\"lu_cpu\" not implemented for '{_type_name(A)}'")
    if not pivot and A.device.type == "cpu":
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")


def _lu_factor_message(where: str, k: int) -> str:
    return (f"{where}U[{k},{k}] is zero and using it on lu_solve would result in a division by "
            f"zero. If you still want to perform the factorization, consider calling "
            f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def _raise_for(info: Tensor, A: Tensor, name: str, message, error: type = LinAlgError) -> None:
    """PyTorch's error (``name: (Batch element i): message(code)``) for the first matrix of
    ``A`` whose ``info`` is not 0 (reads the values: a graph break under compile)."""
    needs_value(info, f"{name}'s check of its info")
    for i, code in enumerate(info.reshape(-1).tolist()):
        if code:
            raise error(f"{name}: {_batch_str(A, i)}{message(code)}")


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False,
                 out=None) -> return_linalg_lu_factor_ex:
    """``(LU, pivots, info)``: the LU factorisation with partial pivoting ``A = P L U`` of
    each matrix of ``A`` (``(..., m, n)``) packed as LAPACK's ``getrf`` (``L``'s strict
    lower part and ``U``), its 1-based int32 ``pivots`` and ``info`` (0, or the first zero
    pivot's column), without raising unless ``check_errors`` (``torch.linalg.lu_factor_ex``).
    Differentiable in ``A`` (PyTorch's gradient)."""
    A = as_tensor_arg(A, "A")
    _check_lu_input(A, "torch.lu_factor", pivot)
    r = return_linalg_lu_factor_ex(*_LuFactorEx.apply(A, bool(pivot)))
    if check_errors:
        _raise_for(r.info, A, "torch.linalg.lu_factor_ex", lambda k: _lu_factor_message("", k),
                   RuntimeError)
    if out is not None:
        return return_linalg_lu_factor_ex(*_write_outs(out, r, "linalg.lu_factor_ex"))
    return r


def lu_factor(A: Tensor, *, pivot: bool = True, out=None) -> return_linalg_lu_factor:
    """``(LU, pivots)`` of :func:`lu_factor_ex`, raising PyTorch's error for a matrix with a
    zero pivot (``torch.linalg.lu_factor``)."""
    A = as_tensor_arg(A, "A")
    _check_lu_input(A, "torch.lu_factor", pivot)
    LU, pivots, info = _LuFactorEx.apply(A, bool(pivot))
    _raise_for(info, A, "torch.linalg.lu_factor", lambda k: _lu_factor_message("", k),
               RuntimeError)
    r = return_linalg_lu_factor(LU, pivots)
    if out is not None:
        return return_linalg_lu_factor(*_write_outs(out, r, "linalg.lu_factor"))
    return r


def lu(A: Tensor, *, pivot: bool = True, out=None) -> return_linalg_lu:
    """``(P, L, U)`` with ``A = P @ L @ U`` for each matrix of ``A`` (``(..., m, n)``):
    ``P`` a permutation matrix (m x m), ``L`` unit lower (m x k), ``U`` upper (k x n),
    ``k = min(m, n)`` (``torch.linalg.lu``; a singular matrix raises nothing).
    Differentiable in ``A`` (PyTorch's ``linalg_lu_backward``).

    >>> import jitgrad
    >>> P, L, U = jitgrad.linalg.lu(jitgrad.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> U
    tensor([[3.0000, 4.0000],
            [0.0000, 0.6667]])
    """
    A = as_tensor_arg(A, "A")
    _check_lu_input(A, "linalg.lu", pivot)
    r = return_linalg_lu(*_Lu.apply(A, bool(pivot)))
    if out is not None:
        return return_linalg_lu(*_write_outs(out, r, "linalg.lu"))
    return r


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,  # noqa: N803
              unpack_pivots: bool = True, *, out=None) -> return_lu_unpack:
    """``(P, L, U)`` of a packed LU factorisation (``torch.lu_unpack``, the output of
    :func:`lu_factor`); ``L`` and ``U`` (``P``) are empty without ``unpack_data``
    (``unpack_pivots``). ``L`` and ``U`` are triangles of ``LU_data``: differentiable."""
    from ..creation import empty, eye

    LU, piv = as_tensor_arg(LU_data, "LU_data"), as_tensor_arg(LU_pivots, "LU_pivots")
    if LU.ndim < 2:
        raise RuntimeError(f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got "
                           f"size: {list(LU.shape)} instead")
    if piv.dtype.np != np.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of "
                           "torch.int32 dtype.\nNote: this function is intended to be used with "
                           "the output produced by torch.linalg.lu_factor")
    m, n = LU.shape[-2:]
    k = min(m, n)
    none = empty(0, dtype=LU.dtype, device=LU.device)
    L = U = P = none
    if unpack_data:
        L = LU.narrow(-1, 0, k).tril(-1) + eye(m, k, dtype=LU.dtype, device=LU.device)
        U = LU.narrow(-2, 0, k).triu()
    if unpack_pivots:
        needs_value(piv, "lu_unpack's pivots")
        xp = array_namespace(piv._data)
        _check_pivots(xp, piv._data, m, "pivots passed to lu_unpack must be between 1 and "
                      "LU.size(-2) inclusive.Did you properly pass the result of lu_factor?")
        pv = xp.broadcast_to(piv._data, tuple(LU.shape[:-2]) + tuple(piv.shape[-1:]))
        perm = _perm_from_pivots(xp, pv, m)
        P = wrap((xp.arange(m)[:, None] == perm[..., None, :]).astype(LU.dtype.np))
    r = return_lu_unpack(P, L, U)
    if out is not None:
        return return_lu_unpack(*_write_outs(out, r, "lu_unpack"))
    return r


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True,  # noqa: N803
             adjoint: bool = False, out=None) -> Tensor:
    """``X`` with ``A X = B`` (``left``; else ``X A = B``), or with ``A^T`` for ``adjoint``,
    given the LU factorisation ``(LU, pivots)`` of ``A`` (:func:`lu_factor`); batch dims
    broadcast (``torch.linalg.lu_solve``). Two triangular solves and a row permutation, so
    differentiable in ``LU`` and ``B``."""
    LU, pivots, B = (as_tensor_arg(LU, "LU"), as_tensor_arg(pivots, "pivots"),
                     as_tensor_arg(B, "B"))
    if not LU.dtype.is_floating_point:
        raise RuntimeError(f"torch.linalg.lu_solve: Expected a floating point or complex tensor "
                           f"as input. Got {_type_name(LU)}")
    if LU.dtype != B.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but "
                           f"found LU of type {_type_name(LU)} and B of type {_type_name(B)} "
                           f"instead")
    if pivots.dtype.np != np.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type "
                           "torch.int32")
    if LU.ndim < 2:
        raise RuntimeError("torch.linalg.lu_solve: The input tensor A must have at least 2 "
                           "dimensions.")
    n = LU.shape[-1]
    if LU.shape[-2] != n:
        raise RuntimeError(f"torch.linalg.lu_solve: A must be batches of square matrices, but "
                           f"they are {LU.shape[-2]} by {n} matrices")
    if B.ndim < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 "
                           "dimensions.")
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {B.shape[-2]}x"
                           f"{B.shape[-1]})")
    if pivots.ndim < 1 or pivots.shape[-1] != n:
        raise RuntimeError("linalg.lu_solve: Number of pivots per batch should be same as the "
                           "dimension of the matrix")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise RuntimeError(f"linalg.lu_solve: Expected LU.shape[:-1] and pivots.shape to be the "
                           f"same, but got pivots with shape {list(pivots.shape)} instead")
    if LU.dtype.np.itemsize < 4:
        raise NotImplementedError(f"\"linalg.lu_solve_cpu\" not implemented for "
                                  f"'{_type_name(LU)}'")
    needs_value(pivots, "lu_solve's pivots")
    xp = array_namespace(pivots._data)
    _check_pivots(xp, pivots._data, n, "Pivots given to lu_solve must all be smaller or equal "
                  "to LU.size(-2). Did you properly pass the result of lu_factor?")
    if left:
        X = _lu_solve_left(LU, pivots, B, adjoint)
    else:  # X A = B: A^T X^T = B^T
        X = _lu_solve_left(LU, pivots, B.mT, not adjoint).mT
    if out is not None:
        from .inplace import write_out

        return write_out(out, X, "linalg.lu_solve")
    return X


def _lu_solve_left(LU: Tensor, pivots: Tensor, B: Tensor, adjoint: bool) -> Tensor:  # noqa: N803
    """``A^-1 B`` (``adjoint``: ``A^-T B``) for ``A = P L U`` packed in ``LU``."""
    from .picking import take_along_dim

    n = LU.shape[-1]
    lead = tuple(np.broadcast_shapes(tuple(LU.shape[:-2]), tuple(B.shape[:-2])))
    xp = array_namespace(pivots._data)
    perm = _perm_from_pivots(xp, pivots._data, n)
    if adjoint:  # X = P (L^-T (U^-T B)): the rows of Z put back where P sends them
        inverse = xp.argsort(perm, axis=-1)
        Z = solve_triangular(LU.mT, B, upper=False)
        Z = solve_triangular(LU.mT, Z, upper=True, unitriangular=True)
        return _rows(Z, inverse, lead, take_along_dim)
    Y = _rows(B, perm, lead, take_along_dim)  # P^T B
    Y = solve_triangular(LU, Y, upper=False, unitriangular=True)
    return solve_triangular(LU, Y, upper=True)


def _rows(M: Tensor, order, lead: tuple, take_along_dim) -> Tensor:
    """``M``'s rows in ``order`` (an index array per matrix), batch dims broadcast."""
    n, k = M.shape[-2:]
    xp = array_namespace(order)
    M = M.expand(*lead, n, k) if tuple(M.shape[:-2]) != lead else M
    idx = xp.ascontiguousarray(xp.broadcast_to(order.reshape(order.shape + (1,)),
                                               lead + (n, k)))
    return take_along_dim(M, wrap(idx), -2)


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False,
             out=None) -> return_linalg_solve_ex:
    """``(result, info)``: :func:`jitgrad.linalg.solve`'s ``X`` and LAPACK's ``info`` of
    each matrix of ``A`` (int32: 0, or the first zero pivot of its LU factorisation, where
    ``X`` is inf / NaN) without raising, unless ``check_errors``
    (``torch.linalg.solve_ex``). Differentiable as ``solve``."""
    from ..creation import zeros
    from .matrix_functions import solve

    A, B = as_tensor_arg(A, "A"), as_tensor_arg(B, "B")
    # (which path runs depends on A's values: under jitgrad.compile, a graph break)
    needs_value(A, "linalg.solve_ex (its info depends on the values of A)")
    try:
        X = solve(A, B, left=left)
        info = zeros(*A.shape[:-2], dtype=_int32(), device=A.device)
    except LinAlgError:  # (the checks passed: a singular matrix) the LU path gives inf / NaN
        LU, pivots, info = lu_factor_ex(A)
        if check_errors:
            _raise_for(info, A, "torch.linalg.solve_ex",
                       lambda k: "The solver failed because the input matrix is singular.")
        vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
        X = lu_solve(LU, pivots, B.unsqueeze(-1) if vector else B, left=left)
        X = X.squeeze(-1) if vector else X
    r = return_linalg_solve_ex(X, info)
    if out is not None:
        return return_linalg_solve_ex(*_write_outs(out, r, "linalg.solve_ex"))
    return r


def _int32():
    from .. import dtypes

    return dtypes.int32
