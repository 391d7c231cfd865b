"""Assemble every function of one dtype from the family modules."""

from __future__ import annotations

import numpy as np

from . import _activations, _erf, _exp, _log, _pow, _trig
from ._flatten import generate_module
from .bounds import FUNCTIONS, describe

_TITLES = {"float32": "float32 implementations, for direct use from jitted code: "
                      "``exp_f32(x)``, ``pow_f32(x, y)``.",
           "float64": "float64 implementations, for direct use from jitted code: "
                      "``exp_f64(x)``, ``pow_f64(x, y)``."}


def build_all(K) -> dict:
    """Name -> jitted implementation, for the dtype described by the constants ``K``: the
    helper-based originals, from which ``f32.py``/``f64.py`` are generated."""
    fns = {}
    fns.update(_exp.build(K))
    fns.update(_log.build(K))
    fns.update(_trig.build(K))
    fns.update(_erf.build(K, fns["exp"]))
    fns.update(_pow.build(K, fns["log_dd"], fns["exp_dd"]))
    fns.update(_activations.build(K, fns["exp_core"], fns["expm1_core"], fns["log1p_core"]))
    dtype = np.dtype(K.F).name
    for name in FUNCTIONS:
        fns[name].__doc__ = f"{name} of {dtype} scalars (jitted). {describe(name, dtype)}"
    return fns


def generate(K) -> str:
    """Source of the flattened module (``f32.py`` / ``f64.py``) for the constants ``K``: one
    Numba function per public name, each helper call inlined in source. Numba compiles every
    jitted helper in its own pipeline, so the helper-based build cost ~8 pipelines for
    ``tanh`` alone (a third of a fused kernel's compile time); the flattened one costs one,
    with the same operations, order and flags (bit-identical results, tested)."""
    fns = build_all(K)
    dtype = np.dtype(K.F).name
    public = {name: fns[name] for name in FUNCTIONS}
    docs = {name: fns[name].__doc__ for name in FUNCTIONS}
    return generate_module(public, "f" + dtype[-2:], _TITLES[dtype], docs)
