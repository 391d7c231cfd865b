"""Device memory statistics (PyTorch's ``torch.cuda.memory_allocated`` and friends).

On a GPU jitgrad's device memory comes from CuPy's default memory pool: *allocated* is the
pool's bytes in use (blocks rounded up to 512 bytes, as PyTorch's allocator rounds),
*reserved* what the pool holds from the driver. The peaks are kept by a thin wrapper around
the pool's ``malloc`` (installed when jitgrad first uses the GPU, if CuPy's allocator is
still the default pool's), so they count from then on. The pool is CuPy's: a program's own
CuPy arrays are counted too.

Under Numba's CUDA simulator device memory is host memory: *allocated* is the bytes of the
buffers device arrays live in (each counted once, however many views there are, until it is
freed), *reserved* the same (no pool).

Without CUDA the statistics are 0, as PyTorch's are before CUDA is initialised.
"""

from __future__ import annotations

import threading
import weakref

__all__ = ["memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "reset_max_memory_allocated",
           "memory_stats", "mem_get_info"]

_lock = threading.Lock()  # never taken by a weakref callback (see track_sim_buffer)


class _Stats:
    """Current and peak bytes: the simulator's live buffers, or the GPU pool's peaks."""

    def __init__(self) -> None:
        self.allocated = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.buffers: dict[int, tuple] = {}   # id(buffer) -> (weakref, nbytes), simulator


_STATS = _Stats()


# -- the simulator: buffers of device arrays ----------------------------------------------

def track_sim_buffer(a) -> None:
    """Count the buffer device array ``a`` lives in (once; uncounted when it is freed).
    Called by :class:`runtime.SimArray` for every new device array whose memory may be
    new; a buffer that is not an ndarray (``frombuffer`` over bytes) is not counted."""
    root = a
    base = root.base
    while base is not None:
        if not hasattr(base, "base"):  # bytes, mmap...: not an ndarray
            return
        root, base = base, base.base
    key = id(root)
    st = _STATS
    with _lock:
        _drain(st)
        if key in st.buffers:
            return
        n = root.nbytes
        # the callback runs inside garbage collection, which may happen anywhere -- in this
        # function too, with the lock held: it only queues the free (no lock, no counters)
        st.buffers[key] = (weakref.ref(root, lambda r, k=key, n=n: _FREED.append((k, r, n))),
                           n)
        st.allocated += n
        if st.allocated > st.peak_allocated:
            st.peak_allocated = st.allocated
        if st.allocated > st.peak_reserved:
            st.peak_reserved = st.allocated


_FREED: list = []   # (id, weakref, nbytes) of freed buffers, queued by weakref callbacks


def _drain(st: _Stats) -> None:
    """Uncount the buffers freed since the last call (the lock held). An entry is removed
    only if it is still the dead buffer's (its id may since belong to a new one)."""
    while _FREED:
        key, ref, n = _FREED.pop()
        entry = st.buffers.get(key)
        if entry is not None and entry[0] is ref:
            del st.buffers[key]
            st.allocated -= n


# -- a GPU: CuPy's pool ---------------------------------------------------------------------

def install_gpu_peak_tracking() -> None:
    """Wrap CuPy's allocator so the peaks are known (called once when the GPU is chosen);
    an allocator the program set itself is left alone (the peaks are then the current
    values at each query)."""
    import cupy

    pool = cupy.get_default_memory_pool()
    if cupy.cuda.get_allocator() != pool.malloc:
        return
    malloc, used, total, st = pool.malloc, pool.used_bytes, pool.total_bytes, _STATS

    def tracked_malloc(size: int):
        try:
            mem = malloc(size)
        except cupy.cuda.memory.OutOfMemoryError as exc:  # PyTorch's exception, and message
            raise _out_of_memory(size, used(), total()) from exc
        u, t = used(), total()
        if u > st.peak_allocated:
            st.peak_allocated = u
        if t > st.peak_reserved:
            st.peak_reserved = t
        return mem

    cupy.cuda.set_allocator(tracked_malloc)


