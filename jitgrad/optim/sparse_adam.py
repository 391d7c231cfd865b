"""SparseAdam: PyTorch's API, argument checks and errors. jitgrad has no sparse gradients,
and PyTorch's SparseAdam refuses dense ones, so every step with a gradient raises
PyTorch's own error (use :class:`jitgrad.optim.Adam`)."""

from __future__ import annotations

from .optimizer import Optimizer, params_with_grad

__all__ = ["SparseAdam"]

#: PyTorch's error for a dense gradient, word for word
DENSE_GRADIENT_ERROR = ("SparseAdam does not support dense gradients, please consider Adam "
                        "instead")


class SparseAdam(Optimizer):
    """SparseAdam (PyTorch's ``torch.optim.SparseAdam``): Adam's update of only the entries
    a sparse gradient holds. Constructed, checked, saved and loaded as PyTorch's; jitgrad
    has no sparse tensors, so :meth:`step` raises PyTorch's ``RuntimeError`` for a dense
    gradient as soon as a parameter has one (a step without gradients does nothing).

    >>> import jitgrad
    >>> w = jitgrad.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = jitgrad.optim.SparseAdam([w], lr=0.1)
    >>> w.grad = 2 * w.detach()
    >>> opt.step()
    Traceback (most recent call last):
    ...
    RuntimeError: SparseAdam does not support dense gradients, please consider Adam instead
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, maximize: bool = False) -> None:
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        # (PyTorch's check for sparse or complex parameters: jitgrad has neither)
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps,
                                  "maximize": maximize})

    def _step_group(self, group: dict) -> None:
        if params_with_grad(group):  # every jitgrad gradient is dense
            raise RuntimeError(DENSE_GRADIENT_ERROR)
