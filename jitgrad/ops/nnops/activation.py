"""GELU (exact erf form and tanh approximation) and its fused backward op, as element-wise ops
compiled into the generated kernels (``erf``/``tanh``/``exp`` from ``jitgrad.kernels.vmath``).

The form is a kernel parameter ``approx`` (0.0: erf, 1.0: tanh); the branch on it is loop
invariant, so LLVM hoists it out of the generated loops.
"""

from __future__ import annotations

import math

import numpy as np

from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..dispatch import as_tensor_arg, unary
from ..elementwise import exp, tanh
from ..registry import ELEMENTWISE, FLOAT, defop

__all__ = ["gelu", "gelu_backward"]

_SQRT1_2 = 0.7071067811865476      # 1 / sqrt(2)
_K_BETA = 0.7978845608028654       # sqrt(2 / pi)
_K_KAPPA = 0.044715
_INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi)

# The tanh form is written as a * sigmoid(2u) (= 0.5 a (1 + tanh(u))): no cancellation in
# 1 + tanh(u) for negative u. The erf form sets Phi(a) = 0.5 (1 + erf(a / sqrt 2)) to 0 below
# ``cut``, where the exact erf rounds to -1 in the dtype (the vectorised erf stops 1 ulp
# short of -1, which x * 0.5 * (1 + erf) would turn into garbage for very negative x).
_GELU_EXPR = (
    "a * sigmoid(1.5957691216057308 * (a + 0.044715 * a * a * a)) if approx != 0.0 "
    "else (0.0 * a if a < cut else a * 0.5 * (1.0 + erf(a * 0.7071067811865476)))"
)
# PyTorch's formulas (cdf + x * pdf; left' + right'), in the same cancellation-free forms;
# |a| is clamped in the tanh form's second term, which underflows to 0 long before 50
_GELU_BWD_EXPR = (
    "g * (sigmoid(1.5957691216057308 * (a + 0.044715 * a * a * a)) + 2.0 * "
    "minimum(maximum(a, -50.0), 50.0) * sigmoid(1.5957691216057308 * (a + 0.044715 * a * a * a))"
    " * sigmoid(-1.5957691216057308 * (a + 0.044715 * a * a * a)) * 0.7978845608028654 * "
    "(1.0 + 0.134145 * minimum(maximum(a, -50.0), 50.0) * minimum(maximum(a, -50.0), 50.0)))"
    " if approx != 0.0 else "
    "g * ((0.0 if a < cut else 0.5 * (1.0 + erf(a * 0.7071067811865476))) + "
    "a * 0.3989422804014327 * exp(-0.5 * a * a))"
)

_erf = np.vectorize(math.erf, otypes=[np.float64])

#: Phi(a) is 0 below these (where erf(a / sqrt 2) rounds to -1 in the dtype)
CUTS = {np.dtype(np.float32): -5.542594057802940, np.dtype(np.float64): -8.374388864841700}


def _sigmoid_np(z):
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0, e) / (1.0 + e)


def _erf_np(z, dtype):
    return np.asarray(_erf(np.asarray(z, dtype=np.float64)), dtype=dtype)


def _gelu_ref(a, approx, cut=None):
    """Reference in the input's dtype (so overflow happens where the kernel's does)."""
    x = np.asarray(a)
    dt = x.dtype.type
    with np.errstate(over="ignore", invalid="ignore"):
        if approx:
            return x * _sigmoid_np(dt(2 * _K_BETA) * (x + dt(_K_KAPPA) * x * x * x))
        return x * dt(0.5) * (dt(1.0) + _erf_np(x * dt(_SQRT1_2), x.dtype))


def _gelu_bwd_ref(g, a, approx, cut=None):
    x = np.asarray(a)
    dt = x.dtype.type
    with np.errstate(over="ignore", invalid="ignore"):
        if approx:
            u2 = dt(2 * _K_BETA) * (x + dt(_K_KAPPA) * x * x * x)
            xc = np.clip(x, -50, 50)
            d = _sigmoid_np(u2) + dt(2) * xc * _sigmoid_np(u2) * _sigmoid_np(-u2) * dt(
                _K_BETA) * (dt(1) + dt(3 * _K_KAPPA) * xc * xc)
        else:
            d = dt(0.5) * (dt(1) + _erf_np(x * dt(_SQRT1_2), x.dtype)) + x * dt(
                _INV_SQRT_2PI) * np.exp(dt(-0.5) * x * x)
    return np.asarray(g * d, dtype=np.result_type(g, a))


def _gelu_second(a: Tensor, approx: float) -> Tensor:
    """d²gelu/da², in jitgrad ops (so third derivatives exist too)."""
    if not approx:  # phi(a) (2 - a²)
        return exp(a * a * -0.5) * _INV_SQRT_2PI * (2.0 - a * a)
    t = tanh((a + a * a * a * _K_KAPPA) * _K_BETA)
    du = (1.0 + a * a * (3.0 * _K_KAPPA)) * _K_BETA
    ddu = a * (6.0 * _K_BETA * _K_KAPPA)
    return (1.0 - t * t) * (du - a * t * du * du + 0.5 * a * ddu)


def _params(approx: float, dtype) -> dict:
    return {"approx": approx, "cut": CUTS.get(np.dtype(dtype), CUTS[np.dtype(np.float64)])}


def _gelu_bwd_vjp(gg, ins, out, p, n):
    g, a = ins
    return (gelu_backward(gg, a, p["approx"]) if n[0] else None,
            gg * g * _gelu_second(a, p["approx"]) if n[1] else None)


GELU = defop(name="gelu", kind=ELEMENTWISE, node="GeluBackward0", inputs=("a",),
             params=("approx", "cut"), expr=_GELU_EXPR, ref=_gelu_ref,
             vjp=lambda g, ins, out, p, n: (gelu_backward(g, ins[0], p["approx"]),),
             save=(0,), dtype_rule=FLOAT, samples=S.gelu)
GELU_BACKWARD = defop(name="gelu_backward", kind=ELEMENTWISE, node="GeluBackwardBackward0",
                      inputs=("g", "a"), params=("approx", "cut"), expr=_GELU_BWD_EXPR,
                      ref=_gelu_bwd_ref, vjp=_gelu_bwd_vjp, save=(0, 1),
                      samples=S.gelu_backward)

_FORMS = {"none": 0.0, "tanh": 1.0}


@api(GELU)
def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit ``x * Phi(x)``; ``approximate="tanh"`` for the tanh form.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.gelu(jitgrad.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1587,  0.0000,  0.8413])
    """
    input = as_tensor_arg(input)
    approx = _FORMS.get(approximate)
    if approx is None:
        raise RuntimeError("approximate argument must be either none or tanh.")
    if input._data.dtype.kind != "f":
        raise NotImplementedError(
            f'"GeluKernelImpl" not implemented for \'{input.dtype.tensor_type[:-6]}\'')
    return unary(GELU, input, _params(approx, input._data.dtype))


@api(GELU_BACKWARD)
def gelu_backward(grad: Tensor, input: Tensor, approx: float = 0.0) -> Tensor:
    """The gradient of :func:`gelu` at ``input`` for the output gradient ``grad``."""
    from ..dispatch import binary

    dt = np.result_type(grad._data.dtype, input._data.dtype)
    return binary(GELU_BACKWARD, grad, input, _params(approx, dt))
