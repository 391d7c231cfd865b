"""Randomised low-rank decompositions, as PyTorch's ``torch.svd_lowrank`` and
``torch.pca_lowrank`` (Halko, Martinsson and Tropp, 2009: a randomised range finder with
``niter`` subspace iterations, then the SVD of the projected matrix). Written with
jitgrad's ops (``randn``, ``linalg.qr``, ``linalg.svd``, ``matmul``), so differentiable,
batched over leading dims, and on whatever device ``A`` is. Dense real matrices only
(jitgrad has no sparse tensors, and its SVD and QR are real).

>>> import jitgrad
>>> _ = jitgrad.manual_seed(0)
>>> A = jitgrad.randn(20, 3) @ jitgrad.randn(3, 15)          # rank 3
>>> U, S, V = jitgrad.svd_lowrank(A, q=5)
>>> U.shape, S.shape, V.shape
(jitgrad.Size([20, 5]), jitgrad.Size([5]), jitgrad.Size([15, 5]))
>>> bool(((U * S) @ V.mT - A).abs().max() < 1e-3)
True
"""

from __future__ import annotations

from . import creation, dtypes
from .ops.decompositions import linalg_qr, linalg_svd
from .tensor import Tensor

__all__ = ["svd_lowrank", "pca_lowrank", "get_approximate_basis"]


def _floating_dtype(A: Tensor) -> dtypes.DType:
    return A.dtype if A.is_floating_point() else dtypes.float32


def get_approximate_basis(A: Tensor, q: int, niter: int | None = 2,
                          M: Tensor | None = None) -> Tensor:
    """``q`` orthonormal columns ``Q`` such that ``Q Q^T A`` approximates ``A`` (``A - M``
    when ``M`` is given, without forming it), from ``niter`` subspace iterations on a random
    Gaussian start (Halko et al., Algorithm 4.4)."""
    niter = 2 if niter is None else niter
    R = creation.randn(A.shape[-1], q, dtype=_floating_dtype(A), device=A.device)
    X = A @ R
    if M is not None:
        X = X - M @ R
    Q = linalg_qr(X).Q
    for _ in range(niter):
        X = A.mT @ Q
        if M is not None:
            X = X - M.mT @ Q
        Q = linalg_qr(X).Q
        X = A @ Q
        if M is not None:
            X = X - M @ Q
        Q = linalg_qr(X).Q
    return Q


def _svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2,
                 M: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    q = 6 if q is None else q
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    if m < n:  # the range finder works on the tall side
        A = A.mT
        if M is not None:
            M = M.mT
    Q = get_approximate_basis(A, q, niter=niter, M=M)
    B = Q.mT @ A
    if M is not None:
        B = B - Q.mT @ M
    U, S, Vh = linalg_svd(B, full_matrices=False)
    V = Vh.mT
    U = Q @ U
    if m < n:
        U, V = V, U
    return U, S, V


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2,
                M: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """An approximate SVD ``(U, S, V)`` of ``A`` (``(*, m, n)``) of rank ``q``: ``A ~ U
    diag(S) V^T`` with ``U`` ``(*, m, q)``, ``S`` ``(*, q)``, ``V`` ``(*, n, q)`` -- of ``A -
    M`` when ``M`` (broadcast to ``A``'s shape) is given. ``q`` should slightly exceed the
    rank sought; ``niter`` subspace iterations (default 2) sharpen it. Randomised: seed
    with ``jitgrad.manual_seed`` for repeatable results (Halko et al., Algorithm 5.1)."""
    if not isinstance(A, Tensor):
        raise TypeError(f"svd_lowrank(): argument 'A' must be Tensor, not {type(A).__name__}")
    return _svd_lowrank(A, q=q, niter=niter, M=M)


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True,
                niter: int = 2) -> tuple[Tensor, Tensor, Tensor]:
    """Principal component analysis of the data matrix ``A`` (``(*, m, n)``: ``m`` samples
    of ``n`` features) by :func:`svd_lowrank` of the centred matrix (``center=False``: ``A``
    is taken as centred): ``V``'s columns are the principal directions, ``S ** 2 / (m -
    1)`` the variances along them, ``A @ V[:, :k]`` the projection on the first ``k``.
    ``q`` defaults to ``min(6, m, n)``."""
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not (q >= 0 and q <= min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than "
                         f"min(m, n)={min(m, n)}")
    if not (niter >= 0):
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return _svd_lowrank(A, q, niter=niter, M=None)
    C = A.mean(dim=(-2,), keepdim=True)
    return _svd_lowrank(A - C, q, niter=niter, M=None)
