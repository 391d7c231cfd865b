"""``jitgrad.backends.cudnn``: jitgrad has no cuDNN (its convolutions and pooling are its
own kernels), so :func:`is_available` is False and :func:`version` None, as PyTorch
reports them without cuDNN.

``enabled`` (default True), ``benchmark`` (False), ``deterministic`` (False) and
``allow_tf32`` (True) are module attributes scripts set and read; they change nothing:
jitgrad's kernels are deterministic whatever ``deterministic`` says, there is no algorithm
choice for ``benchmark`` to tune, and float32 never runs as TF32.

>>> import jitgrad.backends.cudnn as cudnn
>>> with cudnn.flags(enabled=False, benchmark=True):
...     cudnn.enabled, cudnn.benchmark
(False, True)
>>> cudnn.enabled, cudnn.benchmark
(True, False)
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

__all__ = ["is_available", "version", "flags", "enabled", "benchmark", "deterministic",
           "allow_tf32", "benchmark_limit"]

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available() -> bool:
    """Whether cuDNN can be used: never (jitgrad does not use cuDNN)."""
    return False


def version() -> int | None:
    """cuDNN's version: None, as PyTorch answers without cuDNN."""
    return None


def is_acceptable(tensor) -> bool:
    """Whether cuDNN would take ``tensor``: never without cuDNN."""
    return False


@contextmanager
def flags(enabled: bool = False, benchmark: bool = False, benchmark_limit: int = 10,
          deterministic: bool = False, allow_tf32: bool = True):
    """Set the flags inside the block (PyTorch's defaults for those not given) and restore
    them after it."""
    module = sys.modules[__name__]
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    saved = {n: getattr(module, n) for n in names}
    new = dict(zip(names, (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)))
    for name, value in new.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
