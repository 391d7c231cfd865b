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
from .conv_transpose import ConvTranspose2d
from .hooks import (
    RemovableHandle,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from .interpolation import Upsample
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
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm
from .one_dimensional import AvgPool1d, Conv1d, MaxPool1d
from .parameter import Parameter
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .similarity import CosineSimilarity, PairwiseDistance
from .transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer

__all__ = [
    "functional", "init", "parallel", "utils", "Module", "Parameter", "RemovableHandle",
    "Identity", "Linear", "Flatten", "Embedding", "Conv1d", "Conv2d", "ConvTranspose2d",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "Upsample",
    "AdaptiveAvgPool2d",
    "ReLU", "Tanh", "Sigmoid", "GELU", "Softmax", "LogSoftmax", "Dropout", "SiLU",
    "Softplus", "Mish", "ELU", "SELU", "CELU", "LeakyReLU", "PReLU", "Hardtanh", "ReLU6",
    "Hardsigmoid", "Hardswish", "LogSigmoid", "Softsign", "GLU", "Threshold",
    "LayerNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "Sequential",
    "ModuleList", "ModuleDict", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
    "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss", "CosineSimilarity", "PairwiseDistance",
    "register_module_forward_pre_hook", "register_module_forward_hook",
    "register_module_full_backward_hook", "register_module_full_backward_pre_hook",
]
