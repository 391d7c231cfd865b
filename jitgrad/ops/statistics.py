"""Statistics written with other ops (so differentiable, compilable and on every device):
``cov`` and ``corrcoef`` (PyTorch's weights and correction), ``quantile`` / ``nanquantile``
(the five interpolations) and ``nanmedian``.

Quantiles sort each slice (``sort``: its gradient goes back to the picked elements), then
pick the two ranks around ``q * (n - 1)`` -- ``n`` the slice's length, or its count of
non-NaN values for the ``nan`` forms -- with ``take_along_dim`` and interpolate between
them. NaNs sort last, so the first ``n`` values of a slice are its valid ones.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .api import api
from .dispatch import as_tensor_arg
from .extrema import _return_type
from .linalg import MATMUL
from .nnops.pointwise import LERP
from .selection import where
from .sorting import GATHER, SORT_INDICES
from .sums import SUM

__all__ = ["cov", "corrcoef", "quantile", "nanquantile", "nanmedian"]

return_nanmedian = _return_type("nanmedian")
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


@api(MATMUL, SUM, method="cov", export="cov")
def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """Covariance of the rows (variables) of ``input`` over its columns (observations),
    with integer frequency weights ``fweights``, observation weights ``aweights`` and
    ``correction`` (1: Bessel's)."""
    input = as_tensor_arg(input)
    if input.ndim > 2:
        raise ValueError(f"cov(): expected input to have two or fewer dimensions but got an "
                         f"input with {input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(dtypes.get_default_dtype())
    n_obs = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.ndim > 1 or fweights.numel() != n_obs:
            raise ValueError(f"cov(): expected fweights to have one dimension with "
                             f"{n_obs} elements")
        w = fweights.to(x.dtype)
    if aweights is not None:
        if aweights.ndim > 1 or aweights.numel() != n_obs:
            raise ValueError(f"cov(): expected aweights to have one dimension with "
                             f"{n_obs} elements")
        aw = aweights.to(x.dtype)
        w = aw if w is None else w * aw
    if w is None:
        w_sum = float(n_obs)
        avg = x.mean(1)
        norm = w_sum - correction
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        if aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights.to(x.dtype)).sum() / w_sum
    if isinstance(norm, float):
        if norm <= 0:
            warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly "
                          "less than the number of observations.", RuntimeWarning, stacklevel=2)
            norm = 0.0
    else:
        norm = norm.clamp_min(0)
    xm = x - avg.unsqueeze(1)
    c = (xm * w if w is not None else xm) @ xm.mH  # (complex: conjugated, as PyTorch's)
    out = c / norm
    return out.reshape(()) if input.ndim < 2 else out


@api(MATMUL, SUM, method="corrcoef", export="corrcoef")
def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the rows of ``input`` (clipped to [-1, 1])."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    from .triangular import diag

    std = diag(c).sqrt()
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clamp(-1.0, 1.0)


