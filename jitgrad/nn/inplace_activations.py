"""The in-place forms of the activations in ``nn.functional`` (``relu_``, ``elu_``,
``leaky_relu_``, ``hardtanh_``, ``selu_``, ``celu_``, ``threshold_``), as PyTorch's: each
writes its result into ``input`` and returns it (autograd records the in-place write, so a
leaf that requires grad is refused as for any in-place op)."""

from __future__ import annotations

from ..tensor import Tensor
from . import activation_functions as A

__all__ = ["relu_", "elu_", "leaky_relu_", "hardtanh_", "selu_", "celu_", "threshold_"]


def relu_(input: Tensor) -> Tensor:
    """``relu`` in place."""
    return input.relu_()


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``elu`` in place."""
    return A.elu(input, alpha, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``leaky_relu`` in place."""
    return A.leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """``hardtanh`` in place."""
    return A.hardtanh(input, min_val, max_val, inplace=True)


def selu_(input: Tensor) -> Tensor:
    """``selu`` in place."""
    return A.selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``celu`` in place."""
    return A.celu(input, alpha, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """``threshold`` in place."""
    return A.threshold(input, threshold, value, inplace=True)
