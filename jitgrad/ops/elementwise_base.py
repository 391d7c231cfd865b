"""What the element-wise op modules share: the ``defop`` shorthand and argument helpers."""

from __future__ import annotations

from ..amp.autocast_mode import autocast_op
from ..amp.policy import listed
from ..tensor import Tensor
from .api import api
from .dispatch import as_tensor_arg, unary
from .registry import ELEMENTWISE, defop

__all__ = ["ew", "is_tensor", "as_tensor", "default_float", "unary_public"]


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


def unary_public(op, names: tuple[str, ...], doc: str):
    """The public function of one-input element-wise op ``op``: ``jitgrad.<name>``, the
    ``Tensor.<name>`` methods and their in-place ``<name>_`` forms, for each of ``names``."""
    def fn(input: Tensor) -> Tensor:
        return unary(op, input)
    fn.__name__ = fn.__qualname__ = names[0]
    fn.__doc__ = doc
    if listed(names[0]):  # autocast lists it (jitgrad.amp.policy): log2, sinh, tan...
        fn = autocast_op(fn)
    return api(op, method=names, inplace=tuple(n + "_" for n in names), export=names)(fn)
