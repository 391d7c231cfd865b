"""What the moment-based optimizers beside Adam share (``Adamax``, ``NAdam``, ``RAdam``):
PyTorch's argument checks, their per-parameter state, the gradient a step uses (``maximize``,
coupled or decoupled weight decay), and whether a step takes PyTorch's ``capturable`` branch.

A step traced by ``jitgrad.compile`` always takes the capturable branch: its bias corrections
are tensor ops on the ``step`` tensor rather than Python floats read with ``.item()``, so the
compiled plan does not bake in the step count (as :mod:`jitgrad.optim.adam` does). Those
bias corrections are computed from the step in float64, as the eager branch computes them in
Python floats: RAdam's ``rho_t`` subtracts two numbers near ``2 / (1 - beta2)`` and would
lose about 2% of its rectification term in float32 (PyTorch's capturable branch, CUDA-only,
computes them in the step's float32).
"""

from __future__ import annotations

from ..creation import tensor, zeros_like
from ..dtypes import get_default_dtype
from ..tensor import Tensor
from ..trace.state import STATE as TRACE
from .optimizer import check_options, step_gradient

__all__ = ["check_moment_options", "moment_state", "is_capturable", "decayed_gradient"]


def check_moment_options(name: str, lr: float, betas: tuple[float, float], eps: float,
                         weight_decay: float, differentiable: bool, **more: float) -> None:
    """PyTorch's checks, in its order: learning rate, epsilon, ``betas`` (each in [0, 1)),
    weight decay, then ``more`` (``momentum_decay``), then the unsupported
    ``differentiable``."""
    check_options(name, lr=lr, eps=eps)
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
    check_options(name, differentiable, weight_decay=weight_decay, **more)


def moment_state(state: dict, p: Tensor, group: dict, *buffers: str,
                 on_param_device: bool = False, **scalars: float) -> dict:
    """``state`` filled on a parameter's first step, in PyTorch's key order: ``step`` (a
    float tensor of the default dtype), then the 0-d ``scalars`` (of the same dtype), then a
    zero buffer shaped as ``p`` for each name in ``buffers``. As PyTorch's, the 0-d entries
    live on the CPU, or on ``p``'s device when the group is ``capturable`` (or always, with
    ``on_param_device``: ASGD's)."""
    if not state:
        on_p = p.device if group["capturable"] or on_param_device else None
        state["step"] = tensor(0.0, dtype=get_default_dtype(), device=on_p or "cpu")
        for key, value in scalars.items():
            state[key] = tensor(float(value), dtype=get_default_dtype(), device=on_p or "cpu")
        for key in buffers:
            state[key] = zeros_like(p)
    return state


def is_capturable(group: dict) -> bool:
    """Whether a step takes PyTorch's capturable branch: asked for, or traced (a compiled
    step must not read the step count with ``.item()``)."""
    return group["capturable"] or TRACE.tracer is not None


def decayed_gradient(p: Tensor, group: dict, lr) -> Tensor:
    """``p``'s gradient as the step uses it (negated under ``maximize``); weight decay
    either added to it (``grad + weight_decay * p``) or, when the group's
    ``decoupled_weight_decay`` is set, applied to ``p`` in place (``p *= 1 - lr * wd``)."""
    if not group.get("decoupled_weight_decay"):
        return step_gradient(p, group)
    grad = -p.grad if group["maximize"] else p.grad
    if group["weight_decay"] != 0:
        p.mul_(1 - lr * group["weight_decay"])
    return grad
