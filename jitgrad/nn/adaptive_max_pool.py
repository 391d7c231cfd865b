"""Adaptive max pooling: ``adaptive_max_pool1d`` / ``2d`` / ``3d`` and their modules,
written with ops (so differentiable, compilable and on CUDA).

Output cell ``i`` covers input rows ``floor(i * H / OH)`` to ``ceil((i + 1) * H / OH)``
(columns alike), as PyTorch's. The windows' flat positions are laid out once (padded to the
largest window with a position past the plane, which reads ``-inf``); one gather reads
them, ``argmax`` picks each window's first maximum (a NaN counts as the maximum), and a
second gather reads the picked elements -- so the gradient goes to that one element per
window, and ``return_indices`` gives its flat ``h * W + w`` position, as PyTorch's.
"""

from __future__ import annotations

import numpy as np

from .. import creation
from ..ops.concat import cat
from ..ops.dispatch import as_tensor_arg
from ..shapes import fmt_shape
from ..tensor import Tensor
from .module import Module

__all__ = ["adaptive_max_pool2d", "adaptive_max_pool1d", "adaptive_max_pool3d",
           "adaptive_max_pool3d_with_indices", "AdaptiveMaxPool2d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool3d"]


def _windows(size: int, out: int) -> list[tuple[int, int]]:
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _positions(h: int, w: int, oh: int, ow: int) -> np.ndarray:
    """(OH * OW, K) flat positions of each output cell's window (``h * w`` pads)."""
    rows, cols = _windows(h, oh), _windows(w, ow)
    k = max(b - a for a, b in rows) * max(b - a for a, b in cols)
    pos = np.full((oh * ow, k), h * w, dtype=np.int64)
    for i, (r0, r1) in enumerate(rows):
        for j, (c0, c1) in enumerate(cols):
            cell = (np.arange(r0, r1)[:, None] * w + np.arange(c0, c1)[None, :]).reshape(-1)
            pos[i * ow + j, :cell.size] = cell
    return pos


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """2-D adaptive max pooling of ``(N, C, H, W)`` or ``(C, H, W)`` to ``output_size`` (an
    int, or a pair whose None entries keep the input's size); with ``return_indices``, also
    each maximum's flat position in its plane."""
    input = as_tensor_arg(input, "input")
    if input.ndim not in (3, 4) or 0 in tuple(input.shape[-2:]):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: "
                           f"{fmt_shape(input.shape)}")
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    h, w = input.shape[-2:]
    oh = h if size[0] is None else int(size[0])
    ow = w if size[1] is None else int(size[1])
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"adaptive_max_pool2d(): Expected output_size to be positive, got "
                           f"{size}")
    lead = tuple(input.shape[:-2])
    flat = input.reshape(*lead, h * w)
    pad = creation.full((*lead, 1), float("-inf"), dtype=input.dtype, device=input.device)
    padded = cat([flat, pad], -1)  # position h * w reads -inf
    pos = _positions(h, w, oh, ow)
    idx = creation.tensor(pos.reshape(-1), device=input.device)
    windows = padded.index_select(-1, idx).reshape(*lead, oh * ow, pos.shape[1])
    pick = windows.argmax(-1, keepdim=True)  # first maximum (NaN counts as one)
    where = idx.reshape(oh * ow, pos.shape[1]).expand(*lead, oh * ow, pos.shape[1]).gather(
        -1, pick).squeeze(-1)  # flat positions of the maxima
    out = flat.gather(-1, where).reshape(*lead, oh, ow)
    if return_indices:
        return out, where.reshape(*lead, oh, ow)
    return out


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """1-D adaptive max pooling of ``(N, C, L)`` or ``(C, L)`` to ``output_size``."""
    input = as_tensor_arg(input, "input")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_max_pool1d(): Expected 2D or 3D tensor, but got: "
                           f"{fmt_shape(input.shape)}")
    size = output_size[0] if isinstance(output_size, (tuple, list)) else output_size
    r = adaptive_max_pool2d(input.unsqueeze(-2), (1, size), return_indices)
    if return_indices:
        return r[0].squeeze(-2), r[1].squeeze(-2)
    return r.squeeze(-2)


def _positions3d(size: tuple, out: tuple) -> np.ndarray:
    """(OD * OH * OW, K) flat positions of each output cell's 3-D window (``d * h * w``
    pads)."""
    (d, h, w), (od, oh, ow) = size, out
    depths, rows, cols = _windows(d, od), _windows(h, oh), _windows(w, ow)
    k = (max(b - a for a, b in depths) * max(b - a for a, b in rows)
         * max(b - a for a, b in cols))
    pos = np.full((od * oh * ow, k), d * h * w, dtype=np.int64)
    cell_index = 0
    for z0, z1 in depths:
        for r0, r1 in rows:
            for c0, c1 in cols:
                cell = (np.arange(z0, z1)[:, None, None] * (h * w)
                        + np.arange(r0, r1)[None, :, None] * w
                        + np.arange(c0, c1)[None, None, :]).reshape(-1)
                pos[cell_index, :cell.size] = cell
                cell_index += 1
    return pos


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """3-D adaptive max pooling of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` to
    ``output_size`` (an int, or a triple whose None entries keep the input's size); with
    ``return_indices``, also each maximum's flat ``(d * H + h) * W + w`` position."""
    input = as_tensor_arg(input, "input")
    if input.ndim not in (4, 5) or 0 in tuple(input.shape[-3:]):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: "
                           f"{fmt_shape(input.shape)}")
    size = (output_size,) * 3 if isinstance(output_size, int) else tuple(output_size)
    if len(size) != 3:
        raise RuntimeError(f"adaptive_max_pool3d: internal error: output_size.size() must be "
                           f"3, got {len(size)}")
    dhw = tuple(input.shape[-3:])
    out = tuple(n if o is None else int(o) for n, o in zip(dhw, size))
    if min(out) <= 0:
        raise RuntimeError(f"adaptive_max_pool3d(): Expected output_size to be positive, got "
                           f"{size}")
    lead = tuple(input.shape[:-3])
    plane = dhw[0] * dhw[1] * dhw[2]
    flat = input.reshape(*lead, plane)
    pad = creation.full((*lead, 1), float("-inf"), dtype=input.dtype, device=input.device)
    padded = cat([flat, pad], -1)  # position d * h * w reads -inf
    pos = _positions3d(dhw, out)
    cells, k = pos.shape
    idx = creation.tensor(pos.reshape(-1), device=input.device)
    windows = padded.index_select(-1, idx).reshape(*lead, cells, k)
    pick = windows.argmax(-1, keepdim=True)  # first maximum (NaN counts as one)
    where = idx.reshape(cells, k).expand(*lead, cells, k).gather(-1, pick).squeeze(-1)
    result = flat.gather(-1, where).reshape(*lead, *out)
    if return_indices:
        return result, where.reshape(*lead, *out)
    return result


def adaptive_max_pool3d_with_indices(input: Tensor, output_size,
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """``adaptive_max_pool3d(..., return_indices=True)``."""
    return adaptive_max_pool3d(input, output_size, True)


class AdaptiveMaxPool2d(Module):
    """:func:`adaptive_max_pool2d` as a module."""

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor):
        return adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """:func:`adaptive_max_pool1d` as a module."""

    def forward(self, input: Tensor):
        return adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(AdaptiveMaxPool2d):
    """:func:`adaptive_max_pool3d` as a module."""

    def forward(self, input: Tensor):
        return adaptive_max_pool3d(input, self.output_size, self.return_indices)
