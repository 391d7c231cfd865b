"""PyTorch's legacy names, still common in published code: the typed tensor constructors
(``FloatTensor(2, 3)``, ``LongTensor([1, 2])``...; ``isinstance(t, FloatTensor)`` tests the
dtype and that ``t`` is on the CPU, ``t.type(FloatTensor)`` converts; ``jitgrad.cuda.FloatTensor``
and the other CUDA ones make and test CUDA tensors) and ``autograd.Variable`` (a tensor;
``Variable(t, requires_grad=True)`` is a new leaf sharing ``t``'s memory).

>>> import jitgrad
>>> jitgrad.FloatTensor([1, 2])
tensor([1., 2.])
>>> isinstance(jitgrad.zeros(2), jitgrad.FloatTensor), jitgrad.LongTensor(2, 3).shape
(True, jitgrad.Size([2, 3]))
"""

from __future__ import annotations

import numpy as np

from . import dtypes
from .autograd.engine import execution_engine
from .tensor import Tensor

__all__ = ["Variable", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor",
           "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor", "legacy_type",
           "set_default_tensor_type"]


class _LegacyType(type):
    """Metaclass of the typed constructors: instances are the tensors of that dtype on that
    device (``cls.is_cuda``)."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.is_cuda == cls.is_cuda

    def __call__(cls, *args) -> Tensor:
        from .creation import empty, tensor

        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            # LongTensor(2, 3); FloatTensor(): their device, whatever the default device
            return empty(*(args or (0,)), dtype=cls.dtype, device=cls.device)
        if len(args) != 1:
            raise TypeError(f"{cls.__name__}(): expected sizes (ints) or one sequence of data, "
                            f"got {len(args)} arguments")
        data = args[0]
        if isinstance(data, Tensor):  # PyTorch: the same tensor's storage, same dtype only
            if data.dtype is not cls.dtype:
                raise TypeError(f"expected TensorOptions(dtype={cls.dtype.name}) (got "
                                f"TensorOptions(dtype={data.dtype.name}))")
            if data.is_cuda != cls.is_cuda:
                raise TypeError(f"expected {cls.device} device but got {data.device.type}")
            return data.detach()
        return tensor(data, dtype=cls.dtype, device=cls.device)

    def __repr__(cls) -> str:
        return f"<class '{cls.__module__}.{cls.__name__}'>"


def _legacy(dt: dtypes.DType, cuda: bool = False) -> type:
    where = "CUDA" if cuda else "CPU"
    return _LegacyType(dt.tensor_type, (), {
        "dtype": dt, "is_cuda": cuda, "device": "cuda" if cuda else "cpu",
        "__module__": "jitgrad.cuda" if cuda else "jitgrad",
        "__doc__": f"Legacy constructor of {dt.name} {where} tensors: "
                   f"``{dt.tensor_type}(*sizes)`` (uninitialised) or ``{dt.tensor_type}(data)``."})


FloatTensor = _legacy(dtypes.float32)
DoubleTensor = _legacy(dtypes.float64)
HalfTensor = _legacy(dtypes.float16)
LongTensor = _legacy(dtypes.int64)
IntTensor = _legacy(dtypes.int32)
ShortTensor = _legacy(dtypes.int16)
CharTensor = _legacy(dtypes.int8)
ByteTensor = _legacy(dtypes.uint8)
BoolTensor = _legacy(dtypes.bool_)

_CPU_TYPES = {t.__name__: t for t in (FloatTensor, DoubleTensor, HalfTensor, LongTensor,
                                      IntTensor, ShortTensor, CharTensor, ByteTensor, BoolTensor)}
#: ``jitgrad.cuda.FloatTensor`` and the other CUDA constructors, by name
CUDA_TYPES = {name: _legacy(t.dtype, cuda=True) for name, t in _CPU_TYPES.items()}


def legacy_type(name: str) -> type | None:
    """The legacy constructor named ``name`` (``"torch.cuda.FloatTensor"``,
    ``"jitgrad.LongTensor"``, ``"FloatTensor"``...), or None."""
    name = name.removeprefix("jitgrad.").removeprefix("torch.")
    if name.startswith("cuda."):
        return CUDA_TYPES.get(name[5:])
    return _CPU_TYPES.get(name)


class _VariableMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor)

    def __call__(cls, data, requires_grad: bool = False, volatile: bool = False) -> Tensor:
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)


class Variable(metaclass=_VariableMeta):
    """Legacy ``torch.autograd.Variable``: every tensor is one (``isinstance`` holds);
    ``Variable(t, requires_grad=...)`` is a new leaf sharing ``t``'s memory (``volatile`` is
    accepted and ignored, as in PyTorch). ``Variable._execution_engine.queue_callback(fn)``
    runs ``fn`` at the end of the running backward pass."""

    _execution_engine = execution_engine


#: whether the default device is CUDA because a CUDA tensor type was made the default
_device_from_type = False


def _import_dotted_name(name: str):
    """The object a dotted name names (``"torch.FloatTensor"``: ``torch`` is jitgrad)."""
    import importlib

    first, *rest = name.split(".")
    obj = importlib.import_module("jitgrad" if first == "torch" else first)
    for part in rest:
        obj = getattr(obj, part)
    return obj


def set_default_tensor_type(t: type | str, /) -> None:
    """Deprecated (warns, as PyTorch since 2.1): make the floating tensor type ``t``
    (``jitgrad.DoubleTensor``, ``"torch.FloatTensor"``, ``jitgrad.cuda.FloatTensor``...)
    the default -- its dtype becomes the default dtype (:func:`jitgrad.set_default_dtype`)
    and, for a CUDA type, CUDA the default device (a CPU type then makes it the CPU again).
    A CUDA type without a usable CUDA device raises TypeError, as PyTorch built without
    CUDA does. Use ``set_default_dtype`` / ``set_default_device``."""
    global _device_from_type
    import warnings

    from . import devices

    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
                  UserWarning, stacklevel=2)
    if isinstance(t, str):
        t = _import_dotted_name(t)
    if not isinstance(t, _LegacyType):
        raise TypeError("invalid type object: only floating-point types are supported as the "
                        "default type")
    if not t.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    if t.is_cuda:
        from . import cuda

        if not cuda.is_available():
            raise TypeError(f"type torch.cuda.{t.__name__} not available. Torch not compiled "
                            f"with CUDA enabled.")
        dtypes.set_default_dtype(t.dtype)
        devices.set_default_device("cuda")
        _device_from_type = True
        return
    dtypes.set_default_dtype(t.dtype)
    if _device_from_type:
        devices.set_default_device(None)
        _device_from_type = False
