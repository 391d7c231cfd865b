"""Environment configuration: ``JITGRAD_LOGS``, ``JITGRAD_CACHE_DIR``, ``JITGRAD_DISABLE_JIT``
(``JITGRAD_NATIVE=0``, read by ``compiler/native.py``, turns native kernel objects off),
``JITGRAD_CHECK_IR``, ``JITGRAD_SPECULATE``."""

from __future__ import annotations

import os

__all__ = ["log_topics", "cache_dir", "jit_disabled", "check_ir", "speculate"]


def log_topics() -> frozenset[str]:
    """Topics named in ``JITGRAD_LOGS`` (comma separated: graph, fusion, code, cache...)."""
    raw = os.environ.get("JITGRAD_LOGS", "")
    return frozenset(t.strip() for t in raw.split(",") if t.strip())


def cache_dir() -> str:
    """Where generated kernels are cached (``JITGRAD_CACHE_DIR`` or the user cache dir)."""
    env = os.environ.get("JITGRAD_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jitgrad")


def jit_disabled() -> bool:
    """``JITGRAD_DISABLE_JIT=1`` runs plans in plain Python for debugging."""
    return os.environ.get("JITGRAD_DISABLE_JIT", "") not in ("", "0")


def check_ir() -> bool:
    """``JITGRAD_CHECK_IR=1`` checks every graph after tracing and after each compiler pass
    (``Graph.check``); the test suite sets it."""
    return os.environ.get("JITGRAD_CHECK_IR", "") not in ("", "0")


def speculate() -> bool:
    """Whether compiled losses compute their gradients in the forward call
    (``jit/speculation.py``); ``JITGRAD_SPECULATE=0`` turns it off."""
    return os.environ.get("JITGRAD_SPECULATE", "1") not in ("", "0")
