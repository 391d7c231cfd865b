"""Adamax (Adam with an infinity norm) with weight decay and ``maximize``: PyTorch's
single-tensor update, op for op."""

from __future__ import annotations

from ..ops.elementwise import maximum
from .moments import check_moment_options, decayed_gradient, is_capturable, moment_state
from .optimizer import Optimizer, params_with_grad

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Adamax (PyTorch's ``torch.optim.Adamax``, ``foreach=False``): Adam's first moment
    ``m``, and instead of the second moment an exponentially weighted infinity norm
    ``u = max(beta2 * u, |g| + eps)``; the step is ``lr / (1 - beta1**t) * m / u``.

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> w.grad = 2 * w.detach()
    >>> jitgrad.optim.Adamax([w], lr=0.1).step(); w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        check_moment_options("Adamax", lr, betas, eps, weight_decay, differentiable)
        super().__init__(params, {
            "lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
            "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
            "capturable": capturable})

    traced_hyperparameters = ("lr",)

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        (beta1, beta2), eps = group["betas"], group["eps"]
        capturable = is_capturable(group)
        for p in params_with_grad(group):
            state = moment_state(self.state[p], p, group, "exp_avg", "exp_inf")
            exp_avg, exp_inf, step_t = state["exp_avg"], state["exp_inf"], state["step"]
            step_t += 1
            grad = decayed_gradient(p, group, lr)
            exp_avg.lerp_(grad, 1 - beta1)
            # PyTorch: torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
            exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
            if capturable:
                neg_bias_correction = beta1 ** step_t.double() - 1
                neg_bias_correction.div_(lr)
                p.addcdiv_(exp_avg, exp_inf * neg_bias_correction)
            else:
                clr = lr / (1 - beta1 ** step_t.item())
                p.addcdiv_(exp_avg, exp_inf, value=-clr)
