"""Storages: the memory a tensor views, as PyTorch's ``UntypedStorage`` (bytes) and the
legacy ``TypedStorage`` (elements of a dtype), from ``Tensor.untyped_storage()`` and
``Tensor.storage()``.

A jitgrad tensor's memory is an array (NumPy on the CPU, CuPy on CUDA); its storage is the
array that owns that memory -- the last one down the view's ``base`` chain -- so views of
one tensor have one storage, and ``x.untyped_storage().data_ptr() ==
y.untyped_storage().data_ptr()`` tests whether ``x`` and ``y`` share memory, as in PyTorch.
Storages are read-only windows here: they report their address, size and contents; they do
not resize or copy (jitgrad's tensors are not built on storages).

>>> import jitgrad
>>> x = jitgrad.arange(6.0)
>>> x[2:].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
True
>>> x.untyped_storage().nbytes(), len(x[2:].untyped_storage())
(24, 24)
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from . import devices, dtypes
from .ops.as_strided import storage_root

__all__ = ["UntypedStorage", "TypedStorage", "is_storage", "untyped_storage_of",
           "typed_storage_of"]

_TYPED_DEPRECATED = ("TypedStorage is deprecated. It will be removed in the future and "
                     "UntypedStorage will be the only storage class. This should only matter "
                     "to you if you are using storages directly.  To access UntypedStorage "
                     "directly, use tensor.untyped_storage() instead of tensor.storage()")


def _address(a) -> int:
    return a.ctypes.data if devices.is_cpu_array(a) else int(a.data.ptr)


class UntypedStorage:
    """The bytes of memory one or more tensors view (``Tensor.untyped_storage()``):
    ``data_ptr()``, ``nbytes()``, ``size()`` and ``len()`` (bytes), ``device``, and the
    byte values (``storage[i]``, ``tolist()``)."""

    __slots__ = ("_root",)

    def __init__(self, root) -> None:
        self._root = root

    def data_ptr(self) -> int:
        """The address of the first byte."""
        return _address(self._root)

    def nbytes(self) -> int:
        """Its size in bytes."""
        return int(self._root.nbytes)

    def size(self) -> int:
        """Its size in bytes (as :meth:`nbytes`)."""
        return self.nbytes()

    def __len__(self) -> int:
        return self.nbytes()

    def element_size(self) -> int:
        """1: an untyped storage's elements are bytes."""
        return 1

    @property
    def device(self) -> devices.device:
        """Where the memory is (``cpu`` or ``cuda:0``)."""
        return devices.device("cpu") if devices.is_cpu_array(self._root) \
            else devices.device("cuda", 0)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def is_shared(self) -> bool:
        """Whether the memory is shared between processes: True for CUDA memory (as PyTorch
        reports), False for jitgrad's CPU memory (``share_memory_`` does not move it)."""
        return self.is_cuda

    def _host_bytes(self) -> np.ndarray:
        root = self._root
        host = root if devices.is_cpu_array(root) else root.get()
        return np.ascontiguousarray(host).reshape(-1).view(np.uint8)

    def __getitem__(self, index: int) -> int:
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"can't index a {type(self).__name__} with "
                            f"{type(index).__name__}")
        n = self.nbytes()
        if not -n <= index < n:
            raise IndexError(f"index {index} out of range for storage of size {n}")
        return int(self._host_bytes()[index])

    def tolist(self) -> list[int]:
        """The byte values."""
        return self._host_bytes().tolist()

    def __repr__(self) -> str:
        body = "\n".join(f" {b}" for b in self.tolist())
        return (f"{body}\n[jitgrad.storage.UntypedStorage(device={self.device}) of size "
                f"{self.nbytes()}]")


class TypedStorage:
    """The legacy storage of ``Tensor.storage()``: the same memory as
    :class:`UntypedStorage`, counted in elements of ``dtype`` (``size()`` and ``len()`` are
    element counts; ``nbytes()`` and ``data_ptr()`` as the untyped storage's)."""

    __slots__ = ("_untyped", "dtype")

    def __init__(self, untyped: UntypedStorage, dtype: dtypes.DType) -> None:
        self._untyped, self.dtype = untyped, dtype

    def untyped(self) -> UntypedStorage:
        """The bytes behind it."""
        return self._untyped

    def data_ptr(self) -> int:
        return self._untyped.data_ptr()

    def nbytes(self) -> int:
        return self._untyped.nbytes()

    def element_size(self) -> int:
        return self.dtype.itemsize

    def size(self) -> int:
        """Its size in elements of ``dtype``."""
        return self.nbytes() // self.element_size()

    def __len__(self) -> int:
        return self.size()

    @property
    def device(self) -> devices.device:
        return self._untyped.device

    @property
    def is_cuda(self) -> bool:
        return self._untyped.is_cuda

    def is_shared(self) -> bool:
        return self._untyped.is_shared()

    def _host_values(self) -> np.ndarray:
        return self._untyped._host_bytes()[:self.size() * self.element_size()].view(
            self.dtype.np)

    def __getitem__(self, index: int) -> Any:
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"can't index a {type(self).__name__} with "
                            f"{type(index).__name__}")
        n = self.size()
        if not -n <= index < n:
            raise IndexError(f"index {index} out of range for storage of size {n}")
        return self._host_values()[index].item()

    def tolist(self) -> list:
        return self._host_values().tolist()

    def __repr__(self) -> str:
        body = "\n".join(f" {v}" for v in self.tolist())
        return (f"{body}\n[jitgrad.storage.TypedStorage(dtype={self.dtype}, "
                f"device={self.device}) of size {self.size()}]")


def is_storage(obj: Any) -> bool:
    """Whether ``obj`` is a storage (:class:`UntypedStorage` or :class:`TypedStorage`, from
    ``Tensor.untyped_storage()`` / ``Tensor.storage()``); False for tensors and anything
    else."""
    return type(obj) in (UntypedStorage, TypedStorage)


def _read_memory(tensor, what: str) -> None:
    from .trace.state import STATE

    if STATE.tracer is not None:  # each call's arrays are its own
        STATE.tracer.graph_break(f"{what} is read (a memory address)")


def untyped_storage_of(tensor) -> UntypedStorage:
    """``Tensor.untyped_storage()``: the bytes of the memory the tensor views (shared by
    its views)."""
    _read_memory(tensor, "untyped_storage()")
    return UntypedStorage(storage_root(tensor._data)[0])


def typed_storage_of(tensor) -> TypedStorage:
    """``Tensor.storage()`` (deprecated, with PyTorch's warning): the memory the tensor
    views, in elements of its dtype."""
    warnings.warn(_TYPED_DEPRECATED, UserWarning, stacklevel=2)
    _read_memory(tensor, "storage()")
    return TypedStorage(UntypedStorage(storage_root(tensor._data)[0]), tensor.dtype)
