"""Shared fixtures; every graph the tests compile is checked after tracing and after each
compiler pass (``Graph.check``)."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

os.environ.setdefault("JITGRAD_CHECK_IR", "1")
# CUDA tests run in Numba's CUDA simulator unless JITGRAD_TEST_GPU=1 asks for the real GPU
# (tools/gpu_check.sh); the variable must be set before numba.cuda is first imported.
if os.environ.get("JITGRAD_TEST_GPU") != "1":
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    # the simulator runs each CUDA thread as a Python thread and its launching thread polls
    # them in a loop that holds the GIL for a whole switch interval (5 ms by default) at a
    # time: a 50 us interval lets the CUDA threads run between polls (the CUDA tests take a
    # third of the time). Threads then interleave finely, which exposed a race in the
    # simulator itself (below) -- and would expose one in jitgrad's kernels.
    sys.setswitchinterval(5e-5)


def _simulator_shared_arrays_made_once_per_block() -> None:
    """Numba's simulator gives the threads of a block one ``cuda.shared.array`` per source
    line by looking the line up and creating the array when it is missing -- without a lock,
    so two threads switched between the lookup and the store get different arrays and the
    block's reduction reads memory its other threads never wrote (wrong sums, seen once CUDA
    threads interleave finely). The same lookup, keyed by the caller's file and line as
    Numba's, made atomic; dynamic shared memory (``shape == 0``) stays Numba's."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        return
    try:
        from numba.cuda import types
        from numba.cuda.np.numpy_support import as_dtype
        from numba.cuda.simulator.kernelapi import FakeCUDAShared
    except ImportError:  # no numba-cuda: the CUDA tests skip
        return
    numbas_array = FakeCUDAShared.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or shape == 0:
            return numbas_array(self, shape, dtype, alignment)
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        with lock:
            found = self._allocations.get(key)
            if found is None:
                dtype = as_dtype(dtype) if isinstance(dtype, types.Type) else dtype
                found = self._allocations[key] = np.empty(shape, dtype)
        return found

    FakeCUDAShared.array = array


_simulator_shared_arrays_made_once_per_block()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
