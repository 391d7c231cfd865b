"""Shared fixtures; every graph the tests compile is checked after tracing and after each
compiler pass (``Graph.check``)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("JITGRAD_CHECK_IR", "1")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
