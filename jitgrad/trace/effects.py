"""Effects: code that acts on the world outside the graph (a collective of
``jitgrad.distributed``), run eagerly and, under ``jitgrad.compile``, recorded as an effect
equation (``ir.is_effect``) that the plan runs again in its place at every call."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..tensor import Tensor, alias
from .state import STATE

__all__ = ["in_place", "run_effect", "run_check"]


def run_effect(name: str, impl: Callable[..., np.ndarray], inputs: Sequence[Tensor],
               what: str, places: Sequence[np.ndarray | None] | None = None) -> Tensor:
    """``impl(*arrays of inputs)`` now, as a tensor without history; under a tracer also an
    effect equation ``name`` over the inputs' values (``what``: its description). ``impl``
    runs on arrays, untraced and unobserved (its side effects are the point); it must return
    a new array, one of its arguments or an array of its own that lives across calls (a
    DistributedDataParallel bucket), and do the same at every call.

    ``places``: per input, an array (C-contiguous, of the input's shape and dtype, living
    across calls) where a compiled plan should compute that input's value, or None. The plan
    computes it there when it can (``compiler/placement.py``: the value's producer can write
    into it and nothing else reads the value); ``impl`` must work either way (checking
    whether its argument already is the place, e.g. with :func:`in_place`)."""
    tr = STATE.tracer
    arrays = [t._data for t in inputs]
    if tr is None:
        return alias(impl(*arrays))
    STATE.tracer = None  # a declared effect: neither traced nor watched by the observer
    try:
        out = alias(impl(*arrays))
    finally:
        STATE.tracer = tr
    tr.on_effect(name, out, inputs, impl, what, places)
    return out


def run_check(t: Tensor, failed: Callable[[np.ndarray], bool],
              error: Callable[[], Exception], what: str) -> None:
    """Raise ``error()`` when ``failed(t's array)`` (a zero divisor, a probability outside
    [0, 1]): now, and -- under a tracer -- at every call of the compiled plan, as an effect
    equation (a check of the traced call's values alone would let a later call's bad values
    through). A check has no other effect: calls with one are still speculated (a joint
    forward+backward plan runs it in the same place)."""
    if STATE.tracer is None:
        if failed(t._data):
            raise error()
        return

    def check(a):
        if failed(a):
            raise error()
        return a.reshape(-1)[:0].copy()  # (an effect returns a new array; a may be 0-d)

    run_effect("check", check, [t], what)


def in_place(a: np.ndarray, place: np.ndarray) -> bool:
    """Whether ``a`` is the memory of ``place`` itself: same start, shape, strides and dtype
    (a plan computed an effect's input where ``run_effect``'s ``places`` asked)."""
    if a is place:
        return True
    if type(a) is not np.ndarray or type(place) is not np.ndarray:  # (CUDA: never placed)
        return False
    return (a.shape == place.shape and a.strides == place.strides and a.dtype == place.dtype
            and a.__array_interface__["data"][0] == place.__array_interface__["data"][0])
