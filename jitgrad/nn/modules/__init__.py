"""PyTorch's ``torch.nn.modules`` package: the module paths published code imports from
(``from torch.nn.modules.loss import _Loss``, ``from torch.nn.modules.utils import _pair``,
``from torch.nn.modules.batchnorm import _BatchNorm``...), each a small module re-exporting
jitgrad.nn's classes. The package itself exports every public layer, as PyTorch's.

>>> from jitgrad.nn.modules.conv import _ConvNd
>>> import jitgrad
>>> isinstance(jitgrad.nn.Conv2d(1, 1, 3), _ConvNd)
True
"""

from __future__ import annotations

from .activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    MultiheadAttention,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from .batchnorm import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    SyncBatchNorm,
)
from .channelshuffle import (
    ChannelShuffle,
)
from .container import (
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from .conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
)
from .distance import (
    CosineSimilarity,
    PairwiseDistance,
)
from .dropout import (
    AlphaDropout,
    Dropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    FeatureAlphaDropout,
)
from .flatten import (
    Flatten,
    Unflatten,
)
from .fold import (
    Fold,
    Unfold,
)
from .instancenorm import (
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
)
from .linear import (
    Bilinear,
    Identity,
    LazyLinear,
    Linear,
)
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    NLLLoss2d,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from .module import (
    Module,
)
from .normalization import (
    GroupNorm,
    LayerNorm,
    LocalResponseNorm,
    RMSNorm,
)
from .padding import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from .pixelshuffle import (
    PixelShuffle,
    PixelUnshuffle,
)
from .pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
from .rnn import (
    GRU,
    LSTM,
    RNN,
    GRUCell,
    LSTMCell,
    RNNBase,
    RNNCell,
    RNNCellBase,
)
from .sparse import (
    Embedding,
    EmbeddingBag,
)
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .upsampling import (
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)

__all__ = ["Module", "ModuleDict", "ModuleList",
           "ParameterDict", "ParameterList", "Sequential", "Identity", "Linear",
           "LazyLinear", "Bilinear", "CELU", "ELU", "GELU", "GLU", "Hardsigmoid",
           "Hardswish", "Hardtanh", "LeakyReLU", "LogSigmoid", "LogSoftmax", "Mish",
           "PReLU", "ReLU", "ReLU6", "SELU", "SiLU", "Sigmoid", "Softmax", "Softmin",
           "Softplus", "Softsign", "Tanh", "Threshold", "Hardshrink", "Softmax2d",
           "Softshrink", "Tanhshrink", "RReLU", "MultiheadAttention", "BCELoss",
           "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss",
           "MSELoss", "NLLLoss", "NLLLoss2d", "SmoothL1Loss", "CTCLoss",
           "CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss",
           "MarginRankingLoss", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss",
           "MultiMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss",
           "TripletMarginWithDistanceLoss", "ConvTranspose1d", "ConvTranspose2d", "Conv2d",
           "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "Conv1d", "Conv3d",
           "ConvTranspose3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
           "AdaptiveAvgPool2d", "AvgPool2d", "MaxPool2d", "AvgPool1d", "MaxPool1d",
           "AdaptiveAvgPool1d", "LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d",
           "MaxUnpool2d", "MaxUnpool3d", "AdaptiveAvgPool3d", "AvgPool3d", "MaxPool3d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "BatchNorm1d",
           "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "LocalResponseNorm", "RMSNorm", "GroupNorm", "LayerNorm",
           "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout", "EmbeddingBag", "Embedding", "GRU", "GRUCell", "LSTM",
           "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase", "Transformer",
           "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer", "CircularPad1d", "CircularPad2d", "CircularPad3d",
           "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
           "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "Flatten",
           "Unflatten", "PixelShuffle", "PixelUnshuffle", "Upsample",
           "UpsamplingBilinear2d", "UpsamplingNearest2d", "CosineSimilarity",
           "PairwiseDistance", "Fold", "Unfold", "ChannelShuffle"]
