"""Window functions for spectral analysis: ``hann_window``, ``hamming_window``,
``blackman_window``, ``bartlett_window`` and ``kaiser_window``, as PyTorch computes them:
``arange`` in the requested floating dtype, then the window's formula with element-wise
ops (so a window made inside ``jitgrad.compile`` is part of the plan). ``periodic=True``
(the default) gives the first ``window_length`` values of the symmetric window one longer,
as spectral code wants; a window of length 1 is ``[1.]``, of length 0 empty.
"""

from __future__ import annotations

import math

from .. import dtypes
from ..tensor import Tensor
from .api import api
from .math_functions import COS, SQRT
from .selection import WHERE, where
from .special_functions import I0, i0

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]


def _start(name: str, window_length: int, dtype, device):
    """The checks every window makes; ``(dtype, ready)`` where ``ready`` is the finished
    window for lengths 0 and 1."""
    from ..creation import empty, ones

    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    if not dt.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dt}")
    if window_length == 0:
        return dt, empty(0, dtype=dt, device=device)
    if window_length == 1:
        return dt, ones(1, dtype=dt, device=device)
    return dt, None


def _positions(n: int, dt, device) -> Tensor:
    """``0 .. n-1`` in ``dt`` (float16 windows compute in float32, rounded once at the
    end: jitgrad's kernels have no float16 cosine)."""
    from ..creation import arange

    return arange(n, dtype=dtypes.float32 if dt is dtypes.float16 else dt, device=device)


def _finish(w: Tensor, periodic: bool, requires_grad: bool, dt) -> Tensor:
    if periodic:
        w = w[:-1]
    w = w.to(dt).contiguous().detach()
    return w.requires_grad_() if requires_grad else w


def _ready(w: Tensor, requires_grad: bool) -> Tensor:
    return w.requires_grad_() if requires_grad else w


@api(COS, export="hamming_window")
def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype=None, layout=None, device=None,
                   pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The generalised Hamming window ``alpha - beta * cos(2 pi n / (N - 1))``."""
    dt, ready = _start("hamming_window", window_length, dtype, device)
    if ready is not None:
        return _ready(ready, requires_grad)
    n = window_length + 1 if periodic else window_length
    w = (_positions(n, dt, device) * (math.pi * 2.0 / (n - 1))).cos() * -beta + alpha
    return _finish(w, periodic, requires_grad, dt)


@api(COS, export="hann_window")
def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                device=None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The Hann window ``0.5 - 0.5 cos(2 pi n / (N - 1))``.

    >>> import jitgrad
    >>> jitgrad.hann_window(4, periodic=False, dtype=jitgrad.float64)
    tensor([0.0000, 0.7500, 0.7500, 0.0000], dtype=jitgrad.float64)
    """
    dt, ready = _start("hann_window", window_length, dtype, device)
    if ready is not None:
        return _ready(ready, requires_grad)
    return hamming_window(window_length, periodic, 0.5, 0.5, dtype=dt, device=device,
                          requires_grad=requires_grad)


@api(COS, export="blackman_window")
def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                    device=None, pin_memory: bool = False,
                    requires_grad: bool = False) -> Tensor:
    """The Blackman window ``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``."""
    dt, ready = _start("blackman_window", window_length, dtype, device)
    if ready is not None:
        return _ready(ready, requires_grad)
    n = window_length + 1 if periodic else window_length
    x = _positions(n, dt, device) * (math.pi / (n - 1))
    w = (x * 4.0).cos() * 0.08 - (x * 2.0).cos() * 0.5 + 0.42
    return _finish(w, periodic, requires_grad, dt)


@api(WHERE, export="bartlett_window")
def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                    device=None, pin_memory: bool = False,
                    requires_grad: bool = False) -> Tensor:
    """The Bartlett (triangular) window ``1 - |2 n / (N - 1) - 1|``."""
    dt, ready = _start("bartlett_window", window_length, dtype, device)
    if ready is not None:
        return _ready(ready, requires_grad)
    n = window_length + 1 if periodic else window_length
    pos = _positions(n, dt, device)
    rise = pos * (2.0 / (n - 1))
    w = where(pos < float(((n - 1) >> 1) + 1), rise, 2.0 - rise)
    return _finish(w, periodic, requires_grad, dt)


@api(I0, SQRT, export="kaiser_window")
def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype=None, layout=None, device=None, pin_memory: bool = False,
                  requires_grad: bool = False) -> Tensor:
    """The Kaiser window ``I0(beta sqrt(1 - ((n - a) / a) ** 2)) / I0(beta)``, ``a = (N - 1)
    / 2`` (``I0``: the modified Bessel function of order 0)."""
    dt, ready = _start("kaiser_window", window_length, dtype, device)
    if ready is not None:
        return _ready(ready, requires_grad)
    n = window_length + 1 if periodic else window_length
    a = (n - 1) / 2.0
    r = (_positions(n, dt, device) - a) * (1.0 / a)
    from ..creation import tensor

    peak = i0(tensor(float(beta), dtype=r.dtype, device=device))
    w = i0((1.0 - r * r).clamp_min(0.0).sqrt() * beta) / peak
    return _finish(w, periodic, requires_grad, dt)
