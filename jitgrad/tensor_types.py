"""PyTorch's legacy names, still common in published code: the typed tensor constructors
(``FloatTensor(2, 3)``, ``LongTensor([1, 2])``...; ``isinstance(t, FloatTensor)`` tests the
dtype, ``t.type(FloatTensor)`` converts) and ``autograd.Variable`` (a tensor; ``Variable(t,
requires_grad=True)`` is a new leaf sharing ``t``'s memory).

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
           "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


class _LegacyType(type):
    """Metaclass of the typed constructors: instances are the tensors of that dtype."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __call__(cls, *args) -> Tensor:
        from .creation import empty, tensor

        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            # LongTensor(2, 3); FloatTensor(): CPU types, whatever the default device
            return empty(*(args or (0,)), dtype=cls.dtype, device="cpu")
        if len(args) != 1:
            raise TypeError(f"{cls.__name__}(): expected sizes (ints) or one sequence of data, "
                            f"got {len(args)} arguments")
        data = args[0]
        if isinstance(data, Tensor):  # PyTorch: the same tensor's storage, same dtype only
            if data.dtype is not cls.dtype:
                raise TypeError(f"expected TensorOptions(dtype={cls.dtype.name}) (got "
                                f"TensorOptions(dtype={data.dtype.name}))")
            return data.detach()
        return tensor(data, dtype=cls.dtype, device="cpu")

    def __repr__(cls) -> str:
        return f"<class 'jitgrad.{cls.__name__}'>"


def _legacy(dt: dtypes.DType) -> type:
    return _LegacyType(dt.tensor_type, (), {
        "dtype": dt, "__module__": "jitgrad",
        "__doc__": f"Legacy constructor of {dt.name} tensors: ``{dt.tensor_type}(*sizes)`` "
                   f"(uninitialised) or ``{dt.tensor_type}(data)``."})


FloatTensor = _legacy(dtypes.float32)
DoubleTensor = _legacy(dtypes.float64)
HalfTensor = _legacy(dtypes.float16)
LongTensor = _legacy(dtypes.int64)
IntTensor = _legacy(dtypes.int32)
ShortTensor = _legacy(dtypes.int16)
CharTensor = _legacy(dtypes.int8)
ByteTensor = _legacy(dtypes.uint8)
BoolTensor = _legacy(dtypes.bool_)


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
