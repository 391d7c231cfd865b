"""Environment configuration: ``JITGRAD_LOGS``, ``JITGRAD_CACHE_DIR``, ``JITGRAD_DISABLE_JIT``
(``JITGRAD_NATIVE=0``, read by ``compiler/native.py``, turns native kernel objects off),
``JITGRAD_CHECK_IR``, ``JITGRAD_SPECULATE``, ``JITGRAD_CACHE_SIZE_LIMIT``,
``JITGRAD_EAGER_FUSION``, ``JITGRAD_SHAPE_TIERING``; and the settings a program may change:
:data:`cache_size_limit`, :data:`recompile_limit`, :data:`eager_fusion`,
:data:`shape_tiering`."""

from __future__ import annotations

import os

__all__ = ["log_topics", "cache_dir", "jit_disabled", "check_ir", "speculate",
           "cache_size_limit", "DEFAULT_CACHE_SIZE_LIMIT", "eager_fusion", "recompile_limit",
           "shape_tiering"]

#: the default of :data:`cache_size_limit`
DEFAULT_CACHE_SIZE_LIMIT = 128


def _env_cache_size_limit() -> int:
    raw = os.environ.get("JITGRAD_CACHE_SIZE_LIMIT", "")
    try:
        n = int(raw) if raw.strip() else DEFAULT_CACHE_SIZE_LIMIT
    except ValueError:
        raise ValueError(f"JITGRAD_CACHE_SIZE_LIMIT must be a positive integer, not {raw!r}"
                         ) from None
    if n < 1:
        raise ValueError(f"JITGRAD_CACHE_SIZE_LIMIT must be a positive integer, not {raw!r}")
    return n


cache_size_limit: int = _env_cache_size_limit()
"""How many traced entries (signatures and guard variants) one compiled function keeps; past
it, the least recently used entry is evicted (a later call with its signature traces again;
logged under ``JITGRAD_LOGS=recompiles``). Set ``jitgrad.config.cache_size_limit = n``, or
``JITGRAD_CACHE_SIZE_LIMIT=n`` in the environment before ``import jitgrad``; default 128
(an entry holds its graphs, plans and generated code: ~12 kB for a small function)."""


recompile_limit: int = 8
"""How many times calls with one signature (the same argument kinds, shapes and dtypes) may
trace again because a guard failed (a number the function reads changed, an optimizer's
momentum cycled by ``OneCycleLR``...); past it, calls with that signature run eagerly, with a
warning (``torch._dynamo.config.recompile_limit``'s default, 8). Set
``jitgrad.config.recompile_limit = n``."""


eager_fusion: bool = os.environ.get("JITGRAD_EAGER_FUSION", "1") not in ("", "0")
"""Whether eager ``backward()`` runs regions of element-wise nodes on large tensors as one
compiled function (``autograd/fused_regions.py``; the same bits as node by node). Set
``jitgrad.config.eager_fusion = False``, or ``JITGRAD_EAGER_FUSION=0`` in the environment."""


shape_tiering: bool = os.environ.get("JITGRAD_SHAPE_TIERING", "1") not in ("", "0")
"""Whether a compiled function runs a call with new shapes eagerly until eager calls of those
shapes have cost what a retrace does (``jit/tiering.py``; the first two shapes of a kind of
call trace at once). Off: every new shape traces at its first call. Set
``jitgrad.config.shape_tiering = False``, or ``JITGRAD_SHAPE_TIERING=0`` in the environment;
``compile(dynamic=False)`` turns it off for one function."""


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
