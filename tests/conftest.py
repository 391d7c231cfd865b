"""Shared fixtures; every graph the tests compile is checked after tracing and after each
compiler pass (``Graph.check``)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("JITGRAD_CHECK_IR", "1")
# CUDA tests run in Numba's CUDA simulator unless JITGRAD_TEST_GPU=1 asks for the real GPU
# (tools/gpu_check.sh); the variable must be set before numba.cuda is first imported.
if os.environ.get("JITGRAD_TEST_GPU") != "1":
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
