"""Householder reflectors, as LAPACK stores them: ``torch.geqrf`` (the QR factorisation
``geqrf`` computes: ``R`` on and above the diagonal, the reflectors' vectors below it and
their scales ``tau``), ``torch.linalg.householder_product`` (``torch.orgqr``: the product
``Q = H_1 ... H_k`` of the reflectors ``H_i = I - tau_i v_i v_i^T``) and ``torch.ormqr``
(``Q`` or ``Q^T`` applied to a matrix without forming it).

``geqrf`` is the array library's LAPACK call (NumPy's ``qr(mode='raw')``, whose ``h`` is
the transposed factor); as PyTorch's it has no gradient (its backward raises PyTorch's
``NotImplementedError``). The products apply the reflectors one at a time with jitgrad ops
(``Q <- Q - tau v (v^T Q)``), so they are differentiable in the reflectors, ``tau`` and the
other matrix (and again: ``create_graph``); ``v_i`` is column ``i`` of the input below the
diagonal with a 1 on it, as LAPACK's ``orgqr`` / ``ormqr`` read it.
"""

from __future__ import annotations

from ..autograd.function import BackwardCFunction, Function
from ..autograd.node import node_class
from ..devices import array_namespace
from ..tensor import Tensor, wrap
from ..trace.tracer import needs_value
from .decompositions import _return_type, _type_name, _write_outs
from .dispatch import as_tensor_arg

__all__ = ["geqrf", "householder_product", "orgqr", "ormqr", "return_geqrf"]

return_geqrf = _return_type("geqrf", ("a", "tau"))


def _check_kernel(kernel: str, *tensors: Tensor) -> None:
    """PyTorch's missing-kernel error for inputs that are not float32 / float64."""
    t = tensors[0]
    if not (t.dtype.is_floating_point and t.dtype.np.itemsize >= 4):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_type_name(t)}'")


class _Geqrf(Function):
    """LAPACK ``geqrf``: ``(a, tau)``; PyTorch's backward error."""

    @staticmethod
    def forward(ctx, A: Tensor):
        needs_value(A, "geqrf (a LAPACK call)")
        a = A._data
        xp = array_namespace(a)
        m, n = a.shape[-2:]
        k = min(m, n)
        if a.size == 0:
            return wrap(xp.zeros(a.shape, a.dtype)), wrap(xp.zeros(a.shape[:-2] + (k,), a.dtype))
        h, tau = xp.linalg.qr(a, mode="raw")
        qr_ = xp.ascontiguousarray(xp.swapaxes(h, -1, -2)).astype(a.dtype, copy=False)
        return wrap(qr_), wrap(xp.ascontiguousarray(tau).astype(a.dtype, copy=False))

    @staticmethod
    def backward(ctx, ga, gtau):
        raise NotImplementedError("the derivative for 'geqrf' is not implemented.")


_Geqrf._backward_cls = node_class("GeqrfBackward0", BackwardCFunction)


def geqrf(input: Tensor, *, out=None) -> return_geqrf:
    """``(a, tau)``: LAPACK ``geqrf``'s QR factorisation of each matrix of ``input``
    (``torch.geqrf``): ``R`` in the upper triangle of ``a``, the Householder vectors below
    it, their scales in ``tau`` (``min(m, n)`` each). Not differentiable (as PyTorch's: its
    backward raises)."""
    input = as_tensor_arg(input, "input")
    if input.ndim < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    _check_kernel("geqrf_cpu", input)
    r = return_geqrf(*_Geqrf.apply(input))
    if out is not None:
        return return_geqrf(*_write_outs(out, r, "geqrf"))
    return r


def _reflectors(input: Tensor, k: int) -> Tensor:
    """The Householder vectors ``v_i`` as columns (``m x k``): ``input``'s first ``k``
    columns below the diagonal, ones on it."""
    from ..creation import eye

    m = input.shape[-2]
    return input.narrow(-1, 0, k).tril(-1) + eye(m, k, dtype=input.dtype, device=input.device)


def _reflect(C: Tensor, V: Tensor, tau: Tensor, order, left: bool) -> Tensor:
    """``C`` multiplied by the reflectors ``H_i = I - tau_i v_i v_i^T`` for ``i`` in
    ``order``: on the left ``H_i C`` one after the other, on the right ``C H_i``."""
    for i in order:
        v = V.narrow(-1, i, 1)  # (..., m, 1)
        t = tau.narrow(-1, i, 1).unsqueeze(-1)  # (..., 1, 1)
        if left:
            C = C - (t * v) @ (v.mT @ C)
        else:
            C = C - ((C @ v) * t) @ v.mT
    return C


