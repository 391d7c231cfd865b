"""PyTorch's ``torch.nn.grad``: the gradients of a convolution with respect to its input
(``conv1d_input`` / ``conv2d_input`` / ``conv3d_input``) and to its weight
(``conv1d_weight``...), given the output's gradient -- what the convolution's backward
computes, as functions. Each runs jitgrad's convolution under autograd (a convolution is
linear in each argument, so the gradient does not depend on the value it is taken at) and
is itself differentiable in the tensors it is given.

>>> import jitgrad
>>> import jitgrad.nn.functional as F
>>> x = jitgrad.randn(1, 1, 3, 3, requires_grad=True)
>>> w = jitgrad.randn(1, 1, 1, 2)
>>> out = F.conv2d(x, w)
>>> g = jitgrad.randn(out.shape)
>>> (x_grad,) = jitgrad.autograd.grad(out, x, g)
>>> bool(jitgrad.allclose(jitgrad.nn.grad.conv2d_input(x.shape, w, g), x_grad))
True
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import creation
from ..autograd.grad_mode import enable_grad
from ..tensor import Tensor

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input",
           "conv3d_weight"]


def _conv(dims: int):
    from . import functional as F

    return {1: lambda: F.conv1d, 2: lambda: F.conv2d, 3: lambda: F.conv3d}[dims]()


def _input_grad(dims: int, input_size: Sequence[int], weight: Tensor, grad_output: Tensor,
                stride, padding, dilation, groups: int) -> Tensor:
    x = creation.zeros(*tuple(input_size), dtype=weight.dtype, device=weight.device,
                       requires_grad=True)
    return _grad_of(dims, x, weight, x, grad_output, stride, padding, dilation, groups)


def _weight_grad(dims: int, input: Tensor, weight_size: Sequence[int], grad_output: Tensor,
                 stride, padding, dilation, groups: int) -> Tensor:
    w = creation.zeros(*tuple(weight_size), dtype=input.dtype, device=input.device,
                       requires_grad=True)
    return _grad_of(dims, input, w, w, grad_output, stride, padding, dilation, groups)


def _grad_of(dims: int, x: Tensor, w: Tensor, wrt: Tensor, grad_output: Tensor,
             stride, padding, dilation, groups: int) -> Tensor:
    """The gradient of ``conv(x, w)`` with respect to ``wrt`` (a zero leaf standing for
    ``x`` or ``w``: the convolution is linear in each), for cotangent ``grad_output``; with
    history when the other operand or ``grad_output`` requires grad."""
    from ..autograd import grad

    with enable_grad():
        out = _conv(dims)(x, w, None, stride, padding, dilation, groups)
        _check_grad_shape(out, grad_output)
        other = w if wrt is x else x
        keep = other.requires_grad or grad_output.requires_grad
        return grad(out, wrt, grad_output, create_graph=keep)[0]


def _check_grad_shape(out: Tensor, grad_output: Tensor) -> None:
    if tuple(out.shape) != tuple(grad_output.shape):
        raise RuntimeError(f"Expected grad_output of shape {list(out.shape)} (the "
                           f"convolution's output), but got {list(grad_output.shape)}")


def conv1d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride=1,
                 padding=0, dilation=1, groups: int = 1) -> Tensor:
    """The gradient of ``conv1d(input, weight, ...)`` with respect to an input of
    ``input_size`` ``(N, C_in, L)``, given ``grad_output``."""
    return _input_grad(1, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride=1,
                  padding=0, dilation=1, groups: int = 1) -> Tensor:
    """The gradient of ``conv1d(input, weight, ...)`` with respect to a weight of
    ``weight_size`` ``(C_out, C_in / groups, k)``, given ``grad_output``."""
    return _weight_grad(1, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride=1,
                 padding=0, dilation=1, groups: int = 1) -> Tensor:
    """The gradient of ``conv2d(input, weight, ...)`` with respect to an input of
    ``input_size`` ``(N, C_in, H, W)``, given ``grad_output``."""
    return _input_grad(2, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride=1,
                  padding=0, dilation=1, groups: int = 1) -> Tensor:
    """The gradient of ``conv2d(input, weight, ...)`` with respect to a weight of
    ``weight_size`` ``(C_out, C_in / groups, kH, kW)``, given ``grad_output``."""
    return _weight_grad(2, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride=1,
                 padding=0, dilation=1, groups: int = 1) -> Tensor:
    """The gradient of ``conv3d(input, weight, ...)`` with respect to an input of
    ``input_size`` ``(N, C_in, D, H, W)``, given ``grad_output``."""
    return _input_grad(3, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride=1,
                  padding=0, dilation=1, groups: int = 1) -> Tensor:
    """The gradient of ``conv3d(input, weight, ...)`` with respect to a weight of
    ``weight_size`` ``(C_out, C_in / groups, kD, kH, kW)``, given ``grad_output``."""
    return _weight_grad(3, input, weight_size, grad_output, stride, padding, dilation, groups)
