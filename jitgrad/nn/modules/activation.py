"""PyTorch's ``torch.nn.modules.activation`` path: The activation layers (and
``MultiheadAttention``). The classes are jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..activation import (  # noqa: F401 - re-exported
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softsign,
    Tanh,
    Threshold,
)
from ..more_layers import (  # noqa: F401 - re-exported
    Hardshrink,
    Softmax2d,
    Softshrink,
    Tanhshrink,
)
from ..random_activations import (  # noqa: F401 - re-exported
    RReLU,
)
from ..transformer import (  # noqa: F401 - re-exported
    MultiheadAttention,
)

__all__ = ["CELU", "ELU", "GELU", "GLU", "Hardsigmoid", "Hardswish", "Hardtanh",
           "LeakyReLU", "LogSigmoid", "LogSoftmax", "Mish", "PReLU", "ReLU", "ReLU6",
           "SELU", "SiLU", "Sigmoid", "Softmax", "Softmin", "Softplus", "Softsign",
           "Tanh", "Threshold", "Hardshrink", "Softmax2d", "Softshrink", "Tanhshrink",
           "RReLU", "MultiheadAttention"]
