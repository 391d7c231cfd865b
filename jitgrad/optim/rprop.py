"""Rprop (resilient backpropagation) with ``maximize``: PyTorch's single-tensor update, op
for op (its capturable form: ``where`` instead of masked assignments, the same values, and
traceable by ``jitgrad.compile``)."""

from __future__ import annotations

from ..creation import full_like, zeros_like
from ..ops.selection import where
from ..tensor import Tensor
from .moments import moment_state
from .optimizer import Optimizer, check_options, params_with_grad

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Rprop (PyTorch's ``torch.optim.Rprop``, ``foreach=False``): each element moves by its
    own step size (``lr`` at first) against the sign of its gradient; the step size grows by
    ``etas[1]`` while the gradient keeps its sign, shrinks by ``etas[0]`` when it flips (and
    that element then skips its move), and stays within ``step_sizes``.

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = jitgrad.optim.Rprop([w], lr=0.1)
    >>> for _ in range(2):
    ...     w.grad = 2 * w.detach()
    ...     opt.step()
    >>> w
    tensor([ 0.7800, -1.7800], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_options("Rprop", lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        check_options("Rprop", differentiable, foreach=foreach)
        super().__init__(params, {
            "lr": lr, "etas": tuple(etas), "step_sizes": tuple(step_sizes), "foreach": foreach,
            "maximize": maximize, "differentiable": differentiable, "capturable": capturable})

    #: (read only when a parameter's state is created: its first step sizes)
    traced_hyperparameters = ("lr",)

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        for p in params_with_grad(group):
            grad = -p.grad if group["maximize"] else p.grad
            state = self.state[p]
            if not state:
                moment_state(state, p, group, "prev")
                state["step_size"] = zeros_like(p).add_(lr) if isinstance(lr, Tensor) \
                    else full_like(p, lr)
            prev, step_size = state["prev"], state["step_size"]
            state["step"] += 1
            sign = grad.mul(prev).sign()
            sign = where(sign.gt(0), etaplus, sign)
            sign = where(sign.lt(0), etaminus, sign)
            sign = where(sign.eq(0), 1.0, sign)
            step_size.mul_(sign).clamp_(step_size_min, step_size_max)
            # where the gradient's sign flipped: no move now, and no flip seen next step
            grad = where(sign.eq(etaminus), 0.0, grad)
            p.addcmul_(grad.sign(), step_size, value=-1)
            prev.copy_(grad)
