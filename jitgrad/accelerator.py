"""``jitgrad.accelerator``: PyTorch's device-agnostic accelerator API (``torch.accelerator``,
PyTorch 2.6+) over jitgrad's one accelerator, CUDA (a GPU, or Numba's CUDA simulator).

The accelerator is CUDA when :func:`jitgrad.cuda.is_available` says CUDA can be used, else
there is none. (PyTorch reports the accelerator it was built for even with no device
present; jitgrad's CUDA backend is pure Python, so "built" has no meaning apart from the
packages being there and a device, or the simulator, answering.) The pattern of
pytorch/examples runs unchanged:

>>> import jitgrad as torch
>>> device = (torch.accelerator.current_accelerator() if torch.accelerator.is_available()
...           else torch.device("cpu"))
>>> device.type in ("cuda", "cpu")
True
"""

from __future__ import annotations

import warnings

from . import cuda
from .devices import device as _device_cls

__all__ = ["current_accelerator", "current_device_index", "current_device_idx",
           "device_count", "device_index", "empty_cache", "is_available",
           "set_device_index", "set_device_idx", "synchronize"]

_NONE = "Cannot access accelerator device when none is available."


def current_accelerator(check_available: bool = False) -> _device_cls | None:
    """The accelerator as a device without an index (``device(type='cuda')``), or None when
    there is none. ``check_available`` is accepted for PyTorch's signature: jitgrad only
    reports an accelerator that is available."""
    return _device_cls("cuda") if cuda.is_available() else None


def is_available() -> bool:
    """Whether an accelerator can be used (``jitgrad.cuda.is_available()``)."""
    return current_accelerator() is not None


def device_count() -> int:
    """How many accelerator devices jitgrad uses: 1 with CUDA, 0 without."""
    return cuda.device_count() if is_available() else 0


def current_device_index() -> int:
    """The index of the current accelerator device (always 0: jitgrad uses device 0)."""
    if not is_available():
        raise RuntimeError(_NONE)
    return cuda.current_device()


def _device_index(device, optional: bool) -> int:
    """A device argument (int, str or device, of the accelerator's type) as an index, as
    PyTorch's ``torch.accelerator._utils._get_device_index``."""
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if isinstance(device, str):
        device = _device_cls(device)
    index = None
    if isinstance(device, _device_cls):
        acc = current_accelerator()
        if acc is None:
            raise RuntimeError("Accelerator expected")
        if acc.type != device.type:
            raise ValueError(f"{device.type} doesn't match the current accelerator {acc}.")
        index = device.index
    if index is None:
        if not optional:
            raise ValueError("Expected a torch.device with a specified index or an integer, "
                             f"but got:{device}")
        return current_device_index()
    return index


def set_device_index(device, /) -> None:
    """Select the current accelerator device (an int, or a device with an index); a
    negative index does nothing. jitgrad uses device 0: another index raises CUDA's
    invalid-ordinal error."""
    index = _device_index(device, optional=False)
    if not is_available():
        raise RuntimeError(_NONE)
    if index >= 0:
        cuda.set_device(index)


def synchronize(device=None, /) -> None:
    """Wait for every kernel launched on the accelerator so far to finish."""
    _device_index(device, optional=True)
    cuda.synchronize()


def empty_cache() -> None:
    """Release the accelerator's cached memory (nothing to do without one)."""
    if is_available():
        cuda.empty_cache()


class device_index:  # noqa: N801 - PyTorch's name
    """Context manager selecting accelerator device ``device`` (an int; None: no change)
    inside the block and restoring the previous one after it."""

    def __init__(self, device: int | None, /) -> None:
        self.idx = device
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx is not None:
            self.prev_idx = current_device_index()
            set_device_index(self.idx)

    def __exit__(self, *exc_info: object) -> None:
        if self.idx is not None and self.prev_idx >= 0:
            set_device_index(self.prev_idx)


def current_device_idx() -> int:
    """Deprecated: :func:`current_device_index`."""
    warnings.warn("Use `current_device_index` instead.", FutureWarning, stacklevel=2)
    return current_device_index()


def set_device_idx(device, /) -> None:
    """Deprecated: :func:`set_device_index`."""
    warnings.warn("Use `set_device_index` instead.", FutureWarning, stacklevel=2)
    set_device_index(device)
