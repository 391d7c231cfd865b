"""NAdam (Adam with Nesterov momentum and momentum decay), with coupled or decoupled weight
decay and ``maximize``: PyTorch's single-tensor update, op for op."""

from __future__ import annotations

from .moments import check_moment_options, decayed_gradient, is_capturable, moment_state
from .optimizer import Optimizer, params_with_grad

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam (PyTorch's ``torch.optim.NAdam``, ``foreach=False``): Adam's moments, with the
    first one looked ahead by the momentum schedule
    ``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))`` and its running product
    (``state["mu_product"]``). ``decoupled_weight_decay=True`` is NAdamW.

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> w.grad = 2 * w.detach()
    >>> jitgrad.optim.NAdam([w], lr=0.1).step(); w
    tensor([ 0.8944, -1.8944], requires_grad=True)
    """

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        check_moment_options("NAdam", lr, betas, eps, weight_decay, differentiable,
                             momentum_decay=momentum_decay)
        super().__init__(params, {
            "lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
            "momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize, "foreach": foreach, "capturable": capturable,
            "differentiable": differentiable})

    traced_hyperparameters = ("lr",)

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        (beta1, beta2), eps = group["betas"], group["eps"]
        momentum_decay = group["momentum_decay"]
        capturable = is_capturable(group)
        for p in params_with_grad(group):
            state = moment_state(self.state[p], p, group, "exp_avg", "exp_avg_sq", mu_product=1.0)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            mu_product, step_t = state["mu_product"], state["step"]
            step_t += 1
            step = step_t.double() if capturable else step_t.item()
            bias_correction2 = 1 - beta2 ** step
            grad = decayed_gradient(p, group, lr)
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mu_product *= mu
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = exp_avg_sq.div(bias_correction2).sqrt()
            if capturable:
                denom = denom.add(eps)
                mu_product_next = mu_product * mu_next
                p.addcdiv_(grad * (-lr * (1.0 - mu) / (1.0 - mu_product)), denom)
                p.addcdiv_(exp_avg * (-lr * mu_next / (1.0 - mu_product_next)), denom)
            else:
                product = mu_product.item()
                mu_product_next = product * mu_next
                denom.add_(eps)
                p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - product))
                p.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - mu_product_next))
