"""Neural-network building blocks, as ``torch.nn``: ``Module``, ``Parameter``, layers,
containers, losses, ``functional`` and ``init``.

>>> import jitgrad
>>> import jitgrad.nn as nn
>>> model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
>>> loss = nn.functional.cross_entropy(model(jitgrad.randn(8, 4)), jitgrad.tensor([0, 1, 2] * 2
...                                    + [0, 1]))
>>> loss.backward()
>>> model[0].weight.grad.shape
jitgrad.Size([16, 4])
"""

from . import functional, init, parallel, utils
from .activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Dropout,
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
    Softplus,
    Softsign,
    Tanh,
    Threshold,
)
from .container import ModuleDict, ModuleList, Sequential
from .hooks import (
    RemovableHandle,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from .layers import (
    AdaptiveAvgPool2d,
    AvgPool2d,
    Conv2d,
    Embedding,
    Flatten,
    Identity,
    Linear,
    MaxPool2d,
)
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module
from .normalization import BatchNorm1d, LayerNorm
from .parameter import Parameter
from .similarity import CosineSimilarity, PairwiseDistance

__all__ = [
    "functional", "init", "parallel", "utils", "Module", "Parameter", "RemovableHandle",
    "Identity", "Linear", "Flatten", "Embedding", "Conv2d", "MaxPool2d", "AvgPool2d",
    "AdaptiveAvgPool2d",
    "ReLU", "Tanh", "Sigmoid", "GELU", "Softmax", "LogSoftmax", "Dropout", "SiLU",
    "Softplus", "Mish", "ELU", "SELU", "CELU", "LeakyReLU", "PReLU", "Hardtanh", "ReLU6",
    "Hardsigmoid", "Hardswish", "LogSigmoid", "Softsign", "GLU", "Threshold",
    "LayerNorm", "BatchNorm1d", "Sequential", "ModuleList", "ModuleDict",
    "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss", "CosineSimilarity", "PairwiseDistance",
    "register_module_forward_pre_hook", "register_module_forward_hook",
    "register_module_full_backward_hook", "register_module_full_backward_pre_hook",
]
