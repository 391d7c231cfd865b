"""OpenBLAS's parallel work on jitgrad's thread pool.

A threaded GEMM wakes OpenBLAS's own worker threads, which then spin (``sched_yield``) for
~0.1 s waiting for the next one (``OPENBLAS_THREAD_TIMEOUT``). On a machine with as many
cores as threads, a spinner holds a core: a kernel that follows a GEMM shares its core with
it, and a parallel kernel waits up to a scheduler slice for the core (``kernels/parallel.py``
kept kernels on one thread for 0.1 s after every GEMM because of it). OpenBLAS 0.3.27+ can
hand its parallel work to the caller instead (``openblas_set_threads_callback_function``);
:func:`route_blas_threads` gives it the C pool of ``jitgrad._nativepool``, the one the fused
kernels run on. A GEMM then leaves the pool's workers spinning for the next kernel, and no
other thread competes for the cores. OpenBLAS still splits the work itself, so every
product has the same bits either way.

It applies to the OpenBLAS NumPy is linked against, for every caller in the process (NumPy's
own products too). Applied once, when jitgrad first loads kernels (as the allocator tuning),
where that OpenBLAS has the callback and the native pool runs; ``JITGRAD_BLAS_THREADS=openblas``
leaves OpenBLAS's threads alone.
"""

from __future__ import annotations

import ctypes
import os
import sys

from .parallel import set_blas_on_pool

__all__ = ["route_blas_threads", "blas_routed", "unroute_blas_threads", "blas_counts",
           "set_blas_threads"]

#: path -> (callback setter address, blas_num_threads address, MAX_THREADS, set_num_threads)
_state: dict = {"off": False, "routed": {}, "scanned": None}


def _openblas_libraries() -> list[str]:
    """Paths of the OpenBLAS libraries mapped into this process (NumPy's is loaded with it)."""
    paths: list[str] = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1] if "/" in line else ""
                name = os.path.basename(path).lower()
                if "openblas" in name and ".so" in name and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    return paths


def _function(lib, name: str):
    """OpenBLAS's function ``openblas_<name>`` in ``lib`` as the builds NumPy's wheels ship
    it (scipy-openblas: prefixed, with the 64-bit-integer suffix) or as plain builds do;
    None where it has none."""
    for symbol in (f"scipy_openblas_{name}64_", f"scipy_openblas_{name}",
                   f"openblas_{name}64_", f"openblas_{name}"):
        fn = getattr(lib, symbol, None)
        if fn is not None:
            return fn
    return None


def _text(lib, name: str) -> str | None:
    """What OpenBLAS's string function ``openblas_<name>`` (``get_config``,
    ``get_corename``) returns; None where ``lib`` has none."""
    fn = _function(lib, name)
    if fn is None:
        return None
    fn.restype = ctypes.c_char_p
    return (fn() or b"").decode(errors="replace")


def _max_threads(lib) -> int | None:
    """OpenBLAS's MAX_THREADS (the size of its per-thread tables), from its config string."""
    for word in (_text(lib, "get_config") or "").split():
        if word.startswith("MAX_THREADS="):
            return int(word.split("=", 1)[1])
    return None


def _openblas_entry(path: str) -> tuple | None:
    """(address of the callback setter, address of ``blas_num_threads``, MAX_THREADS, its
    ``set_num_threads``) of the OpenBLAS at ``path``, or None (an OpenBLAS without the
    callback: older than 0.3.27)."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    setter = _function(lib, "set_threads_callback_function")
    set_threads = _function(lib, "set_num_threads")
    max_threads = _max_threads(lib)
    try:
        workers = ctypes.addressof(ctypes.c_int.in_dll(lib, "blas_num_threads"))
    except ValueError:
        return None
    if setter is None or set_threads is None or not max_threads:
        return None
    set_threads.argtypes = [ctypes.c_int]
    return ctypes.cast(setter, ctypes.c_void_p).value, workers, max_threads, set_threads


def route_blas_threads() -> bool:
    """Route the parallel work of every OpenBLAS loaded in the process (NumPy's; SciPy's,
    which Numba loads for its ``np.dot``) to the C pool; called again, it routes the copies
    loaded since. Whether any is routed."""
    if _state["off"]:
        return False
    if os.environ.get("JITGRAD_BLAS_THREADS", "pool").lower() == "openblas":
        _state["off"] = True
        return False
    from .native_launch import _ext, _spin_us, native_pool_enabled
    from .pool import pool_threads

    threads = pool_threads()
    if not native_pool_enabled():
        _state["off"] = True
        return False
    if threads < 2:  # (one thread: nothing to route yet; set_num_threads may add more)
        return False
    import numpy  # noqa: F401  (loads its BLAS)

    # a library is loaded by an import (SciPy's, when Numba first compiles an ``np.dot``):
    # with no module imported since the last scan, /proc/self/maps (2 ms) is not read again
    scan = (len(sys.modules), threads)
    if scan == _state["scanned"]:
        return bool(_state["routed"])
    _state["scanned"] = scan
    for path in _openblas_libraries():
        if path in _state["routed"]:
            continue
        entry = _openblas_entry(path)
        if entry is not None and _ext.route_blas(entry[0], threads, _spin_us, entry[1],
                                                 entry[2]):
            _state["routed"][path] = entry
    set_blas_on_pool(bool(_state["routed"]))
    return bool(_state["routed"])


def unroute_blas_threads(stay_off: bool = False) -> None:
    """Give every routed OpenBLAS its own threads back (tests, benchmarks);
    ``route_blas_threads`` then routes again, unless ``stay_off``."""
    from .native_launch import _ext

    for setter, workers, max_threads, _ in _state["routed"].values():
        _ext.route_blas(setter, 0, 0.0, workers, max_threads)
    _state.update(off=stay_off, routed={}, scanned=None)
    set_blas_on_pool(False)


def set_blas_threads(n: int) -> None:
    """``jitgrad.set_num_threads(n)`` where OpenBLAS runs on the pool: its products are then
    split in ``n`` jobs (one: on the calling thread) on a pool of ``n`` threads, as PyTorch's
    ``set_num_threads`` governs its BLAS. Nothing where OpenBLAS keeps its own threads."""
    if not _state["routed"]:
        return
    from .native_launch import _ext, _spin_us

    for setter, workers, max_threads, set_threads in _state["routed"].values():
        set_threads(int(n))
        if n > 1:  # the C pool made for n threads now (its first products find it)
            _ext.route_blas(setter, int(n), _spin_us, workers, max_threads)


def blas_routed() -> bool:
    """Whether OpenBLAS's parallel work runs on the C pool."""
    return bool(_state["routed"])


def blas_counts() -> tuple[int, int]:
    """(OpenBLAS job sets run on the pool, sets that had to start threads of their own)."""
    from .native_launch import _ext

    return tuple(_ext.blas_counts()) if _ext is not None else (0, 0)
