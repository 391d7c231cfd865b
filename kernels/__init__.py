"""Numba kernels and vectorisable scalar math, installed as ``jitgrad.kernels``.

Nothing here compiles at import: kernels are ``@njit(cache=True)`` functions compiled (or
loaded from Numba's disk cache) on first call. Import sub-modules explicitly, e.g.
``from jitgrad.kernels import vmath``.
"""
