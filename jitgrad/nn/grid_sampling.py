"""Spatial transformers: ``affine_grid`` and ``grid_sample`` (4-D inputs), written with ops
(so differentiable in both the input and the grid, compilable and on CUDA).

``grid_sample`` unnormalises each grid point to pixel coordinates (``align_corners`` as
PyTorch's), maps them into the image for ``padding_mode`` "border" (clamp) or "reflection"
(reflect, then clamp), and reads the taps -- 4 for "bilinear", 1 for "nearest" (ties to
even), 16 for "bicubic" (Keys' cubic convolution, ``A = -0.75``; padding applied per tap) --
with one ``gather`` each from the input flattened to ``(N, C, H * W)``. Taps outside the
image read 0 ("zeros"). A NaN or infinite grid point gives NaN ("nearest": 0), as PyTorch's
"zeros" mode does (its "border" and "reflection" clamp a NaN to the image's last pixel:
a known difference). The gradient of the input is the gathers' (a scatter-add); the grid's
is that of the tap weights, and 0 for "nearest".
"""

from __future__ import annotations

import itertools
import math
import warnings

from .. import creation
from ..ops.dispatch import as_tensor_arg
from ..ops.movement import stack
from ..ops.selection import where
from ..ops.views import meshgrid
from ..tensor import Tensor

__all__ = ["affine_grid", "grid_sample"]

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")
_CUBIC_A = -0.75


def _align(align_corners) -> bool:
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


# ------------------------------------------------------------------------- affine_grid
def _linspace_from_neg_one(n: int, align_corners: bool, like: Tensor) -> Tensor:
    """PyTorch's base coordinates along one dim: ``linspace(-1, 1, n)``, scaled by
    ``(n - 1) / n`` without ``align_corners`` (pixel centres); ``[0]`` for one step."""
    if n <= 1:
        return creation.zeros(1, dtype=like.dtype, device=like.device)
    r = creation.linspace(-1.0, 1.0, n, dtype=like.dtype, device=like.device)
    return r if align_corners else r * ((n - 1) / n)


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid of the affine maps ``theta`` (``(N, 2, 3)`` for a 4-D ``size``
    ``(N, C, H, W)``: a grid ``(N, H, W, 2)``; ``(N, 3, 4)`` for a 5-D size: ``(N, D, H, W,
    3)``), in ``grid_sample``'s normalised coordinates."""
    align_corners = _align(align_corners)
    theta = as_tensor_arg(theta, "theta")
    size = tuple(int(s) for s in size)
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if len(size) == 4:
        rows, cols, spatial = 2, 3, size[2:]
    elif len(size) == 5:
        rows, cols, spatial = 3, 4, size[2:]
    else:
        raise NotImplementedError(
            f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
            f"respectively. Got size {size}.")
    if theta.dim() != 3 or tuple(theta.shape[1:]) != (rows, cols):
        kind = "2D" if rows == 2 else "3D"
        raise ValueError(f"Expected a batch of {kind} affine matrices of shape "
                         f"Nx{rows}x{cols} for size {size}. Got {theta.shape}.")
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      UserWarning, stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{size[0]}, {cols}] but got: [{theta.shape[0]}, {cols}].")
    # base[..., k]: the k-th coordinate (x along the last dim, then y, then z), then 1
    axes = [_linspace_from_neg_one(n, align_corners, theta) for n in reversed(spatial)]
    mesh = meshgrid(*reversed(axes), indexing="ij")  # each of shape spatial
    ones = creation.ones(spatial, dtype=theta.dtype, device=theta.device)
    base = stack([*reversed(mesh), ones], -1).reshape(1, -1, cols)
    grid = base @ theta.transpose(1, 2)
    return grid.reshape(size[0], *spatial, rows)


