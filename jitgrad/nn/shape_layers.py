"""Modules that rearrange or pad: ``Unflatten``, ``PixelShuffle`` / ``PixelUnshuffle`` and
the padding layers (``ZeroPad1d/2d/3d``, ``ConstantPad1d/2d/3d``, ``ReflectionPad1d/2d/3d``,
``ReplicationPad1d/2d/3d``, ``CircularPad1d/2d/3d``: ``F.pad`` with PyTorch's reprs)."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module

__all__ = ["Unflatten", "PixelShuffle", "PixelUnshuffle", "ZeroPad1d", "ZeroPad2d",
           "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d",
           "ReplicationPad1d", "ReplicationPad2d", "ZeroPad3d", "ConstantPad3d",
           "ReflectionPad3d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d",
           "CircularPad3d"]


class Unflatten(Module):
    """Dim ``dim`` split into ``unflattened_size``."""

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class PixelShuffle(Module):
    """:func:`jitgrad.nn.functional.pixel_shuffle` (``(*, C r^2, H, W) -> (*, C, H r, W r)``)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """:func:`jitgrad.nn.functional.pixel_unshuffle`."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class _Pad(Module):
    """``F.pad(input, padding, mode, value)`` over the last ``dims`` dims."""

    mode = "constant"
    dims = 1

    def __init__(self, padding, value: float = 0.0) -> None:
        super().__init__()
        n = 2 * self.dims
        self.padding = (padding,) * n if isinstance(padding, int) else tuple(padding)
        if len(self.padding) != n:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a {n}-tuple")
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return str(self.padding)


class _ConstantPad(_Pad):
    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


def _pad_class(name: str, base: type, mode: str, dims: int, doc: str) -> type:
    return type(name, (base,), {"mode": mode, "dims": dims, "__doc__": doc,
                                "__module__": __name__})


ZeroPad1d = _pad_class("ZeroPad1d", _Pad, "constant", 1, "Pad the last dim with zeros.")
ZeroPad2d = _pad_class("ZeroPad2d", _Pad, "constant", 2, "Pad the last 2 dims with zeros.")
ConstantPad1d = _pad_class("ConstantPad1d", _ConstantPad, "constant", 1,
                           "Pad the last dim with ``value``.")
ConstantPad2d = _pad_class("ConstantPad2d", _ConstantPad, "constant", 2,
                           "Pad the last 2 dims with ``value``.")
ReflectionPad1d = _pad_class("ReflectionPad1d", _Pad, "reflect", 1,
                             "Pad the last dim with its reflection.")
ReflectionPad2d = _pad_class("ReflectionPad2d", _Pad, "reflect", 2,
                             "Pad the last 2 dims with their reflection.")
ReplicationPad1d = _pad_class("ReplicationPad1d", _Pad, "replicate", 1,
                              "Pad the last dim with its edge values.")
ReplicationPad2d = _pad_class("ReplicationPad2d", _Pad, "replicate", 2,
                              "Pad the last 2 dims with their edge values.")
ZeroPad3d = _pad_class("ZeroPad3d", _Pad, "constant", 3, "Pad the last 3 dims with zeros.")
ConstantPad3d = _pad_class("ConstantPad3d", _ConstantPad, "constant", 3,
                           "Pad the last 3 dims with ``value``.")
ReflectionPad3d = _pad_class("ReflectionPad3d", _Pad, "reflect", 3,
                             "Pad the last 3 dims with their reflection.")
ReplicationPad3d = _pad_class("ReplicationPad3d", _Pad, "replicate", 3,
                              "Pad the last 3 dims with their edge values.")


class _CircularPad(_Pad):
    """Circular padding, with PyTorch's check of the input's rank (batched or not)."""

    mode = "circular"

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (self.dims + 1, self.dims + 2):
            raise ValueError(f"expected {self.dims + 1}D or {self.dims + 2}D input (got "
                             f"{input.ndim}D input)")
        return F.pad(input, self.padding, "circular")


CircularPad1d = _pad_class("CircularPad1d", _CircularPad, "circular", 1,
                           "Pad the last dim by wrapping it around.")
CircularPad2d = _pad_class("CircularPad2d", _CircularPad, "circular", 2,
                           "Pad the last 2 dims by wrapping them around.")
CircularPad3d = _pad_class("CircularPad3d", _CircularPad, "circular", 3,
                           "Pad the last 3 dims by wrapping them around.")
