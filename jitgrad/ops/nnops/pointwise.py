"""Element-wise update ops of the optimizers: ``addcdiv`` and ``lerp`` (a number weight) as
fused ops (one generated kernel pass each, differentiable like any other op), ``addcmul`` as
a composite. Each follows PyTorch's CPU kernel's order of operations, so float32 updates
round as PyTorch's do."""

from __future__ import annotations

import numpy as np

from ...amp.autocast_mode import autocast_op
from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..arithmetic import ADD, MUL
from ..dispatch import as_tensor_arg, elementwise
from ..registry import ELEMENTWISE, defop

__all__ = ["addcmul", "addcdiv", "lerp"]


def _addcdiv_vjp(g, ins, out, p, n):
    _, t1, t2 = ins
    v = p["value"]
    return (g if n[0] else None, g * v / t2 if n[1] else None,
            -g * v * t1 / (t2 * t2) if n[2] else None)


def _lerp_ref(a, end, weight):
    w = np.asarray(weight, dtype=a.dtype)
    return np.where(np.abs(w) < 0.5, a + w * (end - a), end - (end - a) * (1 - w)).astype(
        np.result_type(a, end))


ADDCDIV = defop(name="addcdiv", kind=ELEMENTWISE, node="AddcdivBackward0",
                inputs=("a", "t1", "t2"), params=("value",), expr="a + value * t1 / t2",
                ref=lambda a, t1, t2, value: a + np.asarray(value, a.dtype) * t1 / t2,
                vjp=_addcdiv_vjp, save=(1, 2), samples=S.addcdiv, complex="holomorphic")
LERP = defop(name="lerp", kind=ELEMENTWISE, node="LerpBackward0", inputs=("a", "end"),
             params=("weight",),
             expr="a + weight * (end - a) if abs(weight) < 0.5 "
                  "else end - (end - a) * (1.0 - weight)",
             ref=_lerp_ref,
             vjp=lambda g, ins, out, p, n: (g * (1.0 - p["weight"]) if n[0] else None,
                                            g * p["weight"] if n[1] else None),
             samples=S.lerp, complex="holomorphic")
LERP_TENSOR = defop(name="lerp_tensor", kind=ELEMENTWISE, node="LerpBackward1",
                    inputs=("a", "end", "weight"),
                    expr="a + weight * (end - a) if abs(weight) < 0.5 "
                         "else end - (end - a) * (1.0 - weight)",
                    ref=_lerp_ref,
                    vjp=lambda g, ins, out, p, n: (g * (1.0 - ins[2]) if n[0] else None,
                                                   g * ins[2] if n[1] else None,
                                                   g * (ins[1] - ins[0]) if n[2] else None),
                    save=(0, 1, 2), samples=S.lerp_tensor, complex="holomorphic")


def _check_float(op_name: str, *ts: Tensor) -> None:
    for t in ts:
        if t._data.dtype.kind not in "fc":
            raise RuntimeError(f"{op_name}: jitgrad supports floating-point and complex "
                               f"tensors only, got "
                               f"{t.dtype.name}")


@api(ADD, MUL, method="addcmul", inplace="addcmul_", export="addcmul")
@autocast_op
def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:
    """``input + value * tensor1 * tensor2`` in one pass.

    >>> import jitgrad
    >>> jitgrad.addcmul(jitgrad.ones(2), jitgrad.tensor([1.0, 2.0]), jitgrad.tensor([3.0, 4.0]),
    ...                 value=0.5)
    tensor([2.5000, 5.0000])
    """
    ts = [as_tensor_arg(t) for t in (input, tensor1, tensor2)]
    _check_float("addcmul", *ts)
    # composite, not one kernel: a kernel would contract it into an FMA, which does not
    # overflow where PyTorch's (and NumPy's) separately rounded products do
    t1 = ts[1] * float(value) if value != 1 else ts[1]
    return ts[0] + t1 * ts[2]


@api(ADDCDIV, method="addcdiv", inplace="addcdiv_", export="addcdiv")
@autocast_op
def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:
    """``input + value * tensor1 / tensor2`` in one pass.

    >>> import jitgrad
    >>> jitgrad.addcdiv(jitgrad.ones(2), jitgrad.tensor([1.0, 2.0]), jitgrad.tensor([4.0, 4.0]))
    tensor([1.2500, 1.5000])
    """
    ts = [as_tensor_arg(t) for t in (input, tensor1, tensor2)]
    _check_float("addcdiv", *ts)
    return elementwise(ADDCDIV, tuple(ts), {"value": float(value)})


@api(LERP, LERP_TENSOR, method="lerp", inplace="lerp_", export="lerp")
def lerp(input: Tensor, end: Tensor, weight: float | Tensor) -> Tensor:
    """Linear interpolation ``input + weight * (end - input)`` (``end - (end - input) * (1 -
    weight)`` where ``|weight| >= 0.5``, PyTorch's two forms); ``weight`` a number or a tensor
    broadcast with the others (differentiable; a 0-d one in any float dtype, as a number).

    >>> import jitgrad
    >>> jitgrad.lerp(jitgrad.zeros(2), jitgrad.tensor([1.0, 2.0]), 0.25)
    tensor([0.2500, 0.5000])
    """
    a, b = ts = [as_tensor_arg(t) for t in (input, end)]
    if b.dtype is not a.dtype:  # (no promotion, as PyTorch's)
        raise RuntimeError(f"expected dtype {a.dtype.cpp_name} for `end` but got dtype "
                           f"{b.dtype.cpp_name}")
    _check_float("lerp", *ts)
    if not isinstance(weight, Tensor):
        return elementwise(LERP, tuple(ts), {"weight": float(weight)})
    if weight.dim() == 0 and weight.dtype.is_floating_point:
        # rounded as a number weight is; on the others' device (a host 0-d tensor with CUDA
        # ones, as PyTorch allows: a traced optimizer beta is one)
        weight = weight.to(a.device, a.dtype)
    elif weight.dtype is not a.dtype:
        raise RuntimeError(f"expected dtype {a.dtype.cpp_name} for `weight` but got dtype "
                           f"{weight.dtype.cpp_name}")
    # (a traced weight -- an optimizer's beta under jitgrad.compile -- stays a tensor)
    return elementwise(LERP_TENSOR, (a, b, weight))
