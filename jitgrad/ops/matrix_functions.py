"""Matrix functions (``torch.linalg``'s everyday part): ``inv``, ``det``, ``slogdet`` /
``logdet``, ``solve``, ``cholesky``, ``matrix_power``, ``matrix_norm`` / ``norm``, ``vecdot``.

``inv``, ``det``, ``slogdet``, ``solve`` and ``cholesky`` are ops on the array library's
LAPACK calls (NumPy's; CuPy's on a GPU through the same calls) over batches of square
matrices; their VJP rules are written with jitgrad ops (``inv`` itself, products,
triangles), so they are differentiable twice and run on tracers when a compiled function
uses them: ``inv``: ``-A^-T g A^-T``; ``det``: ``g det A^-T``; ``slogdet``'s log: ``g A^-T``;
``solve``: ``gB = A^-T g``, ``gA = -gB X^T``; ``cholesky``: ``L^-H Phi(L^H gL) L^-1``
symmetrised (Murray 2016, PyTorch's). A singular input raises PyTorch's ``LinAlgError``
(``inv``: the first zero pivot of LAPACK's LU factorisation, :mod:`jitgrad.ops.lu`; a batch:
the first singular matrix), a ``cholesky`` input that is not positive-definite its error;
the gradient of ``det`` at a singular matrix raises too
(PyTorch's is the adjugate's, finite: a known difference). ``matrix_norm``'s ``'nuc'`` and
2-norms go through ``svdvals`` (:mod:`jitgrad.ops.decompositions`).
"""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .linalg import MATMUL, matmul
from .registry import OPAQUE, defop

__all__ = ["inv", "det", "slogdet", "logdet", "solve", "cholesky", "matrix_power",
           "matrix_norm", "linalg_norm", "vecdot", "return_slogdet"]


class return_slogdet(tuple):  # noqa: N801 - PyTorch's torch.return_types.slogdet
    """``(sign, logabsdet)`` of :func:`slogdet`."""

    __slots__ = ()

    def __new__(cls, sign, logabsdet):
        return super().__new__(cls, (sign, logabsdet))

    sign = property(lambda self: self[0])
    logabsdet = property(lambda self: self[1])

    def __repr__(self) -> str:
        return f"torch.return_types.slogdet(sign={self[0]!r}, logabsdet={self[1]!r})"


