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
    Dropout1d,
    Dropout2d,
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
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
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
    NLLLoss2d,
    SmoothL1Loss,
)
from .module import Module
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LayerNorm,
)
from .parameter import Parameter
from .similarity import CosineSimilarity, PairwiseDistance

__all__ = [
    "functional", "init", "parallel", "utils", "Module", "Parameter", "RemovableHandle",
    "Identity", "Linear", "Flatten", "Embedding", "Conv1d", "Conv2d", "ConvTranspose2d",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "Upsample",
    "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss", "CosineEmbeddingLoss",
    "TripletMarginLoss", "TripletMarginWithDistanceLoss", "MultiMarginLoss",
    "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss",
    "CTCLoss", "RMSNorm", "Bilinear", "Unfold", "Fold", "Hardshrink", "Softshrink", "Tanhshrink",
    "Softmax2d", "Dropout3d", "ChannelShuffle", "UpsamplingNearest2d", "UpsamplingBilinear2d",
    "AdaptiveMaxPool2d", "AdaptiveMaxPool1d", "EmbeddingBag", "ConvTranspose1d",
    "AdaptiveAvgPool2d", "Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d",
    "ReLU", "Tanh", "Sigmoid", "GELU", "Softmax", "LogSoftmax", "Softmin", "Dropout",
    "Dropout1d", "Dropout2d", "SiLU",
    "Softplus", "Mish", "ELU", "SELU", "CELU", "LeakyReLU", "PReLU", "Hardtanh", "ReLU6",
    "Hardsigmoid", "Hardswish", "LogSigmoid", "Softsign", "GLU", "Threshold",
    "LayerNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "InstanceNorm1d",
    "InstanceNorm2d", "Unflatten", "PixelShuffle", "PixelUnshuffle", "ZeroPad1d", "ZeroPad2d",
    "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d",
    "ReplicationPad1d", "ReplicationPad2d", "Sequential",
    "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "RNN", "LSTM", "GRU",
    "RNNCell", "LSTMCell", "GRUCell",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
    "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
    "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss", "CosineSimilarity", "PairwiseDistance",
    "register_module_forward_pre_hook", "register_module_forward_hook",
    "register_module_full_backward_hook", "register_module_full_backward_pre_hook",
    "InstanceNorm3d", "RNNBase", "RNNCellBase", "AdaptiveAvgPool1d", "MaxUnpool1d",
    "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d", "ZeroPad3d",
    "ConstantPad3d", "ReflectionPad3d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d",
    "CircularPad3d", "LocalResponseNorm",
    "RReLU", "AlphaDropout", "FeatureAlphaDropout", "Buffer", "LazyLinear", "LazyConv1d",
    "LazyConv2d", "LazyConv3d", "UninitializedParameter", "UninitializedBuffer",
    "SyncBatchNorm", "DataParallel", "NLLLoss2d", "AdaptiveMaxPool3d", "LazyBatchNorm1d",
    "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
    "LazyInstanceNorm3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
    "modules", "common_types", "grad", "AdaptiveLogSoftmaxWithLoss",
]


# layers whose modules load on first use (keeps ``import jitgrad`` fast)
_LAZY = {
    **dict.fromkeys(("ConvTranspose2d", "ConvTranspose1d"), "conv_transpose"),
    **dict.fromkeys(("MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss",
                     "CosineEmbeddingLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss",
                     "MultiMarginLoss", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss",
                     "PoissonNLLLoss", "GaussianNLLLoss", "CTCLoss"), "more_losses"),
    **dict.fromkeys(("RMSNorm", "Bilinear", "Unfold", "Fold", "Hardshrink", "Softshrink",
                     "Tanhshrink", "Softmax2d", "Dropout3d", "ChannelShuffle",
                     "UpsamplingNearest2d", "UpsamplingBilinear2d"), "more_layers"),
    **dict.fromkeys(("AdaptiveMaxPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool3d"),
                    "adaptive_max_pool"),
    "EmbeddingBag": "embedding_bag",
    **dict.fromkeys(("Upsample",), "interpolation"),
    **dict.fromkeys(("Conv1d", "MaxPool1d", "AvgPool1d"), "one_dimensional"),
    **dict.fromkeys(("Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d",
                     "AdaptiveAvgPool3d"),
                    "three_dimensional"),
    **dict.fromkeys(("RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "RNNBase",
                     "RNNCellBase"), "recurrent"),
    **dict.fromkeys(("AdaptiveAvgPool1d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
                     "LPPool1d", "LPPool2d", "LPPool3d"), "pooling_extra"),
    "LocalResponseNorm": "local_response_norm",
    **dict.fromkeys(("RReLU", "AlphaDropout", "FeatureAlphaDropout"), "random_activations"),
    "Buffer": "buffer",
    **dict.fromkeys(("LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
                     "UninitializedParameter", "UninitializedBuffer", "LazyBatchNorm1d",
                     "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
                     "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyConvTranspose1d",
                     "LazyConvTranspose2d", "LazyConvTranspose3d"), "lazy"),
    "SyncBatchNorm": "sync_batchnorm",
    "AdaptiveLogSoftmaxWithLoss": "adaptive",
    "DataParallel": "parallel.data_parallel",
    **dict.fromkeys(("MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
                     "TransformerDecoderLayer", "TransformerDecoder", "Transformer"),
                    "transformer"),
    **dict.fromkeys(("Unflatten", "PixelShuffle", "PixelUnshuffle", "ZeroPad1d", "ZeroPad2d",
                     "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d",
                     "ReplicationPad1d", "ReplicationPad2d", "ZeroPad3d", "ConstantPad3d",
                     "ReflectionPad3d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d",
                     "CircularPad3d"), "shape_layers"),
}


#: subpackages and modules imported on first use: PyTorch's module paths
#: (``nn.modules.loss``...), the size type aliases and the convolution gradients
_LAZY_SUBMODULES = frozenset({"modules", "common_types", "grad"})


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
