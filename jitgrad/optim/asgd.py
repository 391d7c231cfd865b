"""ASGD (averaged stochastic gradient descent) with weight decay and ``maximize``: PyTorch's
single-tensor update, op for op.

A step traced by ``jitgrad.compile`` takes PyTorch's capturable branch (``eta`` and ``mu``
stay 0-d tensors of the plan instead of Python floats read with ``.item()``); as in
:mod:`jitgrad.optim.moments`, the new ``eta`` and ``mu`` are computed from the step in float64,
as the eager branch computes them in Python floats, and rounded to the default dtype as the
eager branch's are (PyTorch's ``torch.as_tensor(value)``; a state loaded into a float64
model holds float64 entries, still given float32 values).
"""

from __future__ import annotations

from ..creation import tensor
from ..dtypes import get_default_dtype
from ..ops.selection import where
from ..tensor import Tensor
from .moments import is_capturable, moment_state
from .optimizer import Optimizer, check_options, descend, params_with_grad, step_gradient

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """ASGD (PyTorch's ``torch.optim.ASGD``, ``foreach=False``): SGD with a decaying step
    ``eta = lr / (1 + lambd * lr * t) ** alpha`` and the parameter shrunk by
    ``1 - lambd * eta``; ``state["ax"]`` holds the running (Polyak) average of the iterates
    once the step count passes ``t0`` (``mu = 1 / max(1, t - t0)``, used at the next step:
    the average of the iterates since step ``t0 + 2``), before that the latest iterate.

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> w.grad = 2 * w.detach()
    >>> opt = jitgrad.optim.ASGD([w], lr=0.1, lambd=0.0)
    >>> opt.step(); w
    tensor([ 0.8000, -1.6000], requires_grad=True)
    >>> opt.state[w]["ax"]
    tensor([ 0.8000, -1.6000])
    """

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        check_options("ASGD", differentiable, foreach=foreach, lr=lr,
                      weight_decay=weight_decay)
        super().__init__(params, {
            "lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0, "weight_decay": weight_decay,
            "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
            "capturable": capturable})

    traced_hyperparameters = ("lr",)

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        lambd, alpha, t0 = group["lambd"], group["alpha"], group["t0"]
        capturable = is_capturable(group)
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:
                # step, eta (the learning rate), mu (1: no averaging yet), ax; as PyTorch's,
                # on the parameter's device
                moment_state(state, p, group, "ax", on_param_device=True, eta=group["lr"],
                             mu=1.0)
                if isinstance(lr, Tensor):  # traced: the rate the plan reads at every call
                    state["eta"].copy_(lr)
            ax, eta, mu, step_t = state["ax"], state["eta"], state["mu"], state["step"]
            grad = step_gradient(p, group)
            step_t += 1
            if capturable:
                p.mul_((1 - lambd * eta.double()).to(p.dtype))
                descend(p, grad, eta)
                # mu == 1 (before t0): the iterate itself, as the eager branch's copy
                ax.copy_(where((mu == 1).to(p.device), p, ax + (p - ax) * mu))
                step, dtype = step_t.double(), get_default_dtype()
                eta.copy_((lr / (1 + lambd * lr * step) ** alpha).to(dtype))
                mu.copy_((1 / (step - t0).clamp(min=1.0)).to(dtype))
            else:
                eta_value = eta.item()
                p.mul_(1 - lambd * eta_value)  # decay term
                descend(p, grad, eta_value)
                if mu.item() != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                step = step_t.item()
                # (as PyTorch's: through a tensor of the default dtype, whatever eta's own)
                eta.copy_(tensor(lr / ((1 + lambd * lr * step) ** alpha)))
                mu.copy_(tensor(1 / max(1, step - t0)))
