"""``interpolate`` / ``Upsample``: resizing the spatial dims of ``(N, C, *)`` inputs by
``nearest``, ``nearest-exact``, ``linear``, ``bilinear``, ``bicubic``, ``trilinear`` or
``area`` interpolation (``antialias=True`` for bilinear / bicubic), with PyTorch's
source-index rules (``align_corners``, a given ``scale_factor`` used as is unless
``recompute_scale_factor``).

Linear modes are separable: one dim at a time, each output is ``x[i0] * (1 - t) + x[i1] * t``
over two picked slices (index_select: the gradient scatters back, deterministically).
Bicubic (PyTorch's cubic convolution, ``A = -0.75``, indices clamped at the border) and the
antialiased modes (PyTorch's / Pillow's filters widened by the downscale, normalised) are
the same with more taps per output: ``sum_k x[idx_k] * w_k``. ``area`` is adaptive average
pooling. PyTorch computes the 2-D and 3-D modes in one pass, so results agree to rounding.
"""

from __future__ import annotations

import math

import numpy as np

from ..creation import const_tensor
from ..devices import to_device
from ..tensor import Tensor
from .module import Module

__all__ = ["interpolate", "Upsample"]

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
_MODES = "nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact"


def _sizes(input: Tensor, size, scale_factor, dims: int) -> tuple[list, list]:
    """Output sizes and the scales the kernels use (None: input / output)."""
    spatial = list(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        out = list(size) if isinstance(size, (tuple, list)) else [size] * dims
        if len(out) != dims:
            raise ValueError(f"Input and output must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of {spatial} "
                             f"and output size of {out}. Please provide input tensor in "
                             f"(N, C, d1, d2, ...,dK) format and output size in (o1, o2, "
                             f"...,oK) format.")
        return [int(o) for o in out], [None] * dims
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    scales = list(scale_factor) if isinstance(scale_factor, (tuple, list)) \
        else [scale_factor] * dims
    if len(scales) != dims:
        raise ValueError(f"Input and scale_factor must have the same number of spatial "
                         f"dimensions, but got input with spatial dimensions of {spatial} "
                         f"and scale_factor of shape {scales}. Please provide input tensor in "
                         f"(N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) "
                         f"format.")
    return [int(math.floor(float(n) * float(s))) for n, s in zip(spatial, scales)], \
        [float(s) for s in scales]


def _nearest_index(n_in: int, n_out: int, scale, exact: bool) -> np.ndarray:
    dst = np.arange(n_out, dtype=np.float32)
    s = np.float32(1.0 / scale if scale else n_in / n_out)
    src = np.floor((dst + np.float32(0.5)) * s if exact else dst * s)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _linear_weights(n_in: int, n_out: int, scale, align_corners: bool):
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        src = dst * s
    else:
        s = 1.0 / scale if scale else n_in / n_out
        src = np.maximum(s * (dst + 0.5) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, src - i0


def _along(t: Tensor, dim: int, idx: np.ndarray) -> Tensor:
    return t.index_select(dim, const_tensor(to_device(idx, t.device)))


def _scale(n_in: int, n_out: int, scale, align_corners: bool) -> float:
    """PyTorch's ``area_pixel_compute_scale``: source step per output step."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale else n_in / n_out


def _cubic_taps(n_in: int, n_out: int, scale, align_corners: bool):
    """Bicubic's four source indices and weights per output (cubic convolution with
    ``A = -0.75``; the source position is not clamped at 0, the indices are)."""
    s = _scale(n_in, n_out, scale, align_corners)
    dst = np.arange(n_out, dtype=np.float64)
    src = dst * s if align_corners else s * (dst + 0.5) - 0.5
    i = np.floor(src)
    t = src - i
    a = -0.75

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    w = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)
    idx = np.clip(i.astype(np.int64)[:, None] + np.arange(-1, 3), 0, n_in - 1)
    return idx, w


def _antialiased_taps(n_in: int, n_out: int, scale, align_corners: bool, cubic: bool):
    """PyTorch's antialiased (``_upsample_*_aa``) taps: the filter (triangle, or cubic with
    ``a = -0.5``) stretched by the downscale, its weights normalised per output."""
    s = _scale(n_in, n_out, scale, align_corners)
    half = 2.0 if cubic else 1.0
    support = half * s if s >= 1.0 else half
    invscale = 1.0 / s if s >= 1.0 else 1.0

    def f(x):
        x = np.abs(x)
        if not cubic:
            return np.where(x < 1.0, 1.0 - x, 0.0)
        a = -0.5
        return np.where(x < 1.0, ((a + 2) * x - (a + 3)) * x * x + 1,
                        np.where(x < 2.0, (((x - 5) * x + 8) * x - 4) * a, 0.0))

    rows = []
    for i in range(n_out):
        center = s * (i + 0.5)  # (align_corners changes the scale only)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        j = np.arange(lo, hi)
        w = f((j - center + 0.5) * invscale)
        total = w.sum()
        rows.append((j, w / total if total != 0 else w))
    k = max(len(j) for j, _ in rows)
    idx = np.zeros((n_out, k), dtype=np.int64)
    wts = np.zeros((n_out, k))
    for r, (j, w) in enumerate(rows):
        idx[r, :len(j)], wts[r, :len(j)] = j, w
    return idx, wts


def _by_taps(x: Tensor, d: int, idx: np.ndarray, w: np.ndarray) -> Tensor:
    """``sum_k x[idx[:, k]] * w[:, k]`` along dim ``d``."""
    shape = [1] * x.ndim
    shape[d] = idx.shape[0]
    out = None
    for k in range(idx.shape[1]):
        wk = const_tensor(to_device(w[:, k].astype(x.dtype.np).reshape(shape), x.device))
        term = _along(x, d, idx[:, k]) * wk
        out = term if out is None else out + term
    return out


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """``input`` (N, C, d1, ..., dK) resized to ``size`` (or by ``scale_factor``) along its
    K spatial dims."""
    dims = input.ndim - 2
    if dims < 1:
        raise ValueError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                         f"{input.ndim}D) for the modes: {_MODES} (got {mode})")
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif mode in _LINEAR or mode == "bicubic":
        need = _LINEAR.get(mode, 2)
        if need != dims:
            raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                      f"{need + 2}D input")
        align_corners = bool(align_corners)
    else:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {input.ndim}D) for the modes: {_MODES} (got {mode})")
    if antialias and mode not in ("bilinear", "bicubic"):
        raise ValueError("Anti-alias option is restricted to bilinear and bicubic modes and "
                         "requires a 4-D tensor as input")
    out_sizes, scales = _sizes(input, size, scale_factor, dims)
    if recompute_scale_factor:
        scales = [None] * dims
    if mode == "area":
        from .functional import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d

        pool = (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[dims - 1]
        return pool(input, out_sizes if dims > 1 else out_sizes[0])
    x = input
    for k in range(dims):
        d, n_in, n_out = 2 + k, input.shape[2 + k], out_sizes[k]
        if antialias:
            x = _by_taps(x, d, *_antialiased_taps(n_in, n_out, scales[k], align_corners,
                                                  mode == "bicubic"))
        elif mode == "bicubic":
            x = _by_taps(x, d, *_cubic_taps(n_in, n_out, scales[k], align_corners))
        elif mode in _LINEAR:
            i0, i1, t = _linear_weights(n_in, n_out, scales[k], align_corners)
            shape = [1] * x.ndim
            shape[d] = n_out
            w = const_tensor(to_device(t.astype(x.dtype.np).reshape(shape), x.device))
            x = _along(x, d, i0) * (1.0 - w) + _along(x, d, i1) * w
        elif n_out != n_in:
            x = _along(x, d, _nearest_index(n_in, n_out, scales[k], mode == "nearest-exact"))
    return x if x is not input else input.clone()


class Upsample(Module):
    """:func:`interpolate` as a module."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) \
            else (tuple(float(s) for s in scale_factor) if scale_factor else None)
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None
                else f"size={self.size!r}")
        return info + f", mode={self.mode!r}"
