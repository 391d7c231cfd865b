"""Stochastic gradient descent with momentum, dampening, Nesterov momentum, weight decay and
``maximize``: PyTorch's single-tensor update, op for op."""

from __future__ import annotations

from ..tensor import Tensor
from .optimizer import (
    Optimizer,
    add_scaled,
    check_options,
    descend,
    in_dtype,
    params_with_grad,
)

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD (PyTorch's ``torch.optim.SGD``, ``foreach=False``; ``fused=True``: the update as
    one compiled plan of fused kernels, see ``Optimizer._fused_step``).

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = jitgrad.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        check_options("SGD", differentiable, fused, foreach)
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov,
                                  "maximize": maximize, "foreach": foreach,
                                  "differentiable": differentiable, "fused": fused})

    traced_hyperparameters = ("lr",)
    # (a weight-decay schedule changes it at every step: read at every call once it varies)
    varying_hyperparameters = traced_zero_tests = ("momentum", "weight_decay")

    def _step_group(self, group: dict) -> None:
        lr = self._hyper(group, "lr")
        dampening = group["dampening"]
        nesterov, maximize = group["nesterov"], group["maximize"]
        decays = group["weight_decay"] != 0  # (guarded; the value is read when it varies)
        wd = self._hyper(group, "weight_decay") if decays else 0
        # (whether there is momentum is guarded; its value is read at every compiled call)
        has_momentum = group["momentum"] != 0
        momentum = self._hyper(group, "momentum") if has_momentum else 0
        for p in params_with_grad(group):
            grad = -p.grad if maximize else p.grad
            if decays:
                grad = add_scaled(grad, p, wd)
            if has_momentum:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                m = in_dtype(momentum, p)
                if buf is None:
                    buf = state["momentum_buffer"] = grad.detach().clone()
                else:
                    buf.mul_(m).add_(grad, alpha=1 - dampening)
                if not nesterov:
                    grad = buf
                elif isinstance(m, Tensor):  # add's alpha, as eager mode computes it
                    grad = grad + buf * m
                else:
                    grad = grad.add(buf, alpha=m)
            descend(p, grad, lr)
