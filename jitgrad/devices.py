"""Devices: ``jitgrad.device``, which device an array lives on, and the same-device rule.

A tensor's device is a property of its array, never a field of its own: a NumPy array lives
on the CPU, a CUDA array (a CuPy array on a GPU, a :class:`jitgrad.cuda.runtime.SimArray`
under Numba's CUDA simulator) on ``cuda:0``. Asking costs one type check for CPU arrays, and
nothing CUDA is imported until a CUDA array exists.
"""

from __future__ import annotations

import re
import sys
import threading

import numpy as np

__all__ = ["device", "CPU", "CUDA0", "device_of", "parse", "check_same_device",
           "is_cpu_array", "to_host", "to_device", "array_namespace", "get_default_device",
           "set_default_device", "factory_device", "array_module", "first_outside", "add_at",
           "as_array", "is_writeable", "row_major"]

_ndarray = np.ndarray
_TYPES = ("cpu", "cuda", "meta", "mps", "xpu")
#: PyTorch's form of a device string: a type, then optionally ``:`` and an index
_DEVICE_STRING = re.compile(r"([a-zA-Z_]+)(?::([1-9]\d*|0))?")


class device:  # noqa: N801 - PyTorch's name
    """A device: ``jitgrad.device("cuda")``, ``device("cuda:0")``, ``device("cuda", 0)``,
    ``device("cpu")``, ``device(0)`` (CUDA device 0). Compares equal to its string form.

    As a context manager (``with jitgrad.device("cuda"): ...``) it is the default device of
    the factories called inside the block, in this thread (see :func:`set_default_device`).
    """

    __slots__ = ("type", "index")

    def __init__(self, type: str | int | device, index: int | None = None) -> None:  # noqa: A002
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): an index cannot be given with a device")
            self.type, self.index = type.type, type.index
            return
        if isinstance(type, int) and not isinstance(type, bool):
            if type < 0:
                raise RuntimeError(f"Device index must not be negative, got {type}")
            type, index = "cuda", type
        if not isinstance(type, str):
            raise TypeError(f"device() received an invalid combination of arguments - got "
                            f"({_typename(type)})")
        if not type:
            raise RuntimeError("Device string must not be empty")
        m = _DEVICE_STRING.fullmatch(type)
        if m is None:
            raise RuntimeError(f"Invalid device string: '{type}'")
        name, idx = m.groups()
        if name not in _TYPES:
            raise RuntimeError(
                "Expected one of cpu, cuda, xpu, mps, meta device type at start of device "
                f"string: {type}")
        if idx:
            if index is not None:
                raise RuntimeError(f"type (string) must not include an index because index "
                                   f"was passed explicitly: {type}")
            index = int(idx)
        if index is not None and index < 0:
            raise RuntimeError(f"Device index must not be negative, got {index}")
        self.type = name
        self.index = index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return (f"device(type='{self.type}')" if self.index is None else
                f"device(type='{self.type}', index={self.index})")

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (self.type, self.index))

    def __enter__(self) -> device:
        dev = parse(self)  # a device jitgrad has no backend for fails here, not later
        _DEFAULTS.blocks.append(dev)
        return self

    def __exit__(self, *exc_info) -> None:
        _DEFAULTS.blocks.pop()


def _typename(x) -> str:
    return type(x).__name__


CPU = device("cpu")
CUDA0 = device("cuda", 0)


def parse(d) -> device | None:
    """``device=``'s argument as a device (None stays None); ``cuda`` means ``cuda:0``."""
    if d is None:
        return None
    dev = d if isinstance(d, device) else device(d)
    if dev.type == "cuda":
        idx = 0 if dev.index is None else dev.index
        if idx != 0:
            from .cuda import device_count

            if idx >= max(device_count(), 1):
                raise RuntimeError(
                    "CUDA error: invalid device ordinal\nCUDA kernel errors might be "
                    "asynchronously reported at some other API call")
        return CUDA0
    if dev.type == "cpu":
        return CPU
    raise RuntimeError(f"jitgrad has no {dev.type} backend: tensors live on 'cpu' or 'cuda'")


class _Defaults(threading.local):
    """This thread's default device: the innermost ``with device(...)`` block's, else the
    one :func:`set_default_device` set (PyTorch keeps both per thread)."""

    def __init__(self) -> None:
        self.blocks: list[device] = []
        self.default: device = CPU


_DEFAULTS = _Defaults()


def get_default_device() -> device:
    """The device factories create tensors on when given no ``device=``: ``cpu``, or
    ``cuda:0`` (with its index, as PyTorch returns it).

    >>> import jitgrad
    >>> jitgrad.get_default_device()
    device(type='cpu')
    """
    d = _DEFAULTS
    return d.blocks[-1] if d.blocks else d.default