# ------------------------------------------------------------------------- grid_sample
def _unnormalize(coord: Tensor, size: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (coord + 1.0) * ((size - 1) / 2.0)
    return ((coord + 1.0) * size - 1.0) / 2.0


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """``coord`` reflected into [low, high] (the bounds given doubled, as PyTorch's)."""
    if twice_low == twice_high:
        return coord * 0.0
    low = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    dist = (coord - low).abs()
    extra = dist.fmod(span)
    flips = (dist.detach() / span).floor()
    return where(flips.fmod(2.0) == 0.0, extra + low, (span - extra) + low)


def _pad_coordinates(coord: Tensor, size: int, padding_mode: str,
                     align_corners: bool) -> Tensor:
    if padding_mode == "zeros":
        return coord
    if padding_mode == "reflection":
        coord = (_reflect(coord, 0, 2 * (size - 1)) if align_corners
                 else _reflect(coord, -1, 2 * size - 1))
    # clamped into the input, with PyTorch's gradient (``clip_coordinates_set_grad``): a
    # coordinate on a border counts as outside, gradient 0 (``clamp``'s passes it there)
    hi = size - 1.0
    return where((coord > 0.0) & (coord < hi), coord, coord.detach().clamp(0.0, hi))


class _Taps:
    """Reads input values at integer-valued coordinates: one gather per tap. Coordinates
    come x first (along the last dimension, W), then y (H), then z (D, volumetric)."""

    def __init__(self, input: Tensor, out_shape: tuple[int, ...]) -> None:
        n, c, *spatial = input.shape
        self.flat = input.reshape(n, c, math.prod(spatial))
        self.n, self.c = n, c
        self.sizes = spatial[::-1]  # (W, H) or (W, H, D): the coordinates' order
        self.h, self.w = spatial[-2], spatial[-1]
        self.out_shape = out_shape

    def read(self, *coords: Tensor) -> tuple[Tensor, Tensor]:
        """``(values (N, C, *out), inside (N, 1, *out))`` at ``coords`` (each (N, *out)):
        outside the input (or NaN) reads 0."""
        coords = [c.detach() for c in coords]
        inside = None
        for c, size in zip(coords, self.sizes):
            ok = (c >= 0.0) & (c <= size - 1.0)
            inside = ok if inside is None else inside & ok
        pos = None  # ((z * H) + y) * W + x
        for c, size in zip(coords[::-1], self.sizes[::-1]):
            pos = c if pos is None else pos * size + c
        pos = where(inside, pos, 0.0).long()
        index = pos.reshape(self.n, 1, -1).expand(self.n, self.c, pos[0].numel())
        vals = self.flat.gather(2, index).reshape(self.n, self.c, *self.out_shape)
        return vals, inside.unsqueeze(1)


def _weighted(vals: Tensor, inside: Tensor, weight: Tensor) -> Tensor:
    """A tap's term: 0 outside the input, times its weight (NaN for a NaN coordinate)."""
    return where(inside, vals, 0.0) * weight.unsqueeze(1)


def _multilinear(taps: _Taps, coords: list) -> Tensor:
    """Bilinear (x, y) or trilinear (x, y, z) interpolation: the corner taps in order x
    fastest, each weighted by the product of its per-coordinate weights (x's first)."""
    lows = [c.detach().floor() for c in coords]
    corners = []
    for c, lo in zip(coords, lows):
        hi = lo + 1.0
        corners.append(((lo, hi - c), (hi, c - lo)))  # (tap coordinate, weight)
    n = len(coords)
    out = None
    for bits in itertools.product((0, 1), repeat=n):  # (the last bit varies fastest: x's)
        picks = [corners[k][bits[n - 1 - k]] for k in range(n)]  # per coordinate, x first
        weight = picks[0][1]
        for _, w in picks[1:]:
            weight = weight * w
        term = _weighted(*taps.read(*(tap for tap, _ in picks)), weight)
        out = term if out is None else out + term
    return out


def _cubic_weights(t: Tensor) -> list[Tensor]:
    """Keys' cubic convolution weights of the taps at offsets -1, 0, 1, 2 from ``floor``."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _bicubic(taps: _Taps, ix: Tensor, iy: Tensor, padding_mode: str,
             align_corners: bool) -> Tensor:
    x0, y0 = ix.detach().floor(), iy.detach().floor()
    wx, wy = _cubic_weights(ix - x0), _cubic_weights(iy - y0)
    out = None
    for j in range(4):
        cy = _pad_coordinates(y0 + (j - 1.0), taps.h, padding_mode, align_corners)
        for i in range(4):
            cx = _pad_coordinates(x0 + (i - 1.0), taps.w, padding_mode, align_corners)
            term = _weighted(*taps.read(cx, cy), wx[i] * wy[j])
            out = term if out is None else out + term
    return out


def _check_grid_sample(input: Tensor, grid: Tensor, mode: str, padding_mode: str) -> None:
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    shape_in, shape_grid = list(input.shape), list(grid.shape)
    if grid.dim() < 1 or grid.shape[-1] != input.dim() - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in "
                           f"last dimension, but got grid with sizes {shape_grid}")
    if input.dim() != grid.dim() or input.dim() not in (4, 5):
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number "
                           f"of dimensions, but got input with sizes {shape_in} and grid with "
                           f"sizes {shape_grid}")
    if input.dim() == 5 and mode == "bicubic":
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {shape_in} and grid with sizes "
                           f"{shape_grid}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"expected scalar type {_scalar_name(input)} but found "
                           f"{_scalar_name(grid)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f'"grid_sampler_2d_cpu" not implemented for '
                           f"'{_scalar_name(input)}'")
    if input.device != grid.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                           f"two devices, {input.device} and {grid.device}!")


def _scalar_name(t: Tensor) -> str:
    return t.dtype.tensor_type.replace("Tensor", "")


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """Sample ``input`` ``(N, C, H, W)`` at the normalised points of ``grid``
    ``(N, Ho, Wo, 2)`` (``grid[..., 0]`` is x, along W; -1 and 1 the input's edges, or its
    corner pixels' centres with ``align_corners=True``): ``(N, C, Ho, Wo)``. Volumetric:
    ``(N, C, D, H, W)`` at ``(N, Do, Ho, Wo, 3)`` (x, y, z) gives ``(N, C, Do, Ho, Wo)``
    (bilinear is then trilinear; bicubic is 4-D only, as PyTorch's)."""
    input = as_tensor_arg(input, "input")
    grid = as_tensor_arg(grid, "grid")
    _check_grid_sample(input, grid, mode, padding_mode)
    align_corners = _align(align_corners)
    n, c, *spatial = input.shape
    out_shape = tuple(grid.shape[1:-1])
    if n * c * math.prod(out_shape) == 0 or math.prod(spatial) == 0:
        zero = input.sum() * 0.0 + grid.sum() * 0.0  # (keeps requires_grad)
        return zero + creation.zeros((n, c, *out_shape), dtype=input.dtype,
                                     device=input.device)
    sizes = spatial[::-1]  # x along W, y along H, z along D
    coords = [_unnormalize(grid[..., k], size, align_corners) for k, size in enumerate(sizes)]
    taps = _Taps(input, out_shape)
    if mode == "bicubic":
        return _bicubic(taps, coords[0], coords[1], padding_mode, align_corners)
    coords = [_pad_coordinates(co, size, padding_mode, align_corners)
              for co, size in zip(coords, sizes)]
    if mode == "bilinear":
        return _multilinear(taps, coords)
    vals, inside = taps.read(*(co.round() for co in coords))
    out = where(inside, vals, 0.0)
    if grid.requires_grad:  # PyTorch's grid gradient for "nearest": zeros
        out = out + where(coords[0] == coords[0], coords[0] * 0.0, 0.0).unsqueeze(1) * 0.0
    return out
