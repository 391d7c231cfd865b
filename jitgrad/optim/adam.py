"""Adam and AdamW (decoupled weight decay), with ``amsgrad`` and ``maximize``: PyTorch's
single-tensor update, op for op.

``capturable=True`` keeps the bias corrections as tensor ops on the ``step`` tensor instead of
Python floats (PyTorch's capturable branch), so a compiled step does not bake in the step
count; a step traced by ``jitgrad.compile`` always takes that branch.
"""

from __future__ import annotations

from ..creation import tensor, zeros_like
from ..dtypes import get_default_dtype
from ..ops.elementwise import maximum
from ..tensor import Tensor
from ..trace.state import STATE as TRACE
from .optimizer import Optimizer, add_scaled, check_options, in_dtype, params_with_grad

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam (PyTorch's ``torch.optim.Adam``, ``foreach=False``; ``fused=True``: the update
    as one compiled plan, each parameter's update one fused pass, see
    ``Optimizer._fused_step``).

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = jitgrad.optim.Adam([w], lr=0.1)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        check_options(type(self).__name__, differentiable, fused, foreach)
        super().__init__(params, {
            "lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
            "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
            "capturable": capturable, "differentiable": differentiable, "fused": fused,
            "decoupled_weight_decay": decoupled_weight_decay})

    def _state_for(self, p, amsgrad: bool) -> dict:
        state = self.state[p]
        if not state:
            # a float tensor, as PyTorch's (its dtype follows the default float dtype)
            state["step"] = tensor(0.0, dtype=get_default_dtype())
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_like(p)
        return state

    traced_hyperparameters = ("lr",)
    # (a weight-decay schedule -- DINO's, MAE's -- changes it at every step)
    varying_hyperparameters = ("betas", "weight_decay")
    traced_zero_tests = ("weight_decay",)

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        (beta1, beta2), eps = self._hyper(group, "betas"), group["eps"]
        amsgrad, maximize = group["amsgrad"], group["maximize"]
        decays = group["weight_decay"] != 0  # (guarded; the value is read when it varies)
        wd = self._hyper(group, "weight_decay") if decays else 0
        decoupled = group["decoupled_weight_decay"]
        # under jitgrad.compile tracing, step.item() would bake the step count into the plan
        capturable = group["capturable"] or TRACE.tracer is not None
        for p in params_with_grad(group):
            grad = -p.grad if maximize else p.grad
            state = self._state_for(p, amsgrad)
            exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
            step_t += 1
            if decays:
                if decoupled:
                    p.mul_(1 - lr * wd)
                else:
                    grad = add_scaled(grad, p, wd)
            exp_avg.lerp_(grad, 1 - beta1)  # (traced betas: 0-d tensors, rounded as numbers)
            if isinstance(beta2, Tensor):  # addcmul's order: (grad * value) * grad
                exp_avg_sq.mul_(in_dtype(beta2, p)).add_(grad * in_dtype(1 - beta2, p) * grad)
            else:
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            second = exp_avg_sq
            if amsgrad:
                second = state["max_exp_avg_sq"]
                second.copy_(maximum(second, exp_avg_sq))
            if capturable:  # bias corrections in float64, as the eager branch's floats
                st = step_t.double()  # (moments.py: PyTorch's use the step's float32)
                step_size_neg = -(lr / (1 - beta1 ** st))
                bc2_sqrt = (1 - beta2 ** st).sqrt()
                denom = (second.sqrt() / (bc2_sqrt * step_size_neg)).add_(eps / step_size_neg)
                p.addcdiv_(exp_avg, denom)
            else:
                step = step_t.item()
                step_size = lr / (1 - beta1 ** step)
                bc2_sqrt = (1 - beta2 ** step) ** 0.5
                denom = (second.sqrt() / bc2_sqrt).add_(eps)
                p.addcdiv_(exp_avg, denom, value=-step_size)


class AdamW(Adam):
    """AdamW: Adam with decoupled weight decay (``weight_decay`` defaults to 0.01)."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