def set_default_device(device) -> None:  # noqa: A002 - PyTorch's name
    """Make ``device`` (``"cuda"``, ``"cpu"``, a :class:`device`; None: the CPU again) the
    default device of this thread's factories (``zeros``, ``randn``, ``tensor``...) and of
    the parameters of ``nn`` layers. Calls with an explicit ``device=`` are unaffected, and
    so are ``from_numpy`` and the ``*_like`` factories (which follow their input), as in
    PyTorch. A ``with jitgrad.device(...)`` block overrides it inside the block."""
    _DEFAULTS.default = CPU if device is None else parse(device)


def factory_device(device_arg) -> device | None:
    """A factory's ``device=`` parsed; when None, the default device (None when that is the
    CPU, the factories' fast path)."""
    if device_arg is not None:
        return parse(device_arg)
    d = _DEFAULTS
    dev = d.blocks[-1] if d.blocks else d.default
    return None if dev is CPU else dev


def is_cpu_array(a) -> bool:
    """Whether ``a`` is host memory (any NumPy array that is not a simulated device array)."""
    if type(a) is _ndarray:
        return True
    rt = sys.modules.get("jitgrad.cuda.runtime")
    return rt is None or not rt.is_device_array(a)


def to_host(a):
    """A host copy of device array ``a`` (``a`` itself when it is on the host)."""
    if is_cpu_array(a):
        return a
    from .cuda.runtime import to_host as host

    return host(a)


def to_device(a, dev: device):
    """Array ``a`` on ``dev`` (itself when already there, else a copy). Complex arrays stay
    on the CPU: PyTorch's-style error (jitgrad's CUDA kernels are real-valued)."""
    if dev.type == "cpu":
        return to_host(a)
    if a.dtype.kind == "c":
        raise RuntimeError("complex tensors are CPU-only in jitgrad (its CUDA kernels are "
                           "generated for real dtypes): keep this tensor on the CPU, or "
                           "move torch.view_as_real(z) instead")
    from .cuda.runtime import to_device as todev

    return todev(a)


def array_namespace(*arrays):
    """The module to make and convert arrays with for ``arrays``' device: NumPy on the CPU,
    CuPy (or the simulator's stand-in) on CUDA. Like the array API's ``array_namespace``."""
    for a in arrays:
        if not is_cpu_array(a):
            from .cuda.runtime import xp

            return xp()
    return np


def row_major(a):
    """``a`` itself when C-contiguous, else a C-contiguous copy on its device: a result
    NumPy computes in its input's memory order (a concatenation or reduction of transposed
    arrays) made row-major, as PyTorch makes such results (``.view()`` of it works)."""
    return a if a.flags.c_contiguous else array_namespace(a).ascontiguousarray(a)


def array_module(dev: device | None):
    """The module that makes arrays on ``dev`` (None: the CPU): NumPy, or CUDA's (CuPy, or
    the simulator's stand-in; PyTorch's error when there is no CUDA)."""
    if dev is None or dev.type == "cpu":
        return np
    from .cuda.runtime import xp

    return xp()


def first_outside(a, lo: int, hi: int) -> int | None:
    """The first value of integer array ``a`` (in C order) outside ``[lo, hi)``, or None.
    Index ops check their indices with it where they run: NumPy's ``take`` would read a
    negative index from the end and CuPy's wraps any index around. On CUDA one read of the
    device (a second only to fetch a bad value)."""
    if not a.size:
        return None
    bad = (a < lo) | (a >= hi)
    return int(a[bad].reshape(-1)[0]) if bad.any() else None


def add_at(out, index, values) -> None:
    """``np.add.at(out, index, values)`` on ``out``'s device (CUDA: a deterministic kernel
    with the CPU's bits, :mod:`jitgrad.cuda.scatter`)."""
    if is_cpu_array(out):
        np.add.at(out, index, values)
        return
    from .cuda.scatter import add_at as device_add_at

    device_add_at(out, index, values)


def as_array(a):
    """``np.asarray(a)`` that keeps a device array on its device (NumPy cannot convert one
    implicitly; NumPy scalars and Python numbers become 0-d host arrays)."""
    return np.asarray(a) if is_cpu_array(a) else a


def is_writeable(a) -> bool:
    """Whether array ``a`` may be written (a NumPy array's flag; device memory always)."""
    return getattr(a.flags, "writeable", True)


def device_of(a) -> device:
    """The device array ``a`` lives on."""
    return CPU if is_cpu_array(a) else CUDA0


def check_same_device(arrays) -> None:
    """Raise PyTorch's error when ``arrays`` live on two devices (nothing is changed)."""
    devs = []
    for a in arrays:
        d = device_of(a)
        if d not in devs:
            devs.append(d)
    if len(devs) > 1:
        first, second = (devs[1], devs[0]) if devs[0] == CPU else (devs[0], devs[1])
        raise RuntimeError("Expected all tensors to be on the same device, but found at "
                           f"least two devices, {first} and {second}!")
