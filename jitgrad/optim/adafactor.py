"""Adafactor (factored second moments, relative step size, update clipping) with weight
decay and ``maximize``: PyTorch's single-tensor update, op for op.

Eagerly, the step's scalars (the ``beta2`` schedule, the relative step size, the clipping
denominator) are Python floats read with ``.item()``, as PyTorch's. A step traced by
``jitgrad.compile`` computes them as 0-d float64 tensors instead (the step count, the
parameter's and the update's norms stay in the plan), and interpolates with PyTorch's
``lerp`` formula written out (:func:`_lerp_`), so the compiled update is the eager one's to
an ulp or so.
"""

from __future__ import annotations

from ..creation import zeros_like
from ..ops.selection import minimum, where
from ..tensor import Tensor
from ..trace.state import STATE as TRACE
from ..type_info import finfo
from .optimizer import Optimizer, descend, new_step, params_with_grad

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """Adafactor (PyTorch's ``torch.optim.Adafactor``, ``foreach=False``): a gradient of two
    or more dimensions keeps running means of its squares over its last dimension
    (``row_var``) and over its second-to-last (``col_var``), whose outer product estimates
    the second moment; a vector keeps the full ``variance``. The running means decay with
    ``beta2_t = 1 - t**beta2_decay``; the update ``g / sqrt(v)`` is clipped to RMS ``d`` and
    scaled by ``max(eps2, RMS(p)) * min(lr, 1 / sqrt(t))``; ``weight_decay`` is decoupled
    (``p *= 1 - lr * weight_decay``). ``eps[0]`` (None: the parameter dtype's machine
    epsilon) bounds the second moment from below.

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> w.grad = 2 * w.detach()
    >>> jitgrad.optim.Adafactor([w], lr=0.1).step(); w
    tensor([ 0.8419, -1.8419], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0,
                 weight_decay: float = 0.0, *, foreach: bool | None = None,
                 maximize: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, {
            "lr": lr, "beta2_decay": beta2_decay, "eps": tuple(eps), "d": d,
            "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize})

    traced_hyperparameters = ("lr",)

    def _state_for(self, p: Tensor) -> dict:
        state = self.state[p]
        if not state:
            state["step"] = new_step()
            grad = p.grad
            if grad.dim() > 1:  # factored: a column of row means, a row of column means
                shape = tuple(grad.shape)
                state["row_var"] = grad.new_zeros(shape[:-1] + (1,))
                state["col_var"] = grad.new_zeros(shape[:-2] + (1,) + shape[-1:])
            else:
                state["variance"] = zeros_like(grad)
        return state

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        eps1, eps2 = group["eps"]
        d, beta2_decay, wd = group["d"], group["beta2_decay"], group["weight_decay"]
        traced = TRACE.tracer is not None  # no .item() in a compiled step
        for p in params_with_grad(group):
            grad = -p.grad if group["maximize"] else p.grad
            state = self._state_for(p)
            step_t = state["step"]
            if eps1 is None:  # (PyTorch's: the first such parameter's dtype, for the group)
                eps1 = finfo(p.dtype).eps
            step_t += 1
            if traced:
                step = step_t.double()
                one_minus_beta2_t = step ** beta2_decay
                rho_t = minimum(lr, 1 / step ** 0.5)
                alpha = (p.norm(2).double() / p.numel() ** 0.5).clamp(min=eps2) * rho_t
            else:
                step = step_t.item()
                one_minus_beta2_t = step ** beta2_decay
                rho_t = min(lr, 1 / (step ** 0.5))
                alpha = max(eps2, p.norm(2).item() / (p.numel() ** 0.5)) * rho_t
            if wd != 0:
                p.mul_(1 - lr * wd)
            if grad.dim() > 1:
                # the mean of g * g over a dimension, as PyTorch's: a norm, squared
                row_mean = grad.norm(dim=-1, keepdim=True).square_().div_(grad.size(-1))
                _lerp_(state["row_var"], row_mean, one_minus_beta2_t)
                col_mean = grad.norm(dim=-2, keepdim=True).square_().div_(grad.size(-2))
                _lerp_(state["col_var"], col_mean, one_minus_beta2_t)
                row_var = state["row_var"]
                var_estimate = row_var @ state["col_var"]
                var_estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
            else:
                _lerp_(state["variance"], grad * grad, one_minus_beta2_t)
                var_estimate = state["variance"].clone()
            # eps1 squared: its square root bounds 1 / sqrt(v)
            update = var_estimate.clamp_(min=eps1 * eps1).rsqrt_()
            update.mul_(grad)
            if traced:
                denom = (update.norm(2).double() / (update.numel() ** 0.5 * d)).clamp(min=1.0)
            else:
                denom = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * d))
            descend(p, update, alpha / denom)


def _lerp_(t: Tensor, end: Tensor, weight) -> None:
    """``t.lerp_(end, weight)``; a 0-d tensor ``weight`` (traced) goes through PyTorch's
    formula in ``t``'s dtype (``lerp_`` would read it with ``.item()``)."""
    if not isinstance(weight, Tensor):
        t.lerp_(end, weight)
        return
    w = weight.to(t.dtype)
    t.copy_(where((w < 0.5).to(t.device), t + w * (end - t), end - (end - t) * (1 - w)))