def _square(name: str, a: Tensor, complex_ok: bool = False) -> None:
    s = a.shape
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if s[-1] != s[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{s[-2]} by {s[-1]} matrices")
    if a.dtype.is_complex:
        if complex_ok:
            return
        raise RuntimeError(f"{name}: complex matrices are not supported by jitgrad")
    if not a.dtype.is_floating_point:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {a.dtype.tensor_type.replace('Tensor', '')}")


def _singular_error(name: str, a) -> RuntimeError:
    """PyTorch's ``LinAlgError`` for the matrices ``a`` (a batch) LAPACK found singular, from
    the first one's ``info`` (the first zero pivot of its LU factorisation,
    :func:`jitgrad.ops.lu.singular_info`): ``"linalg.inv: (Batch element i): The diagonal
    element k is zero, ..."``; for a solve (``name`` without ``inv``) ``"...: The solver
    failed because the input matrix is singular."``."""
    from .decompositions import LinAlgError
    from .lu import singular_info

    info = singular_info(a)
    i = next((j for j, k in enumerate(info) if k), 0)
    where = f"(Batch element {i}): " if a.ndim > 2 else ""
    if "inv" in name:
        return LinAlgError(f"{name}: {where}The diagonal element {info[i] or 1} is zero, the "
                           f"inversion could not be completed because the input matrix is "
                           f"singular.")
    return LinAlgError(f"{name}: {where}The solver failed because the input matrix is "
                       f"singular.")


def _inv_ref(a):
    xp = array_namespace(a)
    try:
        out = xp.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular_error("linalg.inv", a) from None
    if not bool(xp.isfinite(out).all()) and bool(xp.isfinite(a).all()):
        raise _singular_error("linalg.inv", a)  # CuPy returns infs/NaNs rather than raising
    return out


INV = defop(name="inv", kind=OPAQUE, inputs=("a",), node="LinalgInvExBackward0",
            ref=_inv_ref, save_out=True, cast_grads=True,
            vjp=lambda g, ins, out, p, n: (-(out.mT @ g @ out.mT),),
            samples=S.square_matrices(2.0), complex="holomorphic")


def _det_ref(a):
    xp = array_namespace(a)
    return xp.asarray(xp.linalg.det(a), dtype=a.dtype)


def _det_vjp(g, ins, out, p, n):
    a, = ins
    from ..trace.state import STATE

    if STATE.tracer is None and bool((out == 0).any()):  # a singular matrix: no inverse
        return (g.unsqueeze(-1).unsqueeze(-1) * _cofactors(a),)
    return ((g * out).unsqueeze(-1).unsqueeze(-1) * inv(a).mT,)


def _cofactors(a: Tensor) -> Tensor:
    """The cofactor matrices of ``a`` (``det(a) * inv(a).mT`` where that exists; the
    derivative of ``det`` also at singular matrices), from its SVD ``U diag(s) Vh``:
    ``det(U) det(Vh) U diag(prod_{j != i} s_j) Vh`` (no division by a zero ``s``)."""
    from .decompositions import linalg_svd
    from .products import _exclusive

    u, s, vh = linalg_svd(a)
    others = _exclusive(s, s.dim() - 1, False) * _exclusive(s, s.dim() - 1, True)
    sign = (det(u) * det(vh)).unsqueeze(-1).unsqueeze(-1)
    return sign * (u * others.unsqueeze(-2)) @ vh


DET = defop(name="det", kind=OPAQUE, inputs=("a",), node="LinalgDetBackward0",
            ref=_det_ref, vjp=_det_vjp, save=(0,), save_out=True, cast_grads=True,
            samples=S.square_matrices(0.0), complex="holomorphic")


def _logabsdet_ref(a):
    xp = array_namespace(a)
    return xp.asarray(xp.linalg.slogdet(a)[1], dtype=a.dtype)  # (a 2-D input: a scalar)


LOGABSDET = defop(name="logabsdet", kind=OPAQUE, inputs=("a",),
                  node="LinalgSlogdetBackward0", ref=_logabsdet_ref, save=(0,),
                  cast_grads=True,
                  vjp=lambda g, ins, out, p, n: (g.unsqueeze(-1).unsqueeze(-1)
                                                 * inv(ins[0]).mT,),
                  samples=S.square_matrices(0.0))


def _sign_of_det_ref(a):
    xp = array_namespace(a)
    return xp.asarray(xp.linalg.slogdet(a)[0], dtype=a.dtype)


SIGN_OF_DET = defop(name="sign_of_det", kind=OPAQUE, inputs=("a",), node=None,
                    ref=_sign_of_det_ref, vjp=None,
                    samples=S.square_matrices(0.0))


def _solve_ref(a, b):
    xp = array_namespace(a)
    try:
        return xp.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular_error("torch.linalg.solve", a) from None


def _solve_vjp(g, ins, out, p, n):
    a, _ = ins
    gb = solve(a.mT, g)
    ga = -(gb @ out.mT) if n[0] else None
    return (ga, gb if n[1] else None)


SOLVE = defop(name="solve", kind=OPAQUE, inputs=("a", "b"), node="LinalgSolveExBackward0",
              ref=_solve_ref, vjp=_solve_vjp, save=(0,), save_out=True, cast_grads=True,
              samples=S.solve)


def _cholesky_ref(a):
    from .decompositions import _cholesky_error  # (PyTorch's message: the failing minor)

    xp = array_namespace(a)
    try:
        out = xp.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise _cholesky_error(a, "linalg.cholesky") from None
    if not bool(xp.isfinite(out).all()):  # CuPy fails with NaNs, not an error; NaN inputs
        err = _cholesky_error(a, "linalg.cholesky")
        if err is not None:
            raise err
    return out


def _cholesky_vjp(g, ins, out, p, n):
    lower = out
    phi = _half_diagonal((lower.mT @ g).tril())
    l_inv = inv(lower)
    ga = l_inv.mT @ phi @ l_inv
    return (0.5 * (ga + ga.mT),)


def _half_diagonal(m: Tensor) -> Tensor:
    """``m`` with its diagonal halved (the Phi of the Cholesky VJP)."""
    from ..creation import eye

    n = m.shape[-1]
    return m * (1.0 - 0.5 * eye(n, dtype=m.dtype, device=m.device))


CHOLESKY = defop(name="cholesky", kind=OPAQUE, inputs=("a",), node="LinalgCholeskyExBackward0",
                 ref=_cholesky_ref, vjp=_cholesky_vjp, save_out=True, cast_grads=True,
                 samples=S.square_matrices(1.0, symmetric=True))


# ---------------------------------------------------------------------------- functions
@api(INV, method="inverse", export="inverse")
def inv(A: Tensor, *, out=None) -> Tensor:
    """The inverse of each square matrix of ``A`` (``torch.linalg.inv``)."""
    A = as_tensor_arg(A, "A")
    _square("linalg.inv", A, complex_ok=True)
    if A.dtype.np.itemsize < 4:
        raise RuntimeError(f"linalg.inv: Low precision dtypes not supported. Got "
                           f"{A.dtype.tensor_type.replace('Tensor', '')}")
    r = call(INV, (A,))
    if out is not None:
        from .inplace import write_out

        return write_out(out, r, "linalg.inv")
    return r


@api(DET, method="det", export="det")
def det(A: Tensor) -> Tensor:
    """The determinant of each square matrix of ``A``."""
    A = as_tensor_arg(A, "A")
    _square("linalg.det", A, complex_ok=True)
    return call(DET, (A,))


@api(LOGABSDET, SIGN_OF_DET, method="slogdet", export="slogdet")
def slogdet(A: Tensor) -> return_slogdet:
    """``(sign, logabsdet)`` of each square matrix's determinant (the log differentiable;
    the sign is not)."""
    A = as_tensor_arg(A, "A")
    _square("linalg.slogdet", A)
    return return_slogdet(call(SIGN_OF_DET, (A,)), call(LOGABSDET, (A,)))


@api(LOGABSDET, method="logdet", export="logdet")
def logdet(A: Tensor) -> Tensor:
    """``log(det(A))``: NaN for a negative determinant, ``-inf`` for zero."""
    from .selection import where

    _square("logdet", as_tensor_arg(A, "A"))
    sign, logabs = slogdet(A)
    return where(sign < 0, float("nan"), logabs)


@api(SOLVE)
def solve(A: Tensor, B: Tensor, *, left: bool = True, out=None) -> Tensor:
    """``X`` with ``A X = B`` (``left``) or ``X A = B``; ``B`` a matrix (batch), or a vector
    (batch) where it has one dim less than ``A``, as PyTorch's rule."""
    A, B = as_tensor_arg(A, "A"), as_tensor_arg(B, "B")
    _square("linalg.solve", A)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    b = B.unsqueeze(-1) if vector else B
    if (b.shape[-2] if left else b.shape[-1]) != A.shape[-1]:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({A.shape[-2]}x{A.shape[-1]} "
                           f"and {b.shape[-2]}x{b.shape[-1]})")
    if vector and not left:
        raise RuntimeError("linalg.solve: Vector broadcasting of the left hand side is not "
                           "supported for left=False. In this case linalg.solve is equivalent "
                           "to B / A.squeeze(-1)")
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found "
                           f"A of type {A.dtype.tensor_type.replace('Tensor', '')} and B of "
                           f"type {B.dtype.tensor_type.replace('Tensor', '')} instead")
    if A.dtype.np.itemsize < 4:
        raise NotImplementedError(f"\"lu_cpu\" not implemented for "
                                  f"'{A.dtype.tensor_type.replace('Tensor', '')}'")
    x = _solve_left(A, b) if left else _solve_left(A.mT, b.mT).mT  # X A = B: A^T X^T = B^T
    x = x.squeeze(-1) if vector else x
    if out is not None:
        from .inplace import write_out

        return write_out(out, x, "linalg.solve")
    return x


