"""``F.pad``: constant padding is one op (``constant_pad_nd``, PyTorch's
``ConstantPadNdBackward0``: its gradient is the same op with the pads negated, a crop);
``reflect``, ``replicate`` and ``circular`` padding gather the padded dims through constant
index arrays (``x[..., idx]``), so they differentiate and compile as indexing does."""

from __future__ import annotations

import numpy as np

from ..devices import row_major
from ..shapes import fmt_shape
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .registry import MOVEMENT, defop

__all__ = ["pad"]


def _widths(ndim: int, pad: tuple) -> list:
    """Per-dim ``(before, after)``: ``pad`` lists the last dim's pair first."""
    n = len(pad) // 2
    return [(0, 0)] * (ndim - n) + [(pad[2 * i], pad[2 * i + 1]) for i in reversed(range(n))]


def _pad_ref(a, pad, value):
    widths = _widths(a.ndim, pad)
    crop = tuple(slice(max(-lo, 0), a.shape[d] - max(-hi, 0))
                 for d, (lo, hi) in enumerate(widths))
    return row_major(np.pad(a[crop], [(max(lo, 0), max(hi, 0)) for lo, hi in widths],
                            constant_values=np.asarray(value, a.dtype)))


CONSTANT_PAD = defop(
    name="constant_pad_nd", kind=MOVEMENT, node="ConstantPadNdBackward0", inputs=("a",),
    params=("pad", "value"), ref=_pad_ref,
    vjp=lambda g, ins, out, p, n: (call(CONSTANT_PAD, (g,), {"pad": tuple(-x for x in p["pad"]),
                                                             "value": 0}),),
    samples=S.constant_pad)


def _index(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """Source positions along a dim of size ``n`` padded by ``lo``/``hi`` in ``mode``."""
    if mode == "circular":  # PyTorch crops first, then wraps around what is left
        start, m = max(-lo, 0), n - max(-lo, 0) - max(-hi, 0)
        return np.arange(-max(lo, 0), m + max(hi, 0)) % m + start
    i = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    i = np.abs(i)  # reflect: mirror at both ends, the edge not repeated
    return np.where(i > n - 1, 2 * (n - 1) - i, i)


_MODES = ("constant", "reflect", "replicate", "circular")


@api(CONSTANT_PAD)
def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad ``input``: ``pad`` is ``(left, right)`` for the last dim, then ``(top, bottom)``
    for the one before, and so on; negative sizes crop. ``mode``: ``"constant"`` (with
    ``value``, default 0), ``"reflect"`` (mirrored, the edge not repeated), ``"replicate"``
    (the edge repeated) or ``"circular"`` (wrapped around); the last three pad the last 1-3
    dims of a batched (or unbatched) input, as PyTorch's.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.pad(jitgrad.tensor([[1., 2.]]), (1, 2))
    tensor([[0., 1., 2., 0., 0.]])
    """
    input = as_tensor_arg(input, "input")
    pad = tuple(pad)
    for p in pad:
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
            raise TypeError(f"pad(): argument 'pad' must be tuple of ints, but found element of "
                            f"type {type(p).__name__}")
    pad = tuple(int(p) for p in pad)
    a = input._data
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > a.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pad)} and input of "
                           f"dimension {a.ndim}")
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    widths = _widths(a.ndim, pad)
    for d, (lo, hi) in enumerate(widths):
        if a.shape[d] + lo + hi < 0:
            raise RuntimeError(
                f"The input size {a.shape[d]}, plus negative padding {lo} and {hi} resulted in "
                f"a negative output size, which is invalid. Check dimension {d} of your input.")
    if mode == "constant":
        return call(CONSTANT_PAD, (input,), {"pad": pad, "value": 0 if value is None else value})
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument.')
    n = len(pad) // 2
    if n > 3 or a.ndim not in (n + 1, n + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {a.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    out = input
    for d in range(a.ndim - n, a.ndim):
        lo, hi = widths[d]
        size = a.shape[d]
        if (mode == "reflect" and (lo >= size or hi >= size)) or \
                (mode == "circular" and (lo > size or hi > size)):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({lo}, {hi}) at dimension {d} of input "
                f"{fmt_shape(a.shape)}")
        if lo or hi:
            out = out[(slice(None),) * d + (_index(size, lo, hi, mode),)]
    return out
