"""ELU and its scaled forms (SELU, CELU) as one element-wise op, PyTorch's ``elu(x, alpha,
scale, input_scale)``: ``x * scale`` for positive ``x``, else
``expm1(x * input_scale) * (alpha * scale)``. A generated kernel computes it (``expm1``
from the kernel math); its gradient is PyTorch's ``elu_backward``,
``g * input_scale * (alpha * scale) * exp(x * input_scale)`` on the negative side, written
with ops (so second derivatives exist), where ``expm1``'s own gradient ``g * (out + 1)``
would lose the digits of a tiny ``exp(x)``."""

from __future__ import annotations

import numpy as np

from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..dispatch import as_tensor_arg, unary
from ..registry import ELEMENTWISE, FLOAT, defop

__all__ = ["elu"]

_EXPR = "a * scale if a > 0.0 else expm1(a * input_scale) * (alpha * scale)"


def _ref(a, alpha, scale, input_scale):
    x = np.asarray(a)
    dt = x.dtype.type
    with np.errstate(over="ignore", invalid="ignore"):
        neg = np.expm1(np.minimum(x, dt(0)) * dt(input_scale)) * (dt(alpha) * dt(scale))
        return np.where(x > 0, x * dt(scale), neg).astype(x.dtype)


def _vjp(g, ins, out, p, n):
    from ..elementwise import exp
    from ..selection import where

    a = ins[0]
    neg = g * p["input_scale"] * (p["alpha"] * p["scale"]) * exp(
        a.clamp(max=0.0) * p["input_scale"])
    return (where(a > 0, g * p["scale"], neg),)


ELU = defop(name="elu", kind=ELEMENTWISE, node="EluBackward0", inputs=("a",),
            params=("alpha", "scale", "input_scale"), expr=_EXPR, ref=_ref, vjp=_vjp,
            save=(0,), dtype_rule=FLOAT, samples=S.elu)


@api(ELU)
def elu(input: Tensor, alpha: float = 1.0, scale: float = 1.0,
        input_scale: float = 1.0) -> Tensor:
    """PyTorch's ``elu`` with its scales (``F.elu``, ``F.selu`` and ``F.celu`` call it)."""
    input = as_tensor_arg(input)
    if input._data.dtype.kind != "f":
        raise NotImplementedError(
            f'"elu" not implemented for \'{input.dtype.tensor_type[:-6]}\'')
    return unary(ELU, input, {"alpha": float(alpha), "scale": float(scale),
                              "input_scale": float(input_scale)})
