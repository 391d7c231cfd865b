"""Fused backward ops: the gradients of tanh, sigmoid, relu (threshold), pow and clamp as one
element-wise op each (one kernel pass in eager backward), differentiable themselves."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import binary
from .elementwise_base import ew

__all__ = [
    "tanh_backward", "sigmoid_backward", "threshold_backward", "pow_backward",
    "clamp_backward",
]


# ----------------------------------------------------------------------------------- ops
def _tanh_bwd_vjp(g, ins, out, p, n):
    go, y = ins
    return (tanh_backward(g, y) if n[0] else None, g * go * y * -2.0 if n[1] else None)


def _sigmoid_bwd_vjp(g, ins, out, p, n):
    go, y = ins
    return (sigmoid_backward(g, y) if n[0] else None,
            g * go * (1.0 - 2.0 * y) if n[1] else None)


TANH_BACKWARD = ew("tanh_backward", "TanhBackwardBackward0", ("g", "y"), "g * (1.0 - y * y)",
                   lambda g, y: g * (1 - y * y), _tanh_bwd_vjp, save=(0, 1),
                   samples=S.binary_same, complex="holomorphic")
SIGMOID_BACKWARD = ew("sigmoid_backward", "SigmoidBackwardBackward0", ("g", "y"),
                      "g * y * (1.0 - y)", lambda g, y: g * y * (1 - y), _sigmoid_bwd_vjp,
                      save=(0, 1), samples=S.binary_same)
THRESHOLD_BACKWARD = ew(
   "threshold_backward", "ThresholdBackwardBackward0", ("g", "x"),
   "0.0 if x <= threshold else g",  # PyTorch's: NaN passes the gradient (relu'(nan) = 1)
   lambda g, x, threshold: np.where(x <= threshold, np.zeros_like(g), g),
   lambda g, ins, out, p, n: (threshold_backward(g, ins[1], p["threshold"]) if n[0] else None,
                              ins[1] * 0.0 if n[1] else None),
   params=("threshold",), save=(1,), samples=S.binary_same_away_from_0)


def _pow_bwd_ref(g, a, exponent):
    if exponent == 0.0:
        return np.zeros_like(g)
    return g * (np.asarray(exponent, a.dtype) * np.power(a, np.asarray(exponent - 1.0, a.dtype)))


def _pow_bwd_vjp(g, ins, out, p, n):
    go, a = ins
    e = p["exponent"]
    return (pow_backward(g, a, e) if n[0] else None,
            pow_backward(g * go * e, a, e - 1.0) if n[1] and e != 0.0 else None)


POW_BACKWARD = ew("pow_backward", "PowBackwardBackward0", ("g", "a"),
                  "0.0 if exponent == 0.0 else g * (exponent * pow_scalar(a, exponent - 1.0))",
                  _pow_bwd_ref, _pow_bwd_vjp, params=("exponent",), save=(0, 1),
                  samples=S.pow_backward, complex="holomorphic")
CLAMP_BACKWARD = ew(
   "clamp_backward", "ClampBackwardBackward0", ("g", "a"),
   "g if (a >= min and a <= max) else 0.0",
   lambda g, a, min, max: np.where((a >= min) & (a <= max), g, np.zeros_like(g)),
   lambda g, ins, out, p, n: (clamp_backward(g, ins[1], p["min"], p["max"]) if n[0] else None,
                              None),
   params=("min", "max"), save=(1,), samples=S.clamp_backward)


# ---------------------------------------------------------------------- public functions
@api(TANH_BACKWARD)
def tanh_backward(grad: Tensor, output: Tensor) -> Tensor:
    """``grad * (1 - output ** 2)``: the gradient of tanh from its output."""
    return binary(TANH_BACKWARD, grad, output)


@api(SIGMOID_BACKWARD)
def sigmoid_backward(grad: Tensor, output: Tensor) -> Tensor:
    """``grad * output * (1 - output)``: the gradient of sigmoid from its output."""
    return binary(SIGMOID_BACKWARD, grad, output)


@api(THRESHOLD_BACKWARD)
def threshold_backward(grad: Tensor, x: Tensor, threshold: float) -> Tensor:
    """0 where ``x <= threshold``, else ``grad`` (so ``grad`` where ``x`` is NaN, as
    PyTorch's ``threshold_backward``)."""
    return binary(THRESHOLD_BACKWARD, grad, x, {"threshold": threshold})


@api(POW_BACKWARD)
def pow_backward(grad: Tensor, a: Tensor, exponent: float) -> Tensor:
    """``grad * exponent * a ** (exponent - 1)`` (0 when ``exponent == 0``)."""
    return binary(POW_BACKWARD, grad, a, {"exponent": exponent})


@api(CLAMP_BACKWARD)
def clamp_backward(grad: Tensor, a: Tensor, min: float, max: float) -> Tensor:  # noqa: A002
    """``grad`` where ``min <= a <= max`` else 0."""
    return binary(CLAMP_BACKWARD, grad, a, {"min": min, "max": max})
