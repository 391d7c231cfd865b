"""RAdam (Adam with a rectified adaptive learning rate), with coupled or decoupled weight
decay and ``maximize``: PyTorch's single-tensor update, op for op."""

from __future__ import annotations

from ..ops.selection import where
from .moments import check_moment_options, decayed_gradient, is_capturable, moment_state
from .optimizer import Optimizer, params_with_grad

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """RAdam (PyTorch's ``torch.optim.RAdam``, ``foreach=False``): Adam's bias-corrected
    first moment, scaled by the adaptive rate ``sqrt(1 - beta2**t) / (sqrt(v) + eps)`` and
    the variance rectification term once the approximated SMA length ``rho_t`` exceeds 5;
    plain momentum SGD before that. ``decoupled_weight_decay=True`` is RAdamW.

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> w.grad = 2 * w.detach()
    >>> jitgrad.optim.RAdam([w], lr=0.1).step(); w
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        check_moment_options("RAdam", lr, betas, eps, weight_decay, differentiable)
        super().__init__(params, {
            "lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
            "maximize": maximize, "foreach": foreach, "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay,
            "differentiable": differentiable})

    traced_hyperparameters = ("lr",)

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        (beta1, beta2), eps = group["betas"], group["eps"]
        capturable = is_capturable(group)
        rho_inf = 2 / (1 - beta2) - 1  # the approximated SMA's maximum length
        for p in params_with_grad(group):
            state = moment_state(self.state[p], p, group, "exp_avg", "exp_avg_sq")
            exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
            step_t += 1
            step = step_t.double() if capturable else step_t.item()
            grad = decayed_gradient(p, group, lr)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            bias_corrected_exp_avg = exp_avg / bias_correction1
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
            if capturable:
                # rect is NaN while rho_t < 4: where() picks 1.0 there (the condition moved
                # to the parameter's device: the step lives on the CPU unless capturable)
                update = where((rho_t > 5.0).to(p.device), _rect(rho_t, rho_inf) * _adaptive_lr(
                    exp_avg_sq, bias_correction2, eps), 1.0)
                p.add_(bias_corrected_exp_avg * lr * update, alpha=-1.0)
            elif rho_t > 5.0:
                p.add_(bias_corrected_exp_avg * lr * _adaptive_lr(exp_avg_sq, bias_correction2,
                                                                   eps) * _rect(rho_t, rho_inf),
                       alpha=-1.0)
            else:
                p.add_(bias_corrected_exp_avg * lr, alpha=-1.0)


def _rect(rho_t, rho_inf: float):
    """The variance rectification term (a float, or a 0-d tensor when ``rho_t`` is one)."""
    return ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5


def _adaptive_lr(exp_avg_sq, bias_correction2, eps: float):
    """``sqrt(1 - beta2**t) / (sqrt(v) + eps)``."""
    return bias_correction2 ** 0.5 / exp_avg_sq.sqrt().add_(eps)
