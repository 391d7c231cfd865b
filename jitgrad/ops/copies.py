"""Copies and dtype conversion: clone, contiguous, to_dtype (``tensor.to(dtype)``),
to_device, pin_memory."""

from __future__ import annotations

import numpy as np

from .. import devices, dtypes
from ..devices import array_namespace
from ..memory_format import contiguous_format, has_layout, in_layout, preserve_format
from ..tensor import Tensor
from .api import api
from .dispatch import call
from .registry import MOVEMENT, defop

__all__ = ["clone", "contiguous", "to_dtype", "to_device", "pin_memory"]


CLONE = defop(name="clone", kind=MOVEMENT, inputs=("a",), node="CloneBackward0",
              ref=lambda a: array_namespace(a).array(a, copy=True, order="C"), expr="a",
              copies=True,
              vjp=lambda g, ins, out, p, n: (g,))


@api(CLONE, method="clone", export="clone")
def clone(input: Tensor, memory_format=None) -> Tensor:
    """A copy that stays in the graph: row-major, or in ``memory_format``'s order when it is
    ``channels_last`` / ``channels_last_3d`` (``preserve_format``, the default, gives
    row-major memory: jitgrad's ops make row-major results)."""
    out = call(CLONE, (input,), None)
    if memory_format is not None and memory_format is not preserve_format \
            and memory_format is not contiguous_format:
        _relayout(out, memory_format)
    return out


@api(CLONE, method="contiguous")
def contiguous(input: Tensor, memory_format=None) -> Tensor:
    """``input`` itself when its memory is dense in ``memory_format``'s order (row-major by
    default; ``channels_last``: NHWC), else a copy in that order."""
    fmt = contiguous_format if memory_format is None else memory_format
    if has_layout(input._data, fmt):
        return input
    if fmt is preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return clone(input, memory_format=fmt)


def _relayout(out: Tensor, fmt) -> None:
    """Put a fresh copy's memory (a clone's output, nothing else refers to it) in ``fmt``'s
    order. Under ``jitgrad.compile`` the copy stays row-major: the plan's arrays are its own
    (the values are the same; reading strides is a graph break anyway)."""
    from ..trace.state import STATE

    arr = in_layout(out._data, fmt)  # (checks the rank first)
    if STATE.tracer is None:
        out._data = arr


def _to_dtype_ref(a, dtype, in_dtype):
    if a.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        a = a.real  # (PyTorch's cast: the real part; to_dtype warns as PyTorch does)
    return a.astype(dtype)


TO_DTYPE = defop(name="to_dtype", kind=MOVEMENT, inputs=("a",), params=("dtype", "in_dtype"),
                 node="ToCopyBackward0", ref=_to_dtype_ref,
                 vjp=lambda g, ins, out, p, n: (to_dtype(g, dtypes.from_numpy_dtype(
                     p["in_dtype"])) if np.dtype(p["in_dtype"]).kind in "fc" else None,))


@api(TO_DTYPE)
def to_dtype(input: Tensor, dtype, copy: bool = False) -> Tensor:
    """Convert to ``dtype`` (``input`` itself when already of it, unless ``copy``)."""
    d = dtypes.to_dtype(dtype)
    if input._data.dtype == d.np and not copy:
        return input
    if input._data.dtype.kind == "c" and d.category < 3 and not _in_backward():
        import warnings

        warnings.warn("Casting complex values to real discards the imaginary part",
                      UserWarning, stacklevel=3)
    return call(TO_DTYPE, (input,), {"dtype": d.np, "in_dtype": input._data.dtype})


def _in_backward() -> bool:
    """Whether a backward pass runs on this thread (a gradient rule's cast to a real
    input's dtype takes the real part silently, as PyTorch's does)."""
    from ..autograd.engine import _FRAMES

    return bool(_FRAMES.stack)


TO_DEVICE = defop(name="to_device", kind=MOVEMENT, inputs=("a",), params=("device", "in_device"),
                  node="ToCopyBackward0",
                  ref=lambda a, device, in_device: devices.to_device(a, device),
                  vjp=lambda g, ins, out, p, n: (to_device(g, p["in_device"]),))


@api(TO_DEVICE)
def to_device(input: Tensor, device, copy: bool = False) -> Tensor:
    """``input`` on ``device`` (itself when already there, unless ``copy``); differentiable:
    the gradient goes back to ``input``'s device."""
    dev = devices.parse(device)
    here = input.device
    if dev == here:
        return clone(input) if copy else input
    return call(TO_DEVICE, (input,), {"device": dev, "in_device": here})


def _pinned(a):
    from ..cuda.pinned import pinned_copy

    return pinned_copy(a)


PIN_MEMORY = defop(name="pin_memory", kind=MOVEMENT, inputs=("a",), node="PinMemoryBackward0",
                   ref=_pinned, vjp=lambda g, ins, out, p, n: (g,))


@api(PIN_MEMORY, method="pin_memory")
def pin_memory(input: Tensor, device=None) -> Tensor:
    """A copy of CPU tensor ``input`` in page-locked host memory, which a GPU copies from
    without staging (``input`` itself when already pinned); differentiable. Needs CUDA
    (PyTorch's error otherwise)."""
    if not devices.is_cpu_array(input._data):
        raise RuntimeError(f"cannot pin '{input.type()}' only dense CPU tensors can be pinned")
    from ..cuda.pinned import is_pinned

    if is_pinned(input._data):
        return input
    return call(PIN_MEMORY, (input,), None)
