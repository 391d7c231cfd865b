"""Products: ``prod`` (over everything or one dim; ``ProdBackward0`` / ``ProdBackward1``)
and ``cumprod`` (``CumprodBackward0``), with PyTorch's gradients, zeros included.

Floats multiply in float64 and round once (each prefix, for ``cumprod``), as PyTorch's CPU
``cumprod`` accumulates (its bits); integer and bool inputs multiply in int64.

Gradients. Without a zero in the reduced slice, ``prod``'s is ``g * (out / x)`` and
``cumprod``'s the reversed cumulative sum of ``g * out`` over ``x`` (PyTorch's formulas).
With zeros those divide by zero, so: ``prod``'s gradient is the product of the *other*
elements (the exclusive products from the left times those from the right, each a
``cumprod``), and ``cumprod``'s is ``sum_{k>=i} g_k * prod_{j<=k, j!=i} x_j`` -- the
cumulative products of ``x`` with ``x_i`` replaced by one, ``n`` of them per slice (n^2
work, taken only by slices holding a zero). Both are written with jitgrad ops, so they are
differentiable again.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..amp.autocast_mode import autocast_op
from ..devices import array_namespace
from ..shapes import wrap_dim
from ..tensor import Tensor
from ..trace.tracer import active
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .inplace import write_out
from .registry import REDUCE, defop

__all__ = ["prod", "cumprod"]


def _result_dtype(a: np.ndarray, dtype) -> np.dtype:
    if dtype is not None:
        return dtypes.to_dtype(dtype).np
    return a.dtype if a.dtype.kind in "fc" else np.dtype(np.int64)


def _acc(dt: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dt.kind == "f" else dt


def _prod_ref(a, dim, keepdim, dtype):
    xp = array_namespace(a)
    out = np.dtype(dtype)
    r = xp.prod(a.astype(_acc(out)), axis=dim, keepdims=keepdim)
    return xp.asarray(r).astype(out, order="C")


def _cumprod_ref(a, dim, dtype):
    xp = array_namespace(a)
    out = np.dtype(dtype)
    if a.ndim == 0:
        return a.astype(out)
    return xp.ascontiguousarray(xp.cumprod(a.astype(_acc(out)), axis=dim).astype(out))


def _has_zero(x: Tensor) -> bool:
    return bool((x._data == 0).any())


def _by_zeros(x: Tensor, with_zeros, without) -> Tensor:
    """``with_zeros()`` if ``x`` holds a zero, else ``without()`` -- eager mode's choice of
    formula for a product's gradient. While a function is traced the choice cannot read
    ``x``: both are computed and ``where`` picks by ``x``'s values at every call (the same
    values eager mode's choice gives; ``without`` must stay finite at zeros)."""
    if active() is None:
        return with_zeros() if _has_zero(x) else without()
    from .selection import where

    return where((x == 0).any(), with_zeros(), without())


_TRACED_CUMPROD_MAX = 2048


def _check_traced_length(x: Tensor, d: int) -> None:
    """A traced cumprod gradient computes the zero-safe formula at every call (n x n values
    per row): beyond :data:`_TRACED_CUMPROD_MAX` elements along ``d`` the trace stops
    instead (a graph break; eager mode picks the formula by the values)."""
    tr = active()
    if tr is not None and x.ndim and x.shape[d] > _TRACED_CUMPROD_MAX:
        tr.escape(f"cumprod's gradient along {x.shape[d]} elements (its formula "
                            "depends on whether the input holds zeros)")


def _safe(x: Tensor) -> Tensor:
    """``x`` as a divisor: itself in eager mode (the formula is used only without zeros);
    while traced, its zeros replaced by ones (the formula's values there are discarded, and
    must not be infinite: a second derivative would carry inf * 0)."""
    if active() is None:
        return x
    from .selection import where

    return where(x == 0, 1.0, x)


def _exclusive(x: Tensor, d: int, reverse: bool) -> Tensor:
    """Products of the elements before each one along ``d`` (after it, with ``reverse``)."""
    from .concat import cat
    from .reorder import flip

    if reverse:
        return flip(_exclusive(flip(x, d), d, False), d)
    n = x.shape[d]
    ones = x.narrow(d, 0, 1) * 0 + 1
    if n == 1:
        return ones
    return cat([ones, cumprod(x.narrow(d, 0, n - 1), d)], d)


