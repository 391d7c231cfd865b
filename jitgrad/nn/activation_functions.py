"""Activation functions written with jitgrad's element-wise ops (so they differentiate,
compile -- a compiled step fuses them into its kernels -- and run on every device): silu,
softplus, mish, elu, selu, celu, leaky_relu, prelu, hardtanh, relu6, hardsigmoid,
hardswish, logsigmoid, softsign, glu, threshold.

Each has PyTorch's values and PyTorch's gradient everywhere, boundaries included (where a
formula would pick another one-sided derivative, the branches are written so it does not),
and stays finite where a branch not taken overflows (its argument is clamped first: the
gradient of an unused ``exp(x)`` would otherwise be ``0 * inf = nan``). ``inplace=True``
writes the result into the input (``copy_``; computed from a copy of an input that requires
grad, so its backward still has the values it needs).
"""

from __future__ import annotations

from ..amp.autocast_mode import autocast_op
from ..ops.elementwise import sigmoid, tanh
from ..ops.nnops.elu import elu as elu_op
from ..ops.selection import where
from ..tensor import Tensor

__all__ = ["silu", "softplus", "mish", "elu", "selu", "celu", "leaky_relu", "prelu",
           "hardtanh", "relu6", "hardsigmoid", "hardswish", "logsigmoid", "softsign", "glu",
           "threshold"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _out(input: Tensor, fn, inplace: bool) -> Tensor:
    """``fn(input)``; with ``inplace`` written into ``input``, computed from a copy of it
    when it requires grad (so the backward's saved input is not the tensor overwritten)."""
    if not inplace:
        return fn(input)
    return input.copy_(fn(input.clone() if input.requires_grad else input))


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)`` (also called swish)."""
    return _out(input, lambda x: x * sigmoid(x), inplace)


@autocast_op
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``."""
    z = input * beta
    smooth = (z.clamp(max=threshold).exp()).log1p()
    return where(z > threshold, input, smooth / beta if beta != 1.0 else smooth)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    return _out(input, lambda x: x * tanh(softplus(x)), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)`` (one op: ``ops/nnops/elu.py``)."""
    return _out(input, lambda x: elu_op(x, alpha), inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalising constants."""
    return _out(input, lambda x: elu_op(x, _SELU_ALPHA, _SELU_SCALE), inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``alpha * (exp(x / alpha) - 1)``."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _out(input, lambda x: elu_op(x, alpha, 1.0, 1.0 / alpha), inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` for ``x > 0``, else ``negative_slope * x``."""
    return _out(input, lambda x: where(x > 0, x, x * negative_slope), inplace)


@autocast_op
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """:func:`leaky_relu` with a learned slope: one (``weight`` of one element) or one per
    channel (dim 1 of ``input``)."""
    n = weight.numel()
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.dim()}")
    if n != 1:
        channels = input.shape[1] if input.dim() >= 2 else 1
        if input.dim() == 0 or n != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {n} and channel size = {channels}.")
        shape = [1] * input.dim()
        shape[1] = n
        weight = weight.reshape(*shape)
    elif weight.dim() == 1:
        weight = weight.reshape(())
    return where(input > 0, input, weight * input)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """``input`` clamped to ``[min_val, max_val]``; the gradient passes strictly inside."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    def clamp(x: Tensor) -> Tensor:
        inside = (x > min_val) & (x < max_val)
        return where(inside, x, x.clamp(min_val, max_val).detach())

    return _out(input, clamp, inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``: 0 below -3, 1 above 3, linear between (the gradient is 1/6
    there; PyTorch's is a float32 1/6, ~6e-8 relative from it, in float64 too)."""
    return _out(input, lambda x: hardtanh(x + 3.0, 0.0, 6.0) / 6.0, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6`` (gradient ``x / 3 + 1/2`` strictly inside ``(-3, 3)``, 0 at
    and below -3, 1 at and above 3, as PyTorch's)."""
    def swish(x: Tensor) -> Tensor:
        middle = x * (x + 3.0) / 6.0
        return where(x <= -3.0, x * 0.0, where(x < 3.0, middle, x))

    return _out(input, swish, inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))``: ``x - log(1 + exp(x))`` below 0, ``-log(1 + exp(-x))`` from 0
    (no overflow; each side's gradient, ``1 - sigmoid(x)`` or ``sigmoid(-x)``, without
    cancellation)."""
    below = input - input.clamp(max=0.0).exp().log1p()
    above = -((-input.clamp(min=0.0)).exp().log1p())
    return where(input < 0, below, above)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1.0)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """The gated linear unit: ``a * sigmoid(b)`` for the halves ``a``, ``b`` of ``dim``."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % input.dim()
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    a, b = input.chunk(2, d)
    return a * sigmoid(b)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``."""
    return _out(input, lambda x: where(x > threshold, x, float(value)), inplace)
