"""Activation modules: ``ReLU``, ``Tanh``, ``Sigmoid``, ``GELU``, ``Softmax``,
``LogSoftmax`` and ``Dropout``."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module

__all__ = ["ReLU", "Tanh", "Sigmoid", "GELU", "Softmax", "LogSoftmax", "Softmin", "Dropout",
           "Dropout1d", "Dropout2d", "SiLU",
           "Softplus", "Mish", "ELU", "SELU", "CELU", "LeakyReLU", "PReLU", "Hardtanh",
           "ReLU6", "Hardsigmoid", "Hardswish", "LogSigmoid", "Softsign", "GLU", "Threshold"]


class ReLU(Module):
    """``max(x, 0)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class Sigmoid(Module):
    """Logistic sigmoid."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class GELU(Module):
    """Gaussian error linear unit (``approximate="tanh"`` for the tanh form)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class _AlongDim(Module):
    """A normalisation along one dimension ``dim`` (the base of Softmax and LogSoftmax)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_AlongDim):
    """Softmax along ``dim``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)


class LogSoftmax(_AlongDim):
    """Log-softmax along ``dim``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)


class Softmin(_AlongDim):
    """``softmax(-x)`` along ``dim``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim)


class Dropout(Module):
    """Zeroes elements with probability ``p`` in training mode (identity in eval mode)."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """Zeroes whole channels of ``(N, C, L)`` inputs with probability ``p`` in training."""

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Zeroes whole channels of ``(N, C, H, W)`` inputs with probability ``p`` in training."""

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, self.inplace)


class _Pointwise(Module):
    """An activation with keyword settings: ``forward`` is ``fn(input, **settings)``."""

    fn = None
    settings: tuple = ()

    def __init__(self, **values) -> None:
        super().__init__()
        for name, value in values.items():
            setattr(self, name, value)

    def forward(self, input: Tensor) -> Tensor:
        return type(self).fn(input, **{k: getattr(self, k) for k in self.settings})

    def extra_repr(self) -> str:
        shown = [f"{k}={getattr(self, k)}" for k in self.settings
                 if not (k == "inplace" and not getattr(self, k))]
        return ", ".join(shown)


def _inplace_only(name: str, fn, doc: str) -> type:
    """An activation module whose one setting is ``inplace``."""
    def __init__(self, inplace: bool = False) -> None:
        _Pointwise.__init__(self, inplace=inplace)
    return type(name, (_Pointwise,), {"fn": staticmethod(fn), "settings": ("inplace",),
                                     "__init__": __init__, "__doc__": doc,
                                     "__module__": __name__})


SiLU = _inplace_only("SiLU", F.silu, "``x * sigmoid(x)``.")
Mish = _inplace_only("Mish", F.mish, "``x * tanh(softplus(x))``.")
SELU = _inplace_only("SELU", F.selu, "Scaled ELU with the self-normalising constants.")
ReLU6 = _inplace_only("ReLU6", F.relu6, "``min(max(x, 0), 6)``.")
Hardsigmoid = _inplace_only("Hardsigmoid", F.hardsigmoid, "``relu6(x + 3) / 6``.")
Hardswish = _inplace_only("Hardswish", F.hardswish, "``x * relu6(x + 3) / 6``.")


class Softplus(_Pointwise):
    """``log(1 + exp(beta x)) / beta`` (``x`` above ``threshold``)."""

    fn, settings = staticmethod(F.softplus), ("beta", "threshold")

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(beta=beta, threshold=threshold)


class ELU(_Pointwise):
    """``x`` for positive ``x``, else ``alpha (exp(x) - 1)``."""

    fn, settings = staticmethod(F.elu), ("alpha", "inplace")

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class CELU(_Pointwise):
    """``x`` for positive ``x``, else ``alpha (exp(x / alpha) - 1)``."""

    fn, settings = staticmethod(F.celu), ("alpha", "inplace")

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class LeakyReLU(_Pointwise):
    """``x`` for positive ``x``, else ``negative_slope * x``."""

    fn, settings = staticmethod(F.leaky_relu), ("negative_slope", "inplace")

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(negative_slope=negative_slope, inplace=inplace)


class Hardtanh(_Pointwise):
    """``x`` clamped to ``[min_val, max_val]``."""

    fn, settings = staticmethod(F.hardtanh), ("min_val", "max_val", "inplace")

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        super().__init__(min_val=min_val, max_val=max_val, inplace=inplace)


class LogSigmoid(_Pointwise):
    """``log(sigmoid(x))``."""

    fn = staticmethod(F.logsigmoid)


class Softsign(_Pointwise):
    """``x / (1 + |x|)``."""

    fn = staticmethod(F.softsign)


class GLU(_Pointwise):
    """``a * sigmoid(b)`` for the halves of ``dim``."""

    fn, settings = staticmethod(F.glu), ("dim",)

    def __init__(self, dim: int = -1) -> None:
        super().__init__(dim=dim)


class Threshold(_Pointwise):
    """``x`` above ``threshold``, else ``value``."""

    fn, settings = staticmethod(F.threshold), ("threshold", "value", "inplace")

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__(threshold=threshold, value=value, inplace=inplace)


class PReLU(Module):
    """Leaky ReLU with a learned slope: ``num_parameters`` of them (1, or one per channel of
    dim 1), initialised to ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None,
                 dtype=None) -> None:
        from .. import creation
        from .layers import place
        from .parameter import Parameter

        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(creation.full((num_parameters,), float(init), dtype=dtype,
                                              device="cpu"))
        place(self, device)

    def reset_parameters(self) -> None:
        from .. import no_grad

        with no_grad():
            self.weight.fill_(self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
