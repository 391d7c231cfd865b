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

from . import (
    activation,
    adaptive,
    batchnorm,
    channelshuffle,
    container,
    conv,
    distance,
    dropout,
    flatten,
    fold,
    instancenorm,
    linear,
    loss,
    normalization,
    padding,
    pixelshuffle,
    pooling,
    rnn,
    sparse,
    transformer,
    upsampling,
    utils,  # noqa: F401 - torch.nn.modules.utils, an attribute of the package as in PyTorch
)
from .activation import *  # noqa: F403
from .adaptive import *  # noqa: F403
from .batchnorm import *  # noqa: F403
from .channelshuffle import *  # noqa: F403
from .container import *  # noqa: F403
from .conv import *  # noqa: F403
from .distance import *  # noqa: F403
from .dropout import *  # noqa: F403
from .flatten import *  # noqa: F403
from .fold import *  # noqa: F403
from .instancenorm import *  # noqa: F403
from .linear import *  # noqa: F403
from .loss import *  # noqa: F403
from .module import Module
from .normalization import *  # noqa: F403
from .padding import *  # noqa: F403
from .pixelshuffle import *  # noqa: F403
from .pooling import *  # noqa: F403
from .rnn import *  # noqa: F403
from .sparse import *  # noqa: F403
from .transformer import *  # noqa: F403
from .upsampling import *  # noqa: F403

#: every public layer of the submodules (their ``__all__``), as PyTorch's package exports
_PARTS = (activation, adaptive, batchnorm, channelshuffle, container, conv, distance, dropout,
          flatten, fold, instancenorm, linear, loss, normalization, padding, pixelshuffle,
          pooling, rnn, sparse, transformer, upsampling)
__all__ = ["Module"] + [n for part in _PARTS for n in part.__all__ if not n.startswith("_")]
