"""RMSprop with momentum, centering, weight decay and ``maximize``: PyTorch's single-tensor
update, op for op."""

from __future__ import annotations

from ..creation import zeros_like
from .optimizer import Optimizer, check_options, descend, new_step, params_with_grad, step_gradient

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop (PyTorch's ``torch.optim.RMSprop``, ``foreach=False``): a running average of
    squared gradients ``v = alpha * v + (1 - alpha) * g**2`` (minus the squared running mean
    of ``g`` when ``centered``) scales each step ``lr * g / (sqrt(v) + eps)``.

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> w.grad = 2 * w.detach()
    >>> jitgrad.optim.RMSprop([w], lr=0.01).step(); w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_options("RMSprop", differentiable, lr=lr, eps=eps, momentum=momentum,
                      weight_decay=weight_decay, alpha=alpha)
        super().__init__(params, {
            "lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps, "centered": centered,
            "weight_decay": weight_decay, "capturable": capturable, "foreach": foreach,
            "maximize": maximize, "differentiable": differentiable})

    traced_hyperparameters = ("lr",)

    def _state_for(self, p, group: dict) -> dict:
        state = self.state[p]
        if not state:
            state["step"] = new_step()
            state["square_avg"] = zeros_like(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        return state

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        alpha, eps, momentum, centered = group["alpha"], group["eps"], group["momentum"], \
            group["centered"]
        for p in params_with_grad(group):
            state = self._state_for(p, group)
            square_avg = state["square_avg"]
            state["step"] += 1
            grad = step_gradient(p, group)
            square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
            if centered:
                grad_avg = state["grad_avg"]
                grad_avg.lerp_(grad, 1 - alpha)
                avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
            else:
                avg = square_avg.sqrt()
            avg = avg.add_(eps)
            if momentum > 0:
                buf = state["momentum_buffer"]
                buf.mul_(momentum).addcdiv_(grad, avg)
                descend(p, buf, lr)
            else:
                descend(p, grad, lr, avg)
