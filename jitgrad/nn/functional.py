"""``jitgrad.nn.functional``: activations and losses as functions."""

from ..ops.elementwise import relu, sigmoid, tanh
from ..ops.linalg import linear
from ..ops.losses import binary_cross_entropy_with_logits
from ..ops.reduce import log_softmax, softmax

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear",
           "binary_cross_entropy_with_logits"]
