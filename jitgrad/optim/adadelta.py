"""Adadelta with weight decay and ``maximize``: PyTorch's single-tensor update, op for op."""

from __future__ import annotations

from ..creation import zeros_like
from .optimizer import Optimizer, check_options, descend, new_step, params_with_grad, step_gradient

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta (PyTorch's ``torch.optim.Adadelta``, ``foreach=False``): running averages of
    squared gradients ``v`` and squared updates ``u`` (both with ``rho``) make the update
    ``sqrt(u + eps) / sqrt(v + eps) * g``, scaled by ``lr``.

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> w.grad = 2 * w.detach()
    >>> jitgrad.optim.Adadelta([w], lr=1.0).step(); w
    tensor([ 0.9968, -1.9968], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_options("Adadelta", differentiable, lr=lr, rho=rho, eps=eps,
                      weight_decay=weight_decay)
        super().__init__(params, {
            "lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
            "maximize": maximize, "capturable": capturable, "foreach": foreach,
            "differentiable": differentiable})

    traced_hyperparameters = ("lr",)

    def _state_for(self, p) -> dict:
        state = self.state[p]
        if not state:
            state["step"] = new_step()
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        return state

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        rho, eps = group["rho"], group["eps"]
        for p in params_with_grad(group):
            state = self._state_for(p)
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            state["step"] += 1
            grad = step_gradient(p, group)
            square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
            std = square_avg.add(eps).sqrt_()
            delta = acc_delta.add(eps).sqrt_()
            delta.div_(std).mul_(grad)
            acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
            descend(p, delta, lr)
