"""``linalg.eig`` / ``linalg.eigvals``: eigen-decomposition of general (non-symmetric) square
matrices, complex results (complex64 for float32 input, as PyTorch's), differentiable.

LAPACK's ``geev`` through NumPy computes them, as in PyTorch: eigenvectors of unit norm, in
LAPACK's order and phase. The gradient is PyTorch's ``linalg_eig_backward``: with ``E[i, j]
= conj(L[j]) - conj(L[i])``,

    gA = V^-H (diag(gL) + (V^H gV - V^H V diag(Re diag(V^H gV))) / E) V^H

(the diagonal of the bracket is ``gL``), and the real part for a real ``A``. A loss that
depends on the eigenvectors' arbitrary phases is ill-defined: PyTorch's error, when
``Im diag(V^H gV)`` is not ~0. The backward computes with NumPy (``once_differentiable``: a
second derivative raises). Under ``jitgrad.compile`` these are graph breaks (complex
results).
"""

from __future__ import annotations

import numpy as np

from ..autograd.function import Function, once_differentiable
from ..tensor import Tensor, wrap
from ..trace.state import STATE as _TRACE

__all__ = ["eig", "eigvals"]


def _check(A: Tensor, name: str) -> None:
    if not isinstance(A, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if A._data.dtype.kind not in "fc" or A._data.dtype == np.float16:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {A.dtype.tensor_type[:-len('Tensor')]}")
    if _TRACE.tracer is not None:
        _TRACE.tracer.graph_break(f"{name} (complex results: compiled plans are real-valued)")


def _decompose(a: np.ndarray) -> tuple:
    cdt = np.result_type(a.dtype, np.complex64)
    if not np.isfinite(a).all():
        raise RuntimeError("linalg.eig: input tensor should not contain infs or NaNs.")
    w, v = np.linalg.eig(a)
    return w.astype(cdt, copy=False), v.astype(cdt, copy=False)


def _backward(L: np.ndarray, V: np.ndarray, gL, gV) -> np.ndarray:
    """PyTorch's ``linalg_eig_backward`` (non-Hermitian) on arrays."""
    Vh = np.conj(np.swapaxes(V, -1, -2))
    n = L.shape[-1]
    if gV is not None:
        VhgV = Vh @ gV
        diag = np.diagonal(VhgV, 0, -2, -1)
        if not np.allclose(diag.imag, 0.0, rtol=1e-2, atol=1e-2):
            raise RuntimeError(
                "linalg_eig_backward: The eigenvectors in the complex case are specified up "
                "to multiplication by e^{i phi}. The specified loss function depends on this "
                "quantity, so it is ill-defined.")
        VhgV = VhgV - Vh @ (V * diag.real[..., None, :])
        Lc = np.conj(L)
        E = Lc[..., None, :] - Lc[..., :, None]
        idx = np.arange(n)
        E[..., idx, idx] = 1.0
        mid = VhgV / E
    else:
        mid = np.zeros(V.shape, V.dtype)
    idx = np.arange(n)
    mid[..., idx, idx] = 0.0 if gL is None else gL
    return np.linalg.solve(Vh, mid @ Vh)


class _Eig(Function):
    @staticmethod
    def forward(ctx, A):
        w, v = _decompose(A._data)
        ctx.arrays = (w, v)
        return wrap(w), wrap(v)

    @staticmethod
    @once_differentiable
    def backward(ctx, gL, gV):
        w, v = ctx.arrays
        g = _backward(w, v, None if gL is None else gL._data, None if gV is None else gV._data)
        return wrap(g.astype(v.dtype, copy=False))


class _Eigvals(Function):
    @staticmethod
    def forward(ctx, A):
        w, v = _decompose(A._data)
        ctx.arrays = (w, v)
        return wrap(w)

    @staticmethod
    @once_differentiable
    def backward(ctx, gL):
        w, v = ctx.arrays
        return wrap(_backward(w, v, gL._data, None).astype(v.dtype, copy=False))


class EigResult(tuple):
    """``(eigenvalues, eigenvectors)``, also as ``.eigenvalues`` / ``.eigenvectors``."""

    __slots__ = ()

    @property
    def eigenvalues(self) -> Tensor:
        return self[0]

    @property
    def eigenvectors(self) -> Tensor:
        return self[1]


def eig(A: Tensor, *, out=None) -> EigResult:
    """The eigenvalues and eigenvectors (columns, unit norm) of square matrix ``A`` (or a
    batch): complex tensors, ``A @ V == V @ diag(L)``."""
    _check(A, "linalg.eig")
    L, V = _Eig.apply(A)
    return EigResult((L, V))


def eigvals(A: Tensor, *, out=None) -> Tensor:
    """The eigenvalues of square matrix ``A`` (or a batch), complex."""
    _check(A, "linalg.eigvals")
    return _Eigvals.apply(A)
