"""What the element-wise op modules share: the ``defop`` shorthand and argument helpers."""

from __future__ import annotations

from ..tensor import Tensor
from .dispatch import as_tensor_arg
from .registry import ELEMENTWISE, defop

__all__ = ["ew", "is_tensor", "as_tensor", "default_float"]


def ew(name, node, inputs, expr, ref, vjp=None, **kw):
    """Declare an element-wise op (see :class:`~jitgrad.ops.registry.OpDef`)."""
    return defop(name=name, kind=ELEMENTWISE, node=node, inputs=inputs, expr=expr, ref=ref,
                 vjp=vjp, **kw)


def is_tensor(x) -> bool:
    """Whether ``x`` is a tensor (not a Python or NumPy number)."""
    return type(x) is Tensor


def as_tensor(x) -> Tensor:
    """``x`` as a tensor argument (arrays and sequences converted, never scalars)."""
    return as_tensor_arg(x)


def default_float():
    """The default float dtype (integer inputs of float ops compute in it)."""
    from ..dtypes import get_default_dtype

    return get_default_dtype()
