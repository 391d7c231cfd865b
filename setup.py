"""Build of jitgrad's one C extension, ``jitgrad._fastops`` (the eager arithmetic operators'
common case; see jitgrad/_fastops.c). It is optional: where it cannot be built (no C
compiler), jitgrad runs the same operators in Python (jitgrad/ops/eager_fast.py)."""

import numpy
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "jitgrad._fastops", ["jitgrad/_fastops.c"], include_dirs=[numpy.get_include()],
    # IEEE arithmetic as written: no contraction, no fast-math (the bits of the Numba kernels)
    extra_compile_args=["-O2", "-ffp-contract=off", "-fno-fast-math", "-std=c11"],
    optional=True)])
