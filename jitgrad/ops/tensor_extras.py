"""Tensor methods and functions that are no op of their own: sizes and storage
(``nbytes``, ``storage_offset``), conversions (``short``, ``byte``, ``char``), the legacy
constructor ``new``, the CPU-only ``apply_`` / ``map_`` (a Python callable per element),
the conjugate transposes ``H`` / ``mH`` (``T`` / ``mT`` of the conjugate; of a real tensor
itself), truth and shape queries (``is_nonzero``, ``is_same_size``, ``is_signed``),
``share_memory_``, and the ``jitgrad.*`` functions of methods (``nonzero``, ``detach``...).

``share_memory_`` returns the tensor unchanged: jitgrad's CPU tensors are NumPy arrays in
the process's memory, and ``jitgrad.multiprocessing`` has no shared-memory reducers to move
them into (processes that ``fork()`` see them copy-on-write; ``spawn``'s children get
pickled copies), so Hogwild-style training updates separate copies. ``apply_`` and ``map_``
bump the tensor's version (PyTorch's do not), so a value saved for backward that they
change raises instead of giving a wrong gradient.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import devices, dtypes
from ..tensor import Size, Tensor, alias
from . import copies
from . import movement as M
from .as_strided import as_strided, storage_root
from .inplace import check_writeable

__all__ = ["nonzero", "detach", "is_nonzero", "is_same_size", "is_signed", "EXTRA_METHODS"]


# --------------------------------------------------------------------- functions
def nonzero(input: Tensor, *, out=None, as_tuple: bool = False):
    """The indices of the nonzero elements: one row each (``as_tuple``: one index tensor per
    dim; a 0-d input counts as 1-d)."""
    r = input.nonzero(as_tuple=as_tuple)
    if out is None:
        return r
    from .inplace import write_out

    return write_out(out, r, "nonzero")


def detach(input: Tensor) -> Tensor:
    """``input.detach()``: the same data, no history."""
    return input.detach()


def is_nonzero(input: Tensor) -> bool:
    """Whether the one element of ``input`` is nonzero (NaN counts as nonzero); PyTorch's
    error for zero or several elements."""
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item() != 0)


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """Whether ``input`` and ``other`` have the same shape."""
    return tuple(input.shape) == tuple(other.shape)


def is_signed(input: Tensor) -> bool:
    """Whether ``input``'s dtype holds negative numbers (floats and signed integers)."""
    return input.dtype.is_signed


# ----------------------------------------------------------------------- methods
def _nbytes(self) -> int:
    return self._data.size * self._data.dtype.itemsize


def _storage_offset(self) -> int:
    """Elements between the start of the memory the tensor views (its base's) and its first
    element."""
    from ..trace.state import STATE

    if STATE.tracer is not None:
        STATE.tracer.argument_state(self, "reading storage_offset()")
    return storage_root(self._data)[1]


def _conversion(dt):
    def method(self, memory_format=None) -> Tensor:
        return copies.to_dtype(self, dt)
    method.__doc__ = f"``self.to({dt})``."
    return method


def _share_memory_(self) -> Tensor:
    """``self``, unchanged (jitgrad has no shared-memory storage to move it to)."""
    return self


def _new(self, *args, device=None, **kwargs) -> Tensor:
    """The legacy constructor: ``t.new()`` (empty), ``t.new(2, 3)`` / ``t.new(Size)``
    (uninitialised, of ``t``'s dtype and device), ``t.new(data)`` (a sequence or array:
    values of ``t``'s dtype), ``t.new(other)`` (``other`` itself when of ``t``'s dtype)."""
    from ..creation import empty, tensor

    if kwargs:
        raise TypeError(f"new() received an invalid combination of arguments - got "
                        f"unexpected keyword arguments {sorted(kwargs)}")
    dev = self.device if device is None else devices.parse(device)
    if not args:
        return empty(0, dtype=self.dtype, device=dev)
    if len(args) == 1:
        a = args[0]
        if isinstance(a, Tensor):
            if a.dtype is not self.dtype:
                raise TypeError(f"expected {self.dtype} (got {a.dtype})")
            return alias(a._data)
        if isinstance(a, Size):
            return empty(tuple(a), dtype=self.dtype, device=dev)
        if isinstance(a, (list, tuple, np.ndarray)):
            return tensor(a, dtype=self.dtype, device=dev)
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"new(): data must be a sequence (got {type(a).__name__})")
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in args):
        raise TypeError("new() received an invalid combination of arguments - expected "
                        "sizes (ints), a Size, a sequence or a Tensor")
    return empty(tuple(int(n) for n in args), dtype=self.dtype, device=dev)


