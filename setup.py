"""Build of jitgrad's C extensions: ``jitgrad._fastops`` (the eager arithmetic operators'
common case; see jitgrad/_fastops.c) and ``jitgrad._nativepool`` (the thread pool's launch
path without the GIL; see jitgrad/_nativepool.c). Both are optional: where they cannot be
built (no C compiler), jitgrad runs the same operators in Python (jitgrad/ops/eager_fast.py)
and parallel kernels on the Python pool (jitgrad/kernels/pool.py)."""

import numpy
from setuptools import Extension, setup

setup(ext_modules=[
    Extension(
        "jitgrad._fastops", ["jitgrad/_fastops.c"], include_dirs=[numpy.get_include()],
        # IEEE arithmetic as written: no contraction, no fast-math (the bits of the Numba
        # kernels); -O3 vectorises the element loops (-O2's cost model leaves a loop of
        # unknown trip count scalar: x * y at 16K float32 took 9.2 us, NumPy 2.3)
        extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math", "-std=c11"],
        optional=True),
    Extension(
        "jitgrad._nativepool", ["jitgrad/_nativepool.c"], include_dirs=[numpy.get_include()],
        extra_compile_args=["-O2", "-std=c11"], extra_link_args=["-pthread"], optional=True),
])
