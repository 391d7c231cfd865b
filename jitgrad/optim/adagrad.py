"""Adagrad with learning-rate decay, weight decay, an initial accumulator value and
``maximize``: PyTorch's single-tensor update, op for op (dense gradients)."""

from __future__ import annotations

from ..creation import full_like
from ..trace.state import STATE as TRACE
from .optimizer import Optimizer, check_options, descend, new_step, params_with_grad, step_gradient

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad (PyTorch's ``torch.optim.Adagrad``, ``foreach=False``): the sum of squared
    gradients ``s`` scales each step ``clr * g / (sqrt(s) + eps)``, with
    ``clr = lr / (1 + (step - 1) * lr_decay)``. The state exists from construction on, as
    in PyTorch.

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> w.grad = 2 * w.detach()
    >>> jitgrad.optim.Adagrad([w], lr=0.1).step(); w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        check_options("Adagrad", differentiable, fused, foreach, lr=lr, lr_decay=lr_decay,
                      weight_decay=weight_decay,
                      initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(params, {
            "lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
            "maximize": maximize, "differentiable": differentiable, "fused": fused})
        for group in self.param_groups:
            for p in group["params"]:
                self._state_for(p, group)

    traced_hyperparameters = ("lr",)

    def _state_for(self, p, group: dict) -> dict:
        state = self.state[p]
        if not state:
            state["step"] = new_step()
            state["sum"] = full_like(p, group["initial_accumulator_value"])
        return state

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        lr_decay, eps = group["lr_decay"], group["eps"]
        for p in params_with_grad(group):
            state = self._state_for(p, group)
            step_t, state_sum = state["step"], state["sum"]
            step_t += 1
            grad = step_gradient(p, group)
            if lr_decay == 0:
                clr = lr
            elif TRACE.tracer is not None:  # the step count stays a tensor of the plan
                # (in float64: eager's Python floats, the same rounding)
                clr = lr / (1 + (step_t.double() - 1) * lr_decay)
            else:
                clr = lr / (1 + (step_t.item() - 1) * lr_decay)
            state_sum.addcmul_(grad, grad, value=1)
            std = state_sum.sqrt().add_(eps)
            descend(p, grad, clr, std)