def _prod_vjp(g, ins, out, p, n):
    x, = ins
    d, keep = p["dim"], p["keepdim"]
    if d is None:
        flat = x.reshape(-1)
        return (_by_zeros(x, lambda: (g.reshape(()) * (
            _exclusive(flat, 0, False) * _exclusive(flat, 0, True))).reshape(x.shape),
            lambda: g.reshape(()) * (out.reshape(()) / _safe(x))),)
    if not keep and x.ndim:
        g, out = g.unsqueeze(d), out.unsqueeze(d)
    if not x.ndim:
        return (g * (out / x),)
    return (_by_zeros(x, lambda: g * (_exclusive(x, d, False) * _exclusive(x, d, True)),
                      lambda: g * (out / _safe(x))),)


PROD = defop(name="prod", kind=REDUCE, inputs=("a",), params=("dim", "keepdim", "dtype"),
             node=lambda p: "ProdBackward0" if p["dim"] is None else "ProdBackward1",
             ref=_prod_ref, vjp=_prod_vjp, save=(0,), save_out=True, cast_grads=True,
             samples=S.prod, complex="holomorphic")


def _cumprod_with_zeros(g: Tensor, x: Tensor, d: int) -> Tensor:
    """``sum_{k>=i} g_k * prod_{j<=k, j!=i} x_j`` along ``d`` (n cumulative products of
    ``x`` with one element replaced by one)."""
    from ..creation import eye

    nd = x.shape[d]
    xm = x.movedim(d, -1)  # (..., n)
    gm = g.movedim(d, -1)
    one = eye(nd, dtype=x.dtype, device=x.device)  # row i: where x_i becomes 1
    rows = xm.unsqueeze(-2) * (1 - one) + one  # (..., n_i, n_k)
    c = cumprod(rows, -1)
    mask = (one.cumsum(-1) > 0).to(x.dtype)  # k >= i
    grad = (c * mask * gm.unsqueeze(-2)).sum(-1)
    return grad.movedim(-1, d)


def _cumprod_vjp(g, ins, out, p, n):
    x, = ins
    if x.ndim == 0:
        return (g,)
    from .reorder import flip

    d = p["dim"]
    _check_traced_length(x, d)
    return (_by_zeros(x, lambda: _cumprod_with_zeros(g, x, d),
                      lambda: flip(flip(g * out, d).cumsum(d), d) / _safe(x)),)


CUMPROD = defop(name="cumprod", kind=REDUCE, inputs=("a",), params=("dim", "dtype"),
                node="CumprodBackward0", ref=_cumprod_ref, vjp=_cumprod_vjp, save=(0,),
                save_out=True, cast_grads=True, samples=S.cumprod, complex="holomorphic")


@api(PROD, method="prod", export="prod")
@autocast_op
def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Product of all elements, or along ``dim`` (``dtype``: of the result and of the
    products; integer and bool inputs multiply to int64, as PyTorch's).

    >>> import jitgrad
    >>> x = jitgrad.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> x.prod().backward()
    >>> x.grad
    tensor([[24., 12.],
            [ 8.,  6.]])
    """
    input = as_tensor_arg(input, "input")
    a = input._data
    dt = _result_dtype(a, dtype)
    if dim is not None:
        if isinstance(dim, (tuple, list)):
            raise TypeError("prod(): dim must be an int (PyTorch's prod reduces one dim)")
        dim = wrap_dim(dim, max(a.ndim, 1)) if a.ndim else None
    return call(PROD, (input,), {"dim": dim, "keepdim": bool(keepdim) and dim is not None,
                                 "dtype": dt})


@api(CUMPROD, method="cumprod", inplace="cumprod_", export="cumprod")
@autocast_op
def cumprod(input: Tensor, dim: int, *, dtype=None, out=None) -> Tensor:
    """Cumulative products of ``input`` along ``dim``.

    >>> import jitgrad
    >>> jitgrad.tensor([1.0, 2.0, 3.0]).cumprod(0)
    tensor([1., 2., 6.])
    """
    input = as_tensor_arg(input, "input")
    a = input._data
    d = wrap_dim(dim, max(a.ndim, 1)) if a.ndim else 0
    res = call(CUMPROD, (input,), {"dim": d, "dtype": _result_dtype(a, dtype)})
    return res if out is None else write_out(out, res, "cumprod")
