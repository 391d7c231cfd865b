"""PyTorch's memory formats: ``jitgrad.contiguous_format``, ``channels_last`` (4-D, NHWC
memory), ``channels_last_3d`` (5-D, NDHWC) and ``preserve_format``.

A tensor's shape is logical (N, C, H, W) whatever its memory: ``channels_last`` only orders
the memory, as in PyTorch (``x.to(memory_format=jitgrad.channels_last)`` keeps the values
and the shape, ``x.is_contiguous()`` is then False and ``x.is_contiguous(memory_format=
jitgrad.channels_last)`` True; ops read any layout)."""

from __future__ import annotations

from ._named import Named

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d",
           "preserve_format", "legacy_contiguous_format", "in_layout", "has_layout"]


class memory_format(Named):  # noqa: N801 - PyTorch's name
    """A memory layout (the four module constants are its only instances)."""

    __slots__ = ()


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
#: PyTorch's alias of row-major order kept for old code (``F.gumbel_softmax``'s)
legacy_contiguous_format = contiguous_format

_ORDER = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def _checked(fmt) -> memory_format:
    if not isinstance(fmt, memory_format):
        raise TypeError(f"memory_format must be jitgrad.memory_format, not "
                        f"{type(fmt).__name__}")
    return fmt


def _order(fmt: memory_format, ndim: int) -> tuple | None:
    """The dims in memory order for ``fmt`` (None: row-major)."""
    spec = _ORDER.get(_checked(fmt))
    if spec is None:
        return None
    if ndim != spec[0]:
        raise RuntimeError(f"required rank {spec[0]} tensor to use {fmt.name} format")
    return spec[1]


def has_layout(a, fmt) -> bool:
    """Whether array ``a`` is dense in ``fmt``'s memory order (``is_contiguous``)."""
    if fmt is None or _checked(fmt) is contiguous_format or fmt is preserve_format:
        return a.flags.c_contiguous  # (PyTorch's answer for preserve_format too)
    spec = _ORDER[fmt]
    if a.ndim != spec[0]:
        return False
    return a.transpose(spec[1]).flags.c_contiguous


def in_layout(a, fmt):
    """A copy of array ``a`` (same shape, same values) whose memory is in ``fmt``'s order."""
    from .devices import array_namespace

    xp = array_namespace(a)
    order = _order(fmt, a.ndim)
    if order is None:
        return xp.ascontiguousarray(a)
    back = [0] * len(order)
    for i, d in enumerate(order):
        back[d] = i
    return xp.ascontiguousarray(a.transpose(order)).transpose(back)
