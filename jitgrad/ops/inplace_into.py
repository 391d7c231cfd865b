"""In-place methods computed straight into the tensor's memory.

``x.mul_(y)`` is ``apply_inplace(x, mul(x, y))``: a new result array, then a copy back (three
passes over memory and an allocation for one pass of arithmetic). Where nothing needs that
general path -- no tracer, no autograd recording, a contiguous writeable CPU float tensor,
operands of its shape and dtype or Python numbers (``dispatch.elementwise_into``; on CUDA
its CUDA kernel) -- the methods below run the op's in-place kernel instead: the same op, the
same kernel expression, the same bits, one pass. An eager optimizer step is made of such
calls (Adam: ``lerp_``, ``mul_``, ``addcmul_``, ``add_``, ``addcdiv_``). Each function returns
False when its case does not apply; the method then takes the general path, which also
raises the errors.

Only methods whose out-of-place function reads ``self`` in one kernel are listed (a
composite reading it twice would see its own partial result): ``addcmul_`` computes its
product as ``addcmul`` does, then adds it into ``self``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..autograd.grad_mode import STATE as _GRAD
from ..devices import is_cpu_array
from ..tensor import Tensor
from ..trace.state import STATE as _TRACE
from .arithmetic import ADD, ADD_SCALED, DIV, MUL, SUB
from .dispatch import binary_into, elementwise_into
from .nnops.pointwise import ADDCDIV, LERP

__all__ = ["INTO"]

_NUMBERS = (float, int)


def _operand(x) -> bool:
    return type(x) is Tensor or type(x) in _NUMBERS


def _add_(self, other, *, alpha=None) -> bool:
    if alpha is None or alpha == 1:
        return _operand(other) and binary_into(ADD, self, other)
    # add(): two float tensors of one dtype and an alpha are one op (ADD_SCALED)
    return (type(other) is Tensor and other._data.dtype == self._data.dtype
            and self._data.dtype.kind == "f"
            and binary_into(ADD_SCALED, self, other, {"alpha": alpha}))


def _sub_(self, other, *, alpha=None) -> bool:
    return (alpha is None or alpha == 1) and _operand(other) and binary_into(SUB, self, other)


def _mul_(self, other) -> bool:
    return _operand(other) and binary_into(MUL, self, other)


def _div_(self, other, *, rounding_mode=None) -> bool:
    return rounding_mode is None and _operand(other) and binary_into(DIV, self, other)


def _addcdiv_(self, tensor1, tensor2, *, value=1) -> bool:
    return elementwise_into(ADDCDIV, self, (tensor1, tensor2), {"value": float(value)})


def _lerp_(self, end, weight) -> bool:
    return type(weight) in _NUMBERS and elementwise_into(LERP, self, (end,),
                                                         {"weight": float(weight)})


def _addcmul_(self, tensor1, tensor2, *, value=1) -> bool:
    d = self._data
    if (_TRACE.tracer is not None or type(tensor1) is not Tensor
            or type(tensor2) is not Tensor or d.dtype.kind != "f"
            or tensor1._data.shape != d.shape or tensor2._data.shape != d.shape
            or tensor1._data.dtype != d.dtype or tensor2._data.dtype != d.dtype
            or not _into_target(d, tensor1._data, tensor2._data)):
        return False
    if grad_recording(self, tensor1, tensor2):
        return False
    # addcmul's composite (pointwise.addcmul): (tensor1 * value) * tensor2, then the add;
    # the product formed in one fresh array (its second factor multiplied in place)
    prod = tensor1 * float(value) if value != 1 else tensor1 * tensor2
    if value != 1 and not binary_into(MUL, prod, tensor2):
        prod = prod * tensor2
    return binary_into(ADD, self, prod)


def _into_target(d, *others) -> bool:
    """Whether array ``d`` can be written in place with ``others`` on its device: a
    contiguous writeable NumPy array, or contiguous CUDA memory with CUDA operands (mixed
    devices take the general path, which raises PyTorch's error)."""
    if type(d) is np.ndarray:
        return d.flags.c_contiguous and d.flags.writeable and all(
            type(o) is np.ndarray for o in others)
    return (not is_cpu_array(d) and d.flags.c_contiguous
            and not any(is_cpu_array(o) for o in others))


def grad_recording(*tensors: Tensor) -> bool:
    """Whether autograd would record an op on these tensors."""
    return _GRAD.enabled and any(t._requires_grad for t in tensors)


#: in-place method name -> its straight-into function (``api.inplace_method``)
INTO: dict[str, Callable[..., bool]] = {
    "add_": _add_, "__iadd__": _add_, "sub_": _sub_, "__isub__": _sub_,
    "mul_": _mul_, "__imul__": _mul_, "div_": _div_, "__itruediv__": _div_,
    "addcdiv_": _addcdiv_, "lerp_": _lerp_, "addcmul_": _addcmul_,
}
