"""Effects: code that acts on the world outside the graph (a collective of
``jitgrad.distributed``), run eagerly and, under ``jitgrad.compile``, recorded as an effect
equation (``ir.is_effect``) that the plan runs again in its place at every call."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..tensor import Tensor, alias
from .state import STATE

__all__ = ["run_effect"]


def run_effect(name: str, impl: Callable[..., np.ndarray], inputs: Sequence[Tensor],
               what: str) -> Tensor:
    """``impl(*arrays of inputs)`` now, as a tensor without history; under a tracer also an
    effect equation ``name`` over the inputs' values (``what``: its description). ``impl``
    runs on arrays, untraced and unobserved (its side effects are the point); it must return
    a new array or one of its arguments, and do the same at every call."""
    tr = STATE.tracer
    arrays = [t._data for t in inputs]
    if tr is None:
        return alias(impl(*arrays))
    STATE.tracer = None  # a declared effect: neither traced nor watched by the observer
    try:
        out = alias(impl(*arrays))
    finally:
        STATE.tracer = tr
    tr.on_effect(name, out, inputs, impl, what)
    return out
