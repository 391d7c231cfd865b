"""Functions of a float's representation: ``nextafter`` (the next representable number
toward another) and ``frexp`` (mantissa in [0.5, 1) and power-of-two exponent).

``nextafter`` is an element-wise op with PyTorch's gradient (``input``'s passes through,
``other``'s is zero). ``frexp``'s mantissa is an element-wise op whose gradient is
``g / 2 ** exponent`` (PyTorch's); its exponent (int32) an op with no gradient. Zero,
infinities and NaN have exponent 0 and are their own mantissa, as in C's ``frexp``.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..devices import array_namespace
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import binary, call, unary
from .elementwise_base import ew
from .integer_ops import require_tensor
from .registry import OPAQUE, defop

__all__ = ["nextafter", "frexp"]


def _nextafter_vjp(g, ins, out, p, n):
    return (g if n[0] else None, g * 0.0 if n[1] else None)


NEXTAFTER = ew("nextafter", "NextafterBackward0", ("a", "b"), None, np.nextafter,
               _nextafter_vjp, samples=S.binary_tensors)


def _exponent_ref(a):
    return array_namespace(a).frexp(a)[1].astype(np.int32)


FREXP_EXPONENT = defop(name="frexp_exponent", kind=OPAQUE, node=None, inputs=("a",),
                       ref=_exponent_ref, samples=S.frexp)


def _mantissa_vjp(g, ins, out, p, n):
    from .transcendental import exp2

    e = call(FREXP_EXPONENT, (ins[0],))
    return (g / exp2(e.to(g.dtype)),)


def _mantissa_ref(a):
    return array_namespace(a).frexp(a)[0]


FREXP_MANTISSA = ew("frexp_mantissa", "FrexpBackward0", ("a",), None, _mantissa_ref,
                    _mantissa_vjp, save=(0,), samples=S.frexp)


@api(NEXTAFTER, method="nextafter", inplace="nextafter_", export="nextafter")
def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """The next floating-point number after ``input`` toward ``other`` (``input`` where
    they are equal), element-wise."""
    require_tensor("nextafter", "input", 1, input)
    require_tensor("nextafter", "other", 2, other)
    from .. import dtypes

    dt = dtypes.result_type(input, other)
    if not dt.is_floating_point:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for "
                                  f"'{dt.tensor_type[:-len('Tensor')]}'")
    return binary(NEXTAFTER, input, other)


return_frexp = namedtuple("frexp", ["mantissa", "exponent"])  # torch.return_types.frexp
return_frexp.__repr__ = lambda self: (f"jitgrad.return_types.frexp(mantissa="
                                      f"{self.mantissa!r}, exponent={self.exponent!r})")


@api(FREXP_MANTISSA, FREXP_EXPONENT, method="frexp", export="frexp")
def frexp(input: Tensor):
    """``(mantissa, exponent)`` with ``input == mantissa * 2 ** exponent``, ``|mantissa|``
    in [0.5, 1) (0, infinities and NaN: themselves, exponent 0); the exponent is int32."""
    require_tensor("frexp", "input", 1, input)
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    return return_frexp(unary(FREXP_MANTISSA, input), call(FREXP_EXPONENT, (input,)))
