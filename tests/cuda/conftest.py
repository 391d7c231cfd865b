"""CUDA tests: in Numba's CUDA simulator (tests/conftest.py sets NUMBA_ENABLE_CUDASIM=1), or
on a real GPU with ``JITGRAD_TEST_GPU=1`` (tools/gpu_check.sh). Tests marked ``gpu`` need a
real GPU (speed, libdevice accuracy, the kernel cache's compiled code, CuPy and DLPack
interop) and are skipped in the simulator. Sizes stay tiny: the simulator runs one Python
thread per CUDA thread."""

from __future__ import annotations

import pytest

import jitgrad


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0]
    if not jitgrad.cuda.is_available():
        skip = pytest.mark.skip(reason=f"no CUDA: {_reason()}")
        for item in items:
            if str(item.fspath).startswith(here):
                item.add_marker(skip)
        return
    if jitgrad.cuda.is_simulated():
        skip = pytest.mark.skip(reason="needs a real GPU (the simulator runs this)")
        for item in items:
            if str(item.fspath).startswith(here) and "gpu" in item.keywords:
                item.add_marker(skip)


def _reason() -> str:
    from jitgrad.cuda import runtime

    return runtime.unavailable_reason()