def _quantile(name: str, input: Tensor, q, dim, keepdim: bool, interpolation: str,
              ignore_nan: bool) -> Tensor:
    from ..creation import tensor
    from ..trace.state import STATE as TRACE
    from .picking import take_along_dim

    input = as_tensor_arg(input)
    if input.dtype.name not in ("float32", "float64"):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}() interpolation must be one of linear, lower, higher, "
                         f"midpoint or nearest. Got {interpolation}")
    fdt = input.dtype  # ranks in the input's dtype, as PyTorch computes them
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        if not 0 <= float(q) <= 1:
            raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {float(q)}")
        qt = tensor([float(q)], dtype=fdt, device=input.device)
    else:
        if q.dtype != input.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        qt = q.reshape(-1)
        if TRACE.tracer is None and bool(((qt < 0) | (qt > 1)).any()):
            raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
        # (traced: a q outside [0, 1] gives a rank outside the slice, which the gather
        # below refuses -- a compiled call raises too, never returns a wrong value)
    if dim is None:
        x, d = input.reshape(-1), 0
    else:
        d = dim % max(input.ndim, 1)
        x = input if input.ndim else input.reshape(1)
    if x.shape[d] == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    xs = x.movedim(d, -1)  # (..., n)
    values = xs.sort(-1).values
    n = xs.shape[-1]
    nan = xs != xs
    if ignore_nan:
        last = ((~nan).sum(-1, keepdim=True) - 1).clamp_min(0).to(fdt)  # (..., 1)
    else:
        last = tensor(np.full((1,) * xs.ndim, n - 1, dtype=fdt.np), device=x.device)
    nq = qt.shape[0]
    qs = qt.reshape((nq,) + (1,) * xs.ndim)  # (Q, 1..., 1)
    rank = last.unsqueeze(0) * qs  # (Q, ..., 1)
    if not ignore_nan:  # a slice holding a NaN picks it (sorted last): NaN
        rank = where(nan.sum(-1, keepdim=True).unsqueeze(0) > 0, float(n - 1), rank)
    if interpolation == "nearest":
        rank = rank.round()
    lo, hi = rank.floor(), rank.ceil()
    if interpolation == "lower":
        hi = lo
    elif interpolation == "higher":
        lo = hi
    shape = (nq,) + xs.shape[:-1] + (1,)
    vals = values.unsqueeze(0).expand((nq,) + tuple(values.shape))
    v_lo = take_along_dim(vals, lo.to(dtypes.int64).expand(shape), -1)
    if interpolation in ("lower", "higher", "nearest"):
        r = v_lo
    else:
        v_hi = take_along_dim(vals, hi.to(dtypes.int64).expand(shape), -1)
        if interpolation == "midpoint":
            r = v_lo.lerp(v_hi, 0.5)
        else:  # lerp's two-sided formula with a weight per slice (PyTorch's bits)
            w = (rank - lo).expand(shape)
            r = where(w < 0.5, v_lo + w * (v_hi - v_lo), v_hi - (v_hi - v_lo) * (1 - w))
    out = r.squeeze(-1)  # (Q, ...)
    if keepdim:
        if dim is None:
            out = out.reshape((nq,) + (1,) * input.ndim)
        else:
            out = out.unsqueeze(d + 1)
    return out[0] if scalar_q else out


@api(GATHER, SORT_INDICES, LERP, method="quantile", export="quantile")
def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear", out=None) -> Tensor:
    """The ``q``-quantiles (a number or a 1-D tensor: one result per value, stacked first)
    of ``input`` (flattened) or along ``dim``; NaN where a slice holds a NaN."""
    r = _quantile("quantile", input, q, dim, keepdim, interpolation, False)
    if out is not None:
        from .inplace import write_out

        return write_out(out, r, "quantile")
    return r


@api(GATHER, SORT_INDICES, LERP, method="nanquantile", export="nanquantile")
def nanquantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """:func:`quantile` of each slice's non-NaN values (NaN where there are none)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


@api(GATHER, SORT_INDICES, method="nanmedian", export="nanmedian")
def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """The lower median of the non-NaN values of ``input`` (a tensor), or along ``dim``:
    ``(values, indices)``, ``indices`` locating each median in ``input``."""
    from .picking import take_along_dim

    input = as_tensor_arg(input)
    if dim is None:
        x = input.reshape(-1)
        d = 0
    else:
        d = dim % max(input.ndim, 1)
        x = input if input.ndim else input.reshape(1)
    xs = x.movedim(d, -1)
    srt = xs.sort(-1)
    count = (xs == xs).sum(-1, keepdim=True)
    k = ((count - 1).clamp_min(0) // 2)
    vals = take_along_dim(srt.values, k, -1).squeeze(-1)
    if dim is None:
        if input.requires_grad:  # PyTorch's gradient: shared by the elements at the median
            from .nan_reductions import shared_by_equals

            return shared_by_equals(input.reshape(-1), vals.detach().reshape(()))
        return vals.reshape(())
    idx = take_along_dim(srt.indices, k, -1).squeeze(-1)
    if input.ndim == 0:
        vals, idx = vals.reshape(()), idx.reshape(())
    elif keepdim:
        vals, idx = vals.unsqueeze(d), idx.unsqueeze(d)
    return return_nanmedian(vals, idx)
