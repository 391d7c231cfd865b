"""Assemble every function of one dtype from the family modules."""

from __future__ import annotations

import numpy as np

from . import _activations, _erf, _exp, _log, _pow, _trig
from .bounds import FUNCTIONS, describe


def build_all(K) -> dict:
    """Name -> jitted implementation, for the dtype described by the constants ``K``."""
    fns = {}
    fns.update(_exp.build(K))
    fns.update(_log.build(K))
    fns.update(_trig.build(K))
    fns.update(_erf.build(K, fns["exp"]))
    fns.update(_pow.build(K, fns["log_dd"], fns["exp_dd"]))
    fns.update(_activations.build(K, fns["exp"], fns["expm1"], fns["log1p_core"]))
    dtype = np.dtype(K.F).name
    for name in FUNCTIONS:
        fns[name].__doc__ = f"{name} of {dtype} scalars (jitted). {describe(name, dtype)}"
    return fns
