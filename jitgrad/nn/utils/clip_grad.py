"""Gradient clipping, as ``torch.nn.utils.clip_grad``: ``clip_grad_norm_`` (the total norm
of the gradients, scaled down to ``max_norm``), ``clip_grad_value_``, and the two halves of
``clip_grad_norm_``: ``get_total_norm`` and ``clip_grads_with_norm_``.

Plain jitgrad ops under ``no_grad`` with in-place writes into ``.grad``, so a compiled
training step traces them. ``foreach`` is accepted: PyTorch's foreach and per-tensor paths
compute the same values on the CPU, and jitgrad has one.
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Iterable

from ...autograd.grad_mode import no_grad
from ...creation import tensor
from ...ops.concat import stack
from ...ops.norms import vector_norm
from ...tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_"]

TensorOrTensors = Tensor | Iterable[Tensor]


def _tensors(parameters: TensorOrTensors) -> list:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _grads(parameters: list) -> list:
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(tensors: TensorOrTensors, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The ``norm_type``-norm of ``tensors`` taken together as one vector (the norm of their
    norms); ``tensor(0.)`` for none. ``error_if_nonfinite``: raise when it is NaN or
    infinite."""
    tensors = _tensors(tensors)
    norm_type = float(norm_type)
    with no_grad():
        if not tensors:
            return tensor(0.0)
        norms = [vector_norm(t, norm_type) for t in tensors]
        total = vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and (total.isnan() | total.isinf()).item():
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            f"non-finite, so it cannot be clipped. To disable this error and scale the "
            f"gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters: TensorOrTensors, max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale the gradients of ``parameters`` in place by
    ``min(max_norm / (total_norm + 1e-6), 1)``."""
    grads = _grads(_tensors(parameters))
    max_norm = float(max_norm)
    if not grads:
        return
    with no_grad():
        coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef)


def clip_grad_norm_(parameters: TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Clip the gradients of ``parameters`` in place so that their total ``norm_type``-norm
    (as one vector) is at most ``max_norm``; returns the total norm before clipping.

    >>> import jitgrad
    >>> w = jitgrad.ones(4, requires_grad=True)
    >>> (w * 3.0).sum().backward()
    >>> jitgrad.nn.utils.clip_grad_norm_([w], max_norm=1.0)
    tensor(6.)
    >>> w.grad
    tensor([0.5000, 0.5000, 0.5000, 0.5000])
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if generator and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will "
                          "occur.", stacklevel=2)
    total = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters: TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Deprecated alias of :func:`clip_grad_norm_` (warns as PyTorch)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: TensorOrTensors, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp the gradients of ``parameters`` in place to ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(_tensors(parameters)):
            g.clamp_(min=-clip_value, max=clip_value)