def _solve_left(A: Tensor, b: Tensor) -> Tensor:
    """``A^-1 b`` for matrices ``b``, batch dims broadcast."""
    lead = np.broadcast_shapes(tuple(A.shape[:-2]), tuple(b.shape[:-2]))
    a = A.expand(*lead, *A.shape[-2:]) if tuple(A.shape[:-2]) != lead else A
    b = b.expand(*lead, *b.shape[-2:]) if tuple(b.shape[:-2]) != lead else b
    try:
        return call(SOLVE, (a, b))
    except RuntimeError as e:  # PyTorch counts the batch elements of A itself, not broadcast
        if a is A or not str(e).startswith("torch.linalg.solve: (Batch"):
            raise
        raise _singular_error("torch.linalg.solve", A._data) from None


@api(CHOLESKY)
def cholesky(A: Tensor, *, upper: bool = False, out=None) -> Tensor:
    """The Cholesky factor ``L`` (``A = L L^T``) of each symmetric positive-definite matrix
    (``upper``: ``L^T``)."""
    A = as_tensor_arg(A, "A")
    _square("linalg.cholesky", A)
    r = call(CHOLESKY, (A,))
    r = r.mT if upper else r
    if out is not None:
        from .inplace import write_out

        return write_out(out, r, "linalg.cholesky")
    return r