def _check_apply(self, name: str) -> None:
    if not devices.is_cpu_array(self._data):
        raise RuntimeError(f"{name} is only implemented on CPU tensors")
    if self._requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use "
                           f"var.detach().{name}() instead.")
    check_writeable(self)


def _python_per_element(name: str) -> None:
    """``apply_``/``map_`` run a Python callable on each element's value and write the results
    into the tensor's memory: nothing a trace can record (a value escaping it)."""
    from ..trace.state import STATE

    if STATE.tracer is not None:
        STATE.tracer.escape(f"{name} (a Python callable on each element)")


def _apply_(self, callable) -> Tensor:  # noqa: A002 - PyTorch's parameter name
    """Replace each element ``x`` with ``callable(x)`` (a Python number in, cast back to the
    dtype; CPU only)."""
    _check_apply(self, "apply_")
    _python_per_element("apply_")
    a = self._data
    flat = [callable(v) for v in a.reshape(-1).tolist()]
    a[...] = np.asarray(flat, dtype=object).reshape(a.shape).astype(a.dtype) if flat else a
    self._vc[0] += 1
    return self


def _map_(self, tensor: Tensor, callable) -> Tensor:  # noqa: A002
    """Replace each element ``x`` with ``callable(x, y)``, ``y`` the matching element of
    ``tensor`` (broadcast to this shape, same dtype; CPU only)."""
    _check_apply(self, "map_")
    if tensor.dtype is not self.dtype:
        raise TypeError(f"map_: expected torch.{self.dtype.tensor_type} for 'other' (got "
                        f"torch.{tensor.dtype.tensor_type})")
    _python_per_element("map_")
    other = tensor.expand(*self.shape)._data
    a = self._data
    flat = [callable(x, y) for x, y in zip(a.reshape(-1).tolist(), other.reshape(-1).tolist())]
    a[...] = np.asarray(flat, dtype=object).reshape(a.shape).astype(a.dtype) if flat else a
    self._vc[0] += 1
    return self


def _H(self) -> Tensor:  # noqa: N802 - PyTorch's name
    nd = self.dim()
    if nd == 0:
        warnings.warn("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().",
                      UserWarning, stacklevel=2)
        return self
    if nd != 2:
        extra = " For batches of matrices, consider using tensor.mH" if nd > 2 else ""
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{nd}-D tensor.{extra}")
    return M.transpose(_conj(self), 0, 1)


def _mH(self) -> Tensor:  # noqa: N802 - PyTorch's name
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. "
                           f"Got {self.dim()}-D tensor.")
    return M.transpose(_conj(self), -2, -1)


def _conj(t: Tensor) -> Tensor:
    """``t``'s complex conjugate (a real tensor itself)."""
    if t._data.dtype.kind != "c":
        return t
    from .complex_functions import conj

    return conj(t)


EXTRA_METHODS = {
    "nbytes": property(_nbytes, doc="Bytes the elements take (``numel() * itemsize``)."),
    "storage_offset": _storage_offset, "as_strided": as_strided,
    "short": _conversion(dtypes.int16), "byte": _conversion(dtypes.uint8),
    "char": _conversion(dtypes.int8),
    "share_memory_": _share_memory_, "new": _new, "apply_": _apply_, "map_": _map_,
    "H": property(_H, doc="The conjugate transpose of a matrix (real: its transpose)."),
    "mH": property(_mH, doc="The conjugate transpose of the last two dims (real: ``mT``)."),
    "is_nonzero": is_nonzero, "is_same_size": is_same_size, "is_signed": is_signed,
}
