"""Cumulative sums along a dim (``cumsum``; ``CumsumBackward0``): floats are added in float64
and each prefix rounded once to the input's dtype, as PyTorch's CPU ``cumsum`` does (its
bits); integers and bools add in int64. The gradient is the reversed cumulative sum of the
output gradient. On CUDA the scan is CuPy's (float64 too; its association differs, so a
prefix may differ from the CPU's in its last bit when rounded).

``logcumsumexp``: a float64 ``logaddexp`` scan per prefix, rounded once; its gradient
PyTorch's formula in logs, split by the sign of the output gradient (twice differentiable).
``cummax`` / ``cummin``: an op finding where each running extreme was taken (the latest of
a tie; a NaN sticks, as PyTorch's), then a ``gather``: the gradient goes to those elements.
That scan runs on the host."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..amp.autocast_mode import autocast_op
from ..devices import array_namespace, to_host
from ..shapes import wrap_dim
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .inplace import write_out
from .registry import OPAQUE, REDUCE, defop

__all__ = ["cumsum", "logcumsumexp", "cummax", "cummin"]


def _cumsum_ref(a, dim, dtype):
    xp = array_namespace(a)
    out = np.dtype(dtype)
    if a.ndim == 0:
        return a.astype(out)
    if out.kind == "f":
        return xp.ascontiguousarray(xp.cumsum(a, axis=dim, dtype=np.float64).astype(out))
    return xp.ascontiguousarray(xp.cumsum(a, axis=dim, dtype=out))


def _cumsum_vjp(g, ins, out, p, n):
    if g._data.ndim == 0:
        return (g,)
    from .reorder import flip

    d = p["dim"]
    rev = call(CUMSUM, (flip(g, d),), {"dim": d, "dtype": g._data.dtype})
    return (flip(rev, d),)


CUMSUM = defop(name="cumsum", kind=REDUCE, inputs=("a",), params=("dim", "dtype"),
               node="CumsumBackward0", ref=_cumsum_ref, vjp=_cumsum_vjp, cast_grads=True,
               samples=S.cumsum,
               complex="holomorphic")


@api(CUMSUM, method="cumsum", inplace="cumsum_", export="cumsum")
@autocast_op
def cumsum(input: Tensor, dim: int, *, dtype=None, out=None) -> Tensor:
    """Cumulative sums of ``input`` along ``dim`` (``dtype``: of the result, and of the
    sums; integer and bool inputs sum to int64 by default, as PyTorch's).

    >>> import jitgrad
    >>> jitgrad.tensor([1.0, 2.0, 3.0]).cumsum(0)
    tensor([1., 3., 6.])
    """
    input = as_tensor_arg(input, "input")
    a = input._data
    if dtype is not None:
        dt = dtypes.to_dtype(dtype).np
    else:
        dt = a.dtype if a.dtype.kind in "fc" else np.dtype(np.int64)
    d = wrap_dim(dim, a.ndim)
    res = call(CUMSUM, (input,), {"dim": d, "dtype": dt})
    return res if out is None else write_out(out, res, "cumsum")


# ------------------------------------------------------------------------ logcumsumexp
def _logcumsumexp_ref(a, dim):
    xp = array_namespace(a)
    if a.ndim == 0:
        return a.copy()
    host = np.asarray(to_host(a), dtype=np.float64)  # (a sequential scan: on the host)
    with np.errstate(over="ignore", invalid="ignore"):  # logaddexp of infinities: as PyTorch
        acc = np.logaddexp.accumulate(host, axis=dim)
    return xp.ascontiguousarray(xp.asarray(acc.astype(a.dtype)))


def _logcumsumexp_vjp(g, ins, out, p, n):
    """``grad_i = sum_{k>=i} g_k exp(x_i - out_k)``, in logs split by the sign of ``g``
    (no overflow), with ``logcumsumexp`` reversed: PyTorch's (and TensorFlow's) formula.
    Where ``g`` has the other sign its log is the dtype's lowest finite number, as
    PyTorch's (not ``-inf``: ``-inf - -inf`` would make the second derivative NaN)."""
    x, = ins
    if x.ndim == 0:
        return (g,)
    from .reorder import flip
    from .selection import where

    d = p["dim"]

    def reversed_scan(t):
        return flip(call(LOGCUMSUMEXP, (flip(t, d),), {"dim": d}), d)
    lowest = float(np.finfo(g.dtype.np).min)
    log_abs = g.abs().log()
    pos = (reversed_scan(where(g > 0, log_abs, lowest) - out) + x).exp()
    neg = (reversed_scan(where(g < 0, log_abs, lowest) - out) + x).exp()
    return (pos - neg,)


LOGCUMSUMEXP = defop(name="logcumsumexp", kind=REDUCE, inputs=("a",), params=("dim",),
                     node="LogcumsumexpBackward0", ref=_logcumsumexp_ref,
                     vjp=_logcumsumexp_vjp, save=(0,), save_out=True, cast_grads=True,
                     samples=S.cumsum)


@api(LOGCUMSUMEXP, method="logcumsumexp", export="logcumsumexp")
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input)))`` along ``dim``, without overflow (each prefix a float64
    ``logaddexp`` scan, rounded once)."""
    input = as_tensor_arg(input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"logcumsumexp_out_cpu\" not implemented for "
                           f"'{input.dtype.tensor_type.replace('Tensor', '')}'")
    d = wrap_dim(dim, max(input.ndim, 1)) if input.ndim else 0
    return call(LOGCUMSUMEXP, (input,), {"dim": d})


# ----------------------------------------------------------------------- cummax, cummin
def _cum_arg_ref(a, dim, largest):
    """Where each running maximum (``largest``) or minimum of ``a`` along ``dim`` was
    taken: the latest position of a tie, and of a NaN (which then stays), as PyTorch's."""
    xp = array_namespace(a)
    if a.ndim == 0:
        return xp.zeros((), np.int64)
    x = np.asarray(to_host(a))
    run = (np.maximum if largest else np.minimum).accumulate(x, axis=dim)  # NaN propagates
    nan = x != x
    new = (x == run) | nan
    shape = [1] * x.ndim
    shape[dim] = x.shape[dim]
    pos = np.arange(x.shape[dim]).reshape(shape)
    idx = np.maximum.accumulate(np.where(new, pos, 0), axis=dim).astype(np.int64)
    return xp.ascontiguousarray(xp.asarray(idx))


CUM_ARG = defop(name="cum_arg", kind=OPAQUE, node=None, inputs=("a",),
                params=("dim", "largest"), ref=_cum_arg_ref,
                samples=S.cum_arg,
                doc="int64 positions of the running max (min) of ``a`` along ``dim``")


def _running(name: str, input: Tensor, dim: int, largest: bool):
    from .extrema import _return_type
    from .sorting import gather

    input = as_tensor_arg(input)
    if input.ndim == 0:
        from ..creation import zeros

        return _return_type(name)(input.clone(), zeros((), dtype=dtypes.int64,
                                                       device=input.device))
    d = wrap_dim(dim, input.ndim)
    idx = call(CUM_ARG, (input,), {"dim": d, "largest": largest})
    return _return_type(name)(gather(input, d, idx), idx)


@api(CUM_ARG, method="cummax", export="cummax")
def cummax(input: Tensor, dim: int):
    """``(values, indices)`` of the running maximum along ``dim`` (the gradient goes to the
    element each value was taken from)."""
    return _running("cummax", input, dim, True)


@api(CUM_ARG, method="cummin", export="cummin")
def cummin(input: Tensor, dim: int):
    """``(values, indices)`` of the running minimum along ``dim``."""
    return _running("cummin", input, dim, False)
