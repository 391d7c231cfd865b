"""Reductions and normalisations, declared by job in three modules: :mod:`.sums` (sum, mean,
var, std, prod), :mod:`.extrema` (max, min, amax, amin, argmax, argmin) and
:mod:`.softmax_ops` (logsumexp, softmax, log_softmax and their backward ops); what they
share is in :mod:`.reduce_base`.

This module gathers them under the import path code has always used
(``from jitgrad.ops.reduce import log_softmax``, ``reduce.SUM``).
"""

from __future__ import annotations

from .extrema import (
    AMAX,
    AMIN,
    ARGMAX,
    ARGMIN,
    MAX_DIM,
    MIN_DIM,
    amax,
    amin,
    argmax,
    argmin,
    max,
    min,
    return_max,
    return_min,
)
from .softmax_ops import (
    LOG_SOFTMAX,
    LOG_SOFTMAX_BACKWARD,
    LOGSUMEXP,
    SOFTMAX,
    SOFTMAX_BACKWARD,
    log_softmax,
    log_softmax_backward,
    logsumexp,
    softmax,
    softmax_backward,
)
from .sums import MEAN, STD, SUM, VAR, mean, prod, std, sum, var

__all__ = ["sum", "mean", "max", "min", "amax", "amin", "logsumexp", "softmax", "log_softmax",
           "softmax_backward", "log_softmax_backward",
           "argmax", "argmin", "var", "std", "prod",
           # the op declarations and max/min's result types, for code that used them here
           "SUM", "MEAN", "AMAX", "AMIN", "MAX_DIM", "MIN_DIM", "ARGMAX", "ARGMIN",
           "LOGSUMEXP", "SOFTMAX", "LOG_SOFTMAX", "SOFTMAX_BACKWARD", "LOG_SOFTMAX_BACKWARD",
           "VAR", "STD", "return_max", "return_min"]