@api(MATMUL, method="matrix_power", export="matrix_power")
def matrix_power(A: Tensor, n: int) -> Tensor:
    """``A`` multiplied by itself ``n`` times (``n < 0``: of its inverse; 0: the identity),
    by repeated squaring."""
    from ..creation import eye

    A = as_tensor_arg(A, "A")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {A.shape[-2] if A.ndim > 1 else 1} by {A.shape[-1]} "
                           f"matrices")
    if n == 0:
        return eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(*A.shape).clone()
    base = inv(A) if n < 0 else A
    k = abs(n)
    result = None
    while k:
        if k & 1:
            result = base if result is None else matmul(result, base)
        k >>= 1
        if k:
            base = matmul(base, base)
    return result


@api(MATMUL)
def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *,
                dtype=None) -> Tensor:
    """A matrix norm over ``dim``: ``'fro'`` (Frobenius), ``'nuc'`` (nuclear: the sum of
    the singular values), ``2`` / ``-2`` (the largest / smallest singular value), ``1`` /
    ``-1`` (max / min column abs-sum), ``inf`` / ``-inf`` (max / min row abs-sum)."""
    A = as_tensor_arg(A, "A")
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    d0, d1 = (d % A.ndim for d in dim)
    if ord == "fro":  # PyTorch's: the vector 2-norm over both dims (gradient 0 at 0)
        from .norms import vector_norm

        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):  # through the singular values (PyTorch's way: its nodes)
        from .decompositions import svdvals

        if not A.dtype.is_floating_point:
            got = A.dtype.tensor_type.replace("Tensor", "")
            raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex "
                               f"tensor as input. Got {got}")
        perm = [d for d in range(A.ndim) if d not in (d0, d1)] + [d0, d1]
        s = svdvals(A.permute(*perm))
        r = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            inverse = [perm.index(d) for d in range(A.ndim)]
            r = r.unsqueeze(-1).unsqueeze(-1).permute(*inverse)
        return r
    if ord in (1, -1, float("inf"), float("-inf")):
        summed, over = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = A.abs().sum(summed, keepdim=True)
        r = sums.amax(over, keepdim=True) if ord > 0 else sums.amin(over, keepdim=True)
        return r if keepdim else r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


@api(MATMUL)
def linalg_norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *,
                dtype=None) -> Tensor:
    """``torch.linalg.norm``: a vector norm (``dim`` an int, or a 1-D input, or no ``ord``
    and no ``dim``: the 2-norm of everything) or a matrix norm (a 2-tuple ``dim``, or a 2-D
    input with an ``ord``)."""
    from .norms import vector_norm

    A = as_tensor_arg(A, "A")
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or (dim is None and ord is not None and A.ndim == 2):
        return matrix_norm(A, "fro" if ord is None else ord, dim or (-2, -1), keepdim,
                           dtype=dtype)
    if ord is not None and isinstance(ord, str):
        raise RuntimeError(f"linalg.norm: Order {ord} not supported for vector norms")
    if dim is None and ord is not None and A.ndim != 1:
        raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input must "
                           "be 1D or 2D.")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


@api(MATMUL)
def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of ``x`` and ``y`` (broadcast) along ``dim``."""
    return (as_tensor_arg(x, "x") * y).sum(dim)
