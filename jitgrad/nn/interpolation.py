"""``interpolate`` / ``Upsample``: resizing the spatial dims of ``(N, C, *)`` inputs by
``nearest``, ``nearest-exact``, ``linear``, ``bilinear`` or ``trilinear`` interpolation, with
PyTorch's source-index rules (``align_corners``, a given ``scale_factor`` used as is unless
``recompute_scale_factor``).

Linear modes are separable: one dim at a time, each output is ``x[i0] * (1 - t) + x[i1] * t``
over two picked slices (index_select: the gradient scatters back, deterministically).
PyTorch computes the 2-D and 3-D modes in one pass, so results agree to rounding.
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


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """``input`` (N, C, d1, ..., dK) resized to ``size`` (or by ``scale_factor``) along its
    K spatial dims."""
    dims = input.ndim - 2
    if dims < 1:
        raise ValueError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                         f"{input.ndim}D) for the modes: nearest | linear | bilinear | "
                         f"bicubic | trilinear | area | nearest-exact (got {mode})")
    if mode in ("nearest", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif mode in _LINEAR:
        if _LINEAR[mode] != dims:
            raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                      f"{_LINEAR[mode] + 2}D input")
        align_corners = bool(align_corners)
    else:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported by jitgrad "
                                  "(nearest, nearest-exact, linear, bilinear, trilinear)")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by jitgrad")
    out_sizes, scales = _sizes(input, size, scale_factor, dims)
    if recompute_scale_factor:
        scales = [None] * dims
    x = input
    for k in range(dims):
        d, n_in, n_out = 2 + k, input.shape[2 + k], out_sizes[k]
        if mode in _LINEAR:
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
