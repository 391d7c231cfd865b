"""``local_response_norm`` / ``LocalResponseNorm``: each value divided by
``(k + alpha * mean of x^2 over size neighbouring channels) ** beta``, as PyTorch's (the
window zero-padded by ``size // 2`` before and ``(size - 1) // 2`` after, averaged over
``size``)."""

from __future__ import annotations

from ..tensor import Tensor
from .module import Module

__all__ = ["local_response_norm", "LocalResponseNorm"]


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """Local response normalisation across the channels (dim 1) of a 3-D or larger
    input."""
    from ..ops.padding import pad

    dim = input.ndim
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          "
                         f"input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    sq = input * input
    c = input.shape[1]
    widths = [0, 0] * (dim - 2) + [size // 2, (size - 1) // 2]
    padded = pad(sq, tuple(widths))
    total = padded.narrow(1, 0, c)
    for j in range(1, size):
        total = total + padded.narrow(1, j, c)
    div = (total / size).mul(alpha).add(k).pow(beta)
    return input / div


class LocalResponseNorm(Module):
    """:func:`local_response_norm` as a module."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
