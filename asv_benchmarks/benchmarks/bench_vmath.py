"""The vectorised math of ``jitgrad.kernels.vmath``, one function per benchmark.

* :class:`VMath`       a Numba loop ``out[i] = f(x[i])`` (``KERNEL_FASTMATH``, as generated
  kernels call it), and on the same input the multiply-add loop ``out[i] = x[i]*a + b``: the
  memory-bound yardstick a vectorised transcendental should stay within ~2x of.
* :class:`VMathNumPy`  the NumPy ufunc (or composition) computing the same thing.
* :class:`VMathLibm`   the same loop with NumPy/math calls, which Numba lowers to scalar libm.

Side-by-side ratios in one run: ``python asv_benchmarks/vmath_report.py``.
``quick_params`` (not an asv attribute) is what ``tests/test_benchmarks_quick.py`` runs.
"""

import numpy as np
from jitgrad.kernels.vmath import FUNCTIONS
from jitgrad.kernels.vmath.testing import (
    array_kernel,
    bench_inputs,
    libm_kernel,
    madd_kernel,
    numpy_equivalent,
)


class VMath:
    """vmath ``function`` over n elements of ``dtype``, and the multiply-add yardstick."""

    params = [list(FUNCTIONS), ["float32", "float64"], [1_000_000]]
    param_names = ["function", "dtype", "n"]
    quick_params = [["exp", "tanh", "pow"], ["float32"], [1_000]]

    def setup(self, function, dtype, n):
        self.args = bench_inputs(function, np.dtype(dtype), n)
        self.out = np.empty_like(self.args[0])
        self.kernel = array_kernel(function)
        self.madd = madd_kernel(np.dtype(dtype))
        self.kernel(*self.args, self.out)  # compile outside the timing
        self.madd(self.args[0], self.out)

    def time_vmath(self, function, dtype, n):
        self.kernel(*self.args, self.out)

    def time_madd_yardstick(self, function, dtype, n):
        self.madd(self.args[0], self.out)


class VMathNumPy:
    """NumPy's way of computing ``function`` (skipped where NumPy/SciPy has none)."""

    params = VMath.params
    param_names = VMath.param_names
    quick_params = VMath.quick_params

    def setup(self, function, dtype, n):
        self.fn = numpy_equivalent(function)
        if self.fn is None:
            raise NotImplementedError(f"no NumPy equivalent of {function}")
        self.args = bench_inputs(function, np.dtype(dtype), n)
        self.out = np.empty_like(self.args[0])

    def time_numpy(self, function, dtype, n):
        with np.errstate(all="ignore"):
            self.fn(*self.args, out=self.out)


class VMathLibm:
    """The loop written with NumPy/math calls: one scalar libm call per element."""

    params = VMath.params
    param_names = VMath.param_names
    quick_params = VMath.quick_params

    def setup(self, function, dtype, n):
        self.args = bench_inputs(function, np.dtype(dtype), n)
        self.out = np.empty_like(self.args[0])
        self.kernel = libm_kernel(function)
        self.kernel(*self.args, self.out)

    def time_libm_loop(self, function, dtype, n):
        self.kernel(*self.args, self.out)
