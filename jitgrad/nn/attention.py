"""``F.scaled_dot_product_attention``, composed of registered ops (matmul, masked_fill,
softmax, dropout), so it differentiates and compiles like the rest; PyTorch 2.13's CPU
semantics: a boolean mask keeps its True positions, a float mask is added, ``is_causal`` with
a mask is an error (PyTorch's; its fused CPU kernel, taken only without autograd, applies both
instead), and a query row with every position masked gives zeros (values and gradients), not
NaN."""

from __future__ import annotations

import contextlib
import enum
import math

import numpy as np

from ..amp.autocast_mode import autocast_op
from ..tensor import Tensor

__all__ = ["scaled_dot_product_attention", "SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """PyTorch's attention kernels, for :func:`sdpa_kernel`."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_SWITCH = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
           SDPBackend.EFFICIENT_ATTENTION: "mem_efficient", SDPBackend.CUDNN_ATTENTION: "cudnn"}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Allow only ``backends`` (one :class:`SDPBackend` or a list) in
    ``scaled_dot_product_attention`` for the block, as PyTorch's context manager
    (:mod:`jitgrad.backends.cuda` says what that changes in jitgrad); restores the switches
    after. ``set_priority`` is accepted (jitgrad has one kernel)."""
    from ..backends.cuda import sdp_switches

    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend")
    with sdp_switches({name: b in chosen for b, name in _SWITCH.items()}):
        yield


def _dtype_name(t: Tensor) -> str:
    return t.dtype.cpp_name


def _check(query: Tensor, key: Tensor, value: Tensor, attn_mask) -> None:
    q, k, v = query._data, key._data, value._data
    if not (q.dtype == k.dtype == v.dtype):
        raise RuntimeError(
            f"Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{_dtype_name(query)} key.dtype: {_dtype_name(key)} and value.dtype: "
            f"{_dtype_name(value)} instead.")
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise RuntimeError(
            f"Expected query, key, and value to all be  at least 2 dimensional, but got "
            f"query.dim: {q.ndim} key.dim: {k.ndim} and value.dim: {v.ndim} instead.")
    if q.dtype.kind != "f":
        raise RuntimeError(f"scaled_dot_product_attention: expected floating-point query, "
                           f"got {_dtype_name(query)}")
    if attn_mask is not None:
        md = attn_mask._data.dtype
        if md != np.bool_ and md != q.dtype:
            raise RuntimeError(
                f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                f"attn_mask.dtype: {_dtype_name(attn_mask)} and  query.dtype: "
                f"{_dtype_name(query)} instead.")


def _repeat_heads(t: Tensor, times: int) -> Tensor:
    """``t.repeat_interleave(times, dim=-3)``: each key/value head serves ``times`` query
    heads (grouped-query attention)."""
    s = t.shape
    return t.unsqueeze(-3).expand(*s[:-2], times, *s[-2:]).reshape(
        *s[:-3], s[-3] * times, *s[-2:])


@autocast_op
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key.mT * scale + mask) @ value`` over the last two dims
    (``(..., L, E)``, ``(..., S, E)``, ``(..., S, Ev)`` -> ``(..., L, Ev)``), as PyTorch's.

    ``attn_mask`` broadcasts to ``(..., L, S)``: boolean (True: attend) or of the query's
    float dtype (added to the scores). ``is_causal``: query ``i`` attends to keys ``j <= i``
    (top-left aligned); with ``attn_mask`` too, both apply (as PyTorch's CPU kernel).
    ``scale`` defaults to ``1 / sqrt(E)``. ``dropout_p`` drops attention weights with
    jitgrad's generator (as ``F.dropout``). ``enable_gqa``: key/value may have fewer heads
    (dim -3) than the query, a divisor of its head count. A query row that may attend to
    nothing gives zeros.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> q = k = v = jitgrad.ones(1, 2, 4)
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
    jitgrad.Size([1, 2, 4])
    """
    from ..creation import ones
    from ..ops.linalg import matmul
    from ..ops.reduce import softmax
    from ..ops.selection import masked_fill, where
    from .functional import dropout

    _check(query, key, value, attn_mask)
    from ..backends.cuda import check_sdp_backend

    check_sdp_backend(query.device.type == "cuda")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    hq, hk, hv = query.shape[-3:-2], key.shape[-3:-2], value.shape[-3:-2]
    if enable_gqa and hq and hk and hq != hk:
        if hk != hv or hq[0] % hk[0]:
            raise RuntimeError(
                "Number of heads in key and value must divide the number of heads in query")
        key = _repeat_heads(key, hq[0] // hk[0])
        value = _repeat_heads(value, hq[0] // hv[0])
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    factor = 1.0 / math.sqrt(E) if scale is None else float(scale)
    scores = matmul(query, key.transpose(-2, -1)) * factor
    masked = attn_mask is not None
    if is_causal:
        future = ones(L, S, dtype=bool, device=query.device).tril().logical_not()
        scores = masked_fill(scores, future, -math.inf)
    if masked:
        if attn_mask._data.dtype == np.bool_:
            scores = masked_fill(scores, attn_mask.logical_not(), -math.inf)
        else:
            scores = scores + attn_mask
    if masked:  # rows with nothing to attend to: zeros, as PyTorch's CPU kernels give
        empty = scores.detach().amax(-1, keepdim=True) == -math.inf
        attn = where(empty, 0.0, softmax(where(empty, 0.0, scores), -1))
    else:
        attn = softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return matmul(attn, value)
