"""Reductions and normalisations, declared by job in modules: :mod:`.sums` (sum, mean,
var, std), :mod:`.products` (prod, cumprod), :mod:`.extrema` (max, min, amax, amin, argmax,
argmin) and :mod:`.softmax_ops` (logsumexp, softmax, log_softmax and their backward ops); what they
share is in :mod:`.reduce_base`.

This module gathers them under the import path code has always used
(``from jitgrad.ops.reduce import log_softmax``, ``reduce.SUM``).
"""

from __future__ import annotations

from . import extrema, products, softmax_ops, sums
from .registry import gather

__all__ = gather(globals(), sums, products, extrema, softmax_ops)
