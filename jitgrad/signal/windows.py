"""``torch.signal.windows``: the window functions, with PyTorch's arguments, checks and
formulas. Each is a composition of jitgrad ops over an evenly spaced grid made by PyTorch's
``linspace`` formula (the first half counted up from ``start``, the second down from
``end``, in the window's dtype), so the values agree with PyTorch's to a few units in the
last place (PyTorch's vectorised ``linspace`` and ``exp``/``cos`` round some values
differently, depending on the CPU), and ``requires_grad=True`` gives a window
differentiable with respect to that grid.

>>> import jitgrad
>>> jitgrad.signal.windows.bartlett(5)
tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from .. import creation, dtypes
from ..ops.torch_namespace import strided
from ..tensor import Tensor

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _checks(name: str, M: int, dtype, layout) -> None:
    """PyTorch's ``_window_function_checks``."""
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (dtypes.float32, dtypes.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")


def _dtype(dtype):
    return dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)


def _grid(start: float, end: float, M: int, dtype, device, requires_grad: bool) -> Tensor:
    """PyTorch's CPU ``linspace``: ``step = (end - start) / (M - 1)`` in ``dtype``; the
    first ``M // 2`` values ``start + i * step``, the others ``end - (M - 1 - i) * step``."""
    nd = dtype.np
    s, e = nd.type(start), nd.type(end)
    i = np.arange(M)
    if M == 1:
        values = np.array([s], nd)
    else:
        step = (e - s) / nd.type(M - 1)
        half = M // 2
        values = np.where(i < half, s + step * i.astype(nd),
                          e - step * (M - 1 - i).astype(nd)).astype(nd)
    return creation.tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def _empty_or_ones(M: int, dtype, device, requires_grad: bool) -> Tensor:
    make = creation.empty if M == 0 else creation.ones
    return make((M,), dtype=dtype, device=device, requires_grad=requires_grad)


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True,
                dtype=None, layout=strided, device=None, requires_grad: bool = False) -> Tensor:
    """``exp(-|n - center| / tau)`` for ``n = 0 .. M-1`` (``center`` defaults to the
    middle; ``sym=False``: the periodic window, one sample of an ``M + 1`` window short)."""
    dtype = _dtype(dtype)
    _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _empty_or_ones(0, dtype, device, requires_grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / tau
    k = _grid(-center * constant, (-center + (M - 1)) * constant, M, dtype, device,
              requires_grad)
    return (-k.abs()).exp()


def cosine(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
           requires_grad: bool = False) -> Tensor:
    """The cosine (sine) window ``sin(pi (n + 1/2) / M)``."""
    dtype = _dtype(dtype)
    _checks("cosine", M, dtype, layout)
    if M == 0:
        return _empty_or_ones(0, dtype, device, requires_grad)
    start = 0.5
    constant = math.pi / (M + 1 if not sym and M > 1 else M)
    return _grid(start * constant, (start + (M - 1)) * constant, M, dtype, device,
                 requires_grad).sin()


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, layout=strided,
             device=None, requires_grad: bool = False) -> Tensor:
    """``exp(-(n - (M-1)/2)^2 / (2 std^2))``."""
    dtype = _dtype(dtype)
    _checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _empty_or_ones(0, dtype, device, requires_grad)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / (std * math.sqrt(2))
    k = _grid(start * constant, (start + (M - 1)) * constant, M, dtype, device,
              requires_grad)
    return (-(k ** 2)).exp()


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, layout=strided,
           device=None, requires_grad: bool = False) -> Tensor:
    """``I0(beta sqrt(1 - (2n/(M-1) - 1)^2)) / I0(beta)``."""
    from ..ops.special_functions import i0

    dtype = _dtype(dtype)
    _checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _empty_or_ones(M, dtype, device, requires_grad)
    nd = dtype.np
    b = nd.type(beta)
    start = -b
    constant = nd.type(2.0) * b / nd.type(M if not sym else M - 1)
    end = min(b, nd.type(start + nd.type(M - 1) * constant))
    k = _grid(start, end, M, dtype, device, requires_grad)
    bt = creation.tensor(b, dtype=dtype, device=device)
    return i0((bt * bt - k.pow(2)).sqrt()) / i0(bt)


def hamming(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
            requires_grad: bool = False) -> Tensor:
    """``0.54 - 0.46 cos(2 pi n / (M-1))``."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
         requires_grad: bool = False) -> Tensor:
    """``0.5 - 0.5 cos(2 pi n / (M-1))``."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
             requires_grad: bool = False) -> Tensor:
    """``0.42 - 0.5 cos(2 pi n / (M-1)) + 0.08 cos(4 pi n / (M-1))``."""
    dtype = _dtype(dtype)
    _checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
             requires_grad: bool = False) -> Tensor:
    """The triangular window ``1 - |2n/(M-1) - 1|``."""
    dtype = _dtype(dtype)
    _checks("bartlett", M, dtype, layout)
    if M <= 1:
        return _empty_or_ones(M, dtype, device, requires_grad)
    start = -1
    constant = 2 / (M if not sym else M - 1)
    k = _grid(start, start + (M - 1) * constant, M, dtype, device, requires_grad)
    return 1 - k.abs()


def general_cosine(M: int, *, a: Iterable, sym: bool = True, dtype=None, layout=strided,
                   device=None, requires_grad: bool = False) -> Tensor:
    """``sum_i (-1)^i a_i cos(2 pi i n / (M-1))``."""
    dtype = _dtype(dtype)
    _checks("general_cosine", M, dtype, layout)
    if M <= 1:
        return _empty_or_ones(M, dtype, device, requires_grad)
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    constant = 2 * math.pi / (M if not sym else M - 1)
    k = _grid(0, (M - 1) * constant, M, dtype, device, requires_grad)
    a_i = creation.tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=dtype,
                          device=device, requires_grad=requires_grad)
    i = creation.arange(a_i.shape[0], dtype=dtype, device=device,
                        requires_grad=requires_grad)
    return (a_i.unsqueeze(-1) * (i.unsqueeze(-1) * k).cos()).sum(0)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype=None,
                    layout=strided, device=None, requires_grad: bool = False) -> Tensor:
    """``alpha - (1 - alpha) cos(2 pi n / (M-1))``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=strided, device=None,
            requires_grad: bool = False) -> Tensor:
    """Nuttall's 4-term Blackman-Harris window (``general_cosine`` with ``a = [0.3635819,
    0.4891775, 0.1365995, 0.0106411]``)."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)