def householder_product(A: Tensor, tau: Tensor, *, out=None) -> Tensor:
    """The first ``n`` columns of ``Q = H_1 ... H_k`` for the Householder reflectors
    ``H_i = I - tau_i v_i v_i^T`` stored LAPACK's way in ``A`` (``m x n``, ``m >= n``; ``v_i``
    column ``i`` below the diagonal with a 1 on it) and ``tau`` (``k <= n``)
    (``torch.linalg.householder_product``, ``torch.orgqr``). Differentiable in ``A`` and
    ``tau``.

    >>> import jitgrad
    >>> A = jitgrad.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> a, tau = jitgrad.geqrf(A)
    >>> Q = jitgrad.linalg.householder_product(a, tau)
    >>> (Q @ a.triu()[:2] - A).abs().max() < 1e-5
    tensor(True)
    """
    from ..creation import eye

    name = "torch.linalg.householder_product"
    A, tau = as_tensor_arg(A, "input"), as_tensor_arg(tau, "tau")
    if A.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    m, n = A.shape[-2:]
    if m < n:
        raise RuntimeError(f"{name}: input.shape[-2] must be greater than or equal to "
                           f"input.shape[-1]")
    k = tau.shape[-1] if tau.ndim else 1
    if n < k:
        raise RuntimeError(f"{name}: input.shape[-1] must be greater than or equal to "
                           f"tau.shape[-1]")
    if A.ndim - tau.ndim != 1:
        raise RuntimeError(f"{name}: Expected tau to have one dimension less than input, but got "
                           f"tau.ndim equal to {tau.ndim} and input.ndim is equal to {A.ndim}")
    if A.ndim > 2 and tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{name}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got {list(tau.shape[:-1])}")
    if tau.dtype != A.dtype:
        raise RuntimeError(f"{name}: tau dtype {_type_name(tau)} does not match input dtype "
                           f"{_type_name(A)}")
    _check_kernel("orgqr_cpu", A)
    Q = eye(m, n, dtype=A.dtype, device=A.device).expand(*A.shape).clone()
    Q = _reflect(Q, _reflectors(A, k), tau, range(k - 1, -1, -1), left=True)
    if out is not None:
        from .inplace import write_out

        return write_out(out, Q, "linalg.householder_product")
    return Q


def orgqr(input: Tensor, tau: Tensor) -> Tensor:
    """``torch.orgqr``: :func:`householder_product`."""
    return householder_product(input, tau)


def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True,
          transpose: bool = False, *, out=None) -> Tensor:
    """``Q @ other`` (``left``; else ``other @ Q``), with ``Q^T`` for ``transpose``, for the
    orthogonal ``Q = H_1 ... H_k`` of the Householder reflectors stored in ``input`` and
    ``tau`` as by :func:`geqrf` (``torch.ormqr``), applying the reflectors one at a time.
    Differentiable in ``input``, ``tau`` and ``other``."""
    name = "torch.ormqr"
    input, tau, other = (as_tensor_arg(input, "input"), as_tensor_arg(tau, "tau"),
                         as_tensor_arg(other, "other"))
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    if other.ndim < 2:
        raise RuntimeError(f"{name}: other must have at least 2 dimensions.")
    side = -2 if left else -1
    if other.shape[side] != input.shape[-2]:
        raise RuntimeError(f"{name}: other.shape[{side}] must be equal to input.shape[-2]")
    k = tau.shape[-1] if tau.ndim else 1
    if k != min(other.shape[side], input.shape[-1]):
        raise RuntimeError(f"{name}: tau.shape[-1] must be equal to min(other.shape[{side}], "
                           f"input.shape[-1])")
    if input.ndim - tau.ndim != 1:
        raise RuntimeError(f"{name}: Expected tau to have one dimension less than input, but got "
                           f"tau.ndim equal to {tau.ndim} and input.ndim is equal to "
                           f"{input.ndim}")
    if input.ndim != other.ndim:
        raise RuntimeError(f"{name}: Expected other to have the same number of dimensions as "
                           f"input, but got other.ndim equal to {other.ndim} and input.ndim is "
                           f"equal to {input.ndim}")
    if input.ndim > 2:
        if tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
            raise RuntimeError(f"{name}: Expected batch dimensions of tau to be equal to "
                               f"input.shape[:-2], but got {list(tau.shape[:-1])}")
        if tuple(other.shape[:-2]) != tuple(input.shape[:-2]):
            raise RuntimeError(f"{name}: Expected batch dimensions of other to be equal to "
                               f"input.shape[:-2], but got {list(other.shape[:-2])}")
    if tau.dtype != input.dtype:
        raise RuntimeError(f"{name}: Expected input and tau to have the same dtype, but input "
                           f"has dtype{_type_name(input)} and tau has dtype {_type_name(tau)}")
    if other.dtype != input.dtype:
        raise RuntimeError(f"{name}: Expected input and other to have the same dtype, but input "
                           f"has dtype{_type_name(input)} and other has dtype "
                           f"{_type_name(other)}")
    _check_kernel("ormqr_cpu", input)
    V = _reflectors(input, k)
    # Q C = H_1 (... (H_k C)); Q^T C = H_k (... (H_1 C)); C Q = ((C H_1) ...) H_k
    forward = range(k)
    backward = range(k - 1, -1, -1)
    order = (forward if transpose else backward) if left else (backward if transpose
                                                                else forward)
    r = _reflect(other, V, tau, order, left)
    if out is not None:
        from .inplace import write_out

        return write_out(out, r, "ormqr")
    return r
