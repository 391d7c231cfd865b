"""``bernoulli`` (0/1 draws with given probabilities, from jitgrad's generator), ``unique``
(the distinct values, sorted, with inverse indices and counts), ``unique_consecutive``
(runs of equal values collapsed) and ``argwhere``. None has a
gradient (PyTorch's have none that is not zero)."""

from __future__ import annotations

import numpy as np

from .. import devices
from ..tensor import Tensor, wrap
from ..trace.effects import run_check
from ..trace.tracer import needs_value
from .api import api
from .dispatch import as_tensor_arg
from .selection import LT

__all__ = ["bernoulli", "unique", "unique_consecutive", "argwhere"]


def _outside_unit(a) -> bool:
    xp = devices.array_namespace(a)
    return bool(xp.any((a < 0) | (a > 1)))


def _bernoulli_error() -> Exception:
    return RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could "
                        "this error message be improved?  If so, please report an "
                        "enhancement request to PyTorch.)")


@api(LT, method="bernoulli", export="bernoulli")
def bernoulli(input: Tensor, p: float | None = None, *, generator=None) -> Tensor:
    """1 with probability ``input`` (or ``p``) element-wise, else 0, in ``input``'s dtype;
    uniform numbers drawn from ``generator`` (or the default one), as ``rand`` draws them."""
    from ..autograd import no_grad
    from ..creation import rand_like

    input = as_tensor_arg(input)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"bernoulli_tensor_cpu_self_" not implemented for '
                                  f"'{input.dtype.tensor_type[:-6]}'")
    with no_grad():
        if p is None:
            probs = input
            run_check(probs, _outside_unit, _bernoulli_error, "bernoulli's probability check")
        else:
            if not 0.0 <= float(p) <= 1.0:
                raise _bernoulli_error()
            probs = input.new_full(tuple(input.shape), float(p))
        return (rand_like(probs, generator=generator) < probs).to(input.dtype)


@api(LT, method="unique", export="unique")
def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None):
    """The distinct values of ``input`` (of its slices along ``dim``), sorted, each NaN
    distinct; with
    ``return_inverse`` also where each element went, with ``return_counts`` how often each
    value occurs. On ``input``'s device."""
    input = as_tensor_arg(input)
    needs_value(input, "unique (its output's size depends on the values)")
    a = devices.to_host(input._data)
    axis = None if dim is None else dim % max(a.ndim, 1)
    # (NaNs are all distinct, as PyTorch's; NumPy merges them by default)
    vals, inv, counts = np.unique(a, return_inverse=True, return_counts=True, axis=axis,
                                  **({"equal_nan": False} if axis is None else {}))
    if axis is None:
        inv = inv.reshape(a.shape)
    dev = input.device
    out = [wrap(devices.to_device(np.ascontiguousarray(vals), dev))]
    if return_inverse:
        out.append(wrap(devices.to_device(inv.astype(np.int64), dev)))
    if return_counts:
        out.append(wrap(devices.to_device(counts.astype(np.int64), dev)))
    return out[0] if len(out) == 1 else tuple(out)


@api(LT, method="unique_consecutive", export="unique_consecutive")
def unique_consecutive(input: Tensor, return_inverse: bool = False,
                       return_counts: bool = False, dim: int | None = None):
    """``input`` (flattened, or its slices along ``dim``) with each run of equal consecutive
    values kept once (NaNs are all distinct); with ``return_inverse`` also which run each
    element (slice) fell in, with ``return_counts`` each run's length. On ``input``'s
    device."""
    from ..shapes import wrap_dim

    input = as_tensor_arg(input)
    needs_value(input, "unique_consecutive (its output's size depends on the values)")
    a = devices.to_host(input._data)
    if dim is None or a.ndim == 0:
        flat = a.reshape(-1)
        new = np.ones(flat.shape, dtype=bool)
        new[1:] = flat[1:] != flat[:-1]
        vals = flat[new]
        inv_shape = a.shape
    else:
        d = wrap_dim(dim, a.ndim)
        moved = np.moveaxis(a, d, 0)
        moved = moved.reshape(moved.shape[0], int(np.prod(moved.shape[1:])))
        new = np.ones(moved.shape[0], dtype=bool)
        new[1:] = (moved[1:] != moved[:-1]).any(axis=1)
        vals = np.take(a, np.nonzero(new)[0], axis=d)
        inv_shape = (moved.shape[0],)
    starts = np.nonzero(new)[0]
    dev = input.device
    out = [wrap(devices.to_device(np.ascontiguousarray(vals), dev))]
    if return_inverse:
        inv = (np.cumsum(new) - 1).reshape(inv_shape).astype(np.int64)
        out.append(wrap(devices.to_device(inv, dev)))
    if return_counts:
        counts = np.diff(np.append(starts, new.size)).astype(np.int64)
        out.append(wrap(devices.to_device(counts, dev)))
    return out[0] if len(out) == 1 else tuple(out)


@api(LT, export="argwhere")
def argwhere(input: Tensor) -> Tensor:
    """The indices of the non-zero elements, one row each (``nonzero()``)."""
    return as_tensor_arg(input).nonzero()