def _fmt_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} bytes"


def _out_of_memory(size: int, allocated: int, reserved: int) -> Exception:
    """``jitgrad.OutOfMemoryError`` for a failed allocation of ``size`` bytes, worded as
    PyTorch's."""
    from . import OutOfMemoryError

    try:
        import cupy

        free, capacity = cupy.cuda.runtime.memGetInfo()
        where = (f" GPU 0 has a total capacity of {_fmt_bytes(capacity)} of which "
                 f"{_fmt_bytes(free)} is free.")
    except Exception:  # (the device may be unusable)
        where = ""
    return OutOfMemoryError(
        f"CUDA out of memory. Tried to allocate {_fmt_bytes(size)}.{where} Of the allocated "
        f"memory {_fmt_bytes(allocated)} is allocated by jitgrad, and "
        f"{_fmt_bytes(max(reserved - allocated, 0))} is reserved by jitgrad but unallocated.")


def _gpu_current() -> tuple[int, int]:
    import cupy

    pool = cupy.get_default_memory_pool()
    return pool.used_bytes(), pool.total_bytes()


def _runtime():
    from . import runtime  # not at import: runtime imports this module

    return runtime


def _current() -> tuple[int, int]:
    """(allocated, reserved) bytes now; (0, 0) without CUDA."""
    b = _runtime().backend()
    if b == "gpu":
        return _gpu_current()
    if b == "sim":
        with _lock:
            _drain(_STATS)
            a = _STATS.allocated
        return a, a
    return 0, 0


def _peaks() -> tuple[int, int, int, int]:
    """(allocated, reserved, peak allocated, peak reserved) bytes; a query is a point the
    peaks cover too."""
    a, r = _current()
    st = _STATS
    with _lock:
        st.peak_allocated = max(st.peak_allocated, a)
        st.peak_reserved = max(st.peak_reserved, r)
        return a, r, st.peak_allocated, st.peak_reserved


# -- PyTorch's functions ---------------------------------------------------------------------

def memory_allocated(device=None) -> int:
    """Bytes of device memory occupied by arrays now."""
    return _current()[0]


def max_memory_allocated(device=None) -> int:
    """The most bytes occupied by arrays at once since the start (or the last
    :func:`reset_peak_memory_stats`)."""
    return _peaks()[2]


def memory_reserved(device=None) -> int:
    """Bytes of device memory held for arrays (CuPy's pool; in the simulator, allocated)."""
    return _current()[1]


def max_memory_reserved(device=None) -> int:
    """The most bytes held at once since the start (or the last reset)."""
    return _peaks()[3]


def reset_peak_memory_stats(device=None) -> None:
    """Start the peaks again from the current values."""
    _runtime().require()
    a, r = _current()
    st = _STATS
    with _lock:
        st.peak_allocated, st.peak_reserved = a, r


def reset_max_memory_allocated(device=None) -> None:
    """Start the peak of allocated bytes again from the current value."""
    _runtime().require()
    a = _current()[0]
    with _lock:
        _STATS.peak_allocated = a


def memory_stats(device=None) -> dict[str, int]:
    """PyTorch's ``allocated_bytes`` / ``reserved_bytes`` statistics (``.all.current``,
    ``.all.peak``); empty without CUDA, as PyTorch's before CUDA is initialised."""
    if _runtime().backend() is None:
        return {}
    a, r, pa, pr = _peaks()
    return {"allocated_bytes.all.current": a, "allocated_bytes.all.peak": pa,
            "reserved_bytes.all.current": r, "reserved_bytes.all.peak": pr}


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of device memory (the simulator's device memory is the host's)."""
    if _runtime().require() == "gpu":
        import cupy

        free, total = cupy.cuda.runtime.memGetInfo()
        return int(free), int(total)
    import os

    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
