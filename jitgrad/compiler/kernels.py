"""Generated kernels, loaded: the one door from a :class:`KernelDesc` to a callable.

Eager ops and compiled plans both ask :func:`load` for the kernel of a description: it is
rendered (:mod:`jitgrad.compiler.render_cpu`), written once to the content-addressed cache and
imported (:mod:`jitgrad.compiler.cache`), and kept in a table for the rest of the process, so
an eager ``x * y`` and a plan's one-multiplication group share one kernel. Numba compiles it on
its first call (or loads it from its disk cache).

:func:`finish_sum` turns a sum's float64 partials into its value; eager sums and plans call it
alike, so a sum ends with the same operations on both paths.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from . import cache
from .kernel_desc import KernelDesc
from .pysource import log_source
from .render_cpu import module_source

__all__ = ["Kernel", "load", "finish_sum", "STATS"]

STATS = {"kernels_loaded": 0}
_table: dict = {}
_lock = threading.Lock()


@dataclass(frozen=True, eq=False)
class Kernel:
    """A loaded kernel: its description, module source and path, and ``fn`` (the Numba
    dispatcher of ``kernel(lo, hi, ...)``)."""

    desc: KernelDesc
    source: str
    path: str
    fn: object


def load(desc: KernelDesc, cache_dir: str | None = None, log: bool = True,
         target: str = "cpu") -> Kernel:
    """The kernel of ``desc`` for ``target`` ("cpu": a Numba function over parts; "cuda": a
    ``@cuda.jit`` kernel), rendered, cached on disk and imported on first request; its
    source printed then under ``JITGRAD_LOGS=code`` unless ``log`` is false (plans print
    their kernels themselves, each time one is built)."""
    key = (desc, cache_dir, target)
    k = _table.get(key)
    if k is not None:
        return k
    with _lock:
        k = _table.get(key)
        if k is None:
            source = _RENDER[target](desc)
            mod = cache.load_module(source, cache_dir)
            k = _table[key] = Kernel(desc, source, cache.module_path(source, cache_dir),
                                     mod.kernel)
            STATS["kernels_loaded"] += 1
            if log:
                log_source(f"kernel {desc.title} ({k.path})", source)
    return k


def ordered_total(partials: np.ndarray):
    """The float64 partials of an ``all`` sum added one after another, first to last (what
    the CUDA finish does; NumPy's ``add.reduce`` would add them pairwise)."""
    return partials[0] if partials.size == 1 else np.cumsum(partials)[-1]


def finish_sum(partials: np.ndarray, kind: str, scale: float, dtype, shape) -> np.ndarray:
    """A sum's value from its kernel's float64 partials: ``all`` adds the parts' partials
    in order (:func:`ordered_total`), ``rows``/``cols`` are the totals; then ``* scale`` (a
    mean) in float64, rounded once to ``dtype``."""
    val = partials if kind != "all" else ordered_total(partials)
    if scale != 1.0:
        val = val * scale
    return np.asarray(val, dtype).reshape(shape)


def _cuda_source(desc: KernelDesc) -> str:
    from .render_cuda import module_source_cuda

    return module_source_cuda(desc)


_RENDER = {"cpu": module_source, "cuda": _cuda_source}
