"""Launching a parallel kernel's machine code on C threads (``jitgrad._nativepool``).

The pool of :mod:`.pool` runs ``kernel(lo, hi, *args)`` over parts. Its Python workers wake
on a lock and take the GIL to call the Numba dispatcher, ~60 us per launch on the 2-core
project machine. Where the C extension is built (Linux x86-64), the same kernel runs instead
on C worker threads that call the native function Numba compiled for the arguments' types:
no GIL, no dispatcher, and workers that spin briefly between launches, as OpenMP's do.

:func:`run_native` finds that function once per kernel and argument types
(:func:`native_spec`: the dispatcher's compiled overload for exactly the types it would
resolve, its address, and how each argument is flattened -- checked against Numba's data
model), then hands it to the C pool. The parts and their bounds are the Python pool's, so
the bits are the same whichever path runs. Anything it cannot pass (an argument type other
than arrays, ints, bools, floats; a kernel not compiled yet for these types; another
platform) makes it answer False and the Python pool runs the kernel. A kernel whose share
returns an error status is run again through Numba on the calling thread, which raises its
exception.

``JITGRAD_POOL_SPIN_US`` (default :data:`SPIN_US`) sets how long a worker spins for the next
launch before sleeping; ``JITGRAD_NATIVE_POOL=0`` turns the native path off.
"""

from __future__ import annotations

import os

__all__ = ["run_native", "native_spec", "native_pool_enabled", "SPIN_US"]

#: microseconds a worker spins for the next launch (and the caller for the workers' shares)
#: before sleeping on a futex: eager ops follow each other within a few microseconds, the
#: backward of a step within tens
SPIN_US = 100.0

try:
    from jitgrad import _nativepool as _ext
except ImportError:  # not built (no C compiler): the Python pool runs every kernel
    _ext = None

_spin_us = float(os.environ.get("JITGRAD_POOL_SPIN_US", SPIN_US))
_enabled = _ext is not None and _ext.supported() and \
    os.environ.get("JITGRAD_NATIVE_POOL", "1") not in ("0", "")
_specs: dict = {}            # dispatcher -> {key bytes: (address, kinds bytes) | None}
_misses: dict = {}           # (dispatcher, key) -> launches that found no compiled overload
_MAX_MISSES = 3


def native_pool_enabled() -> bool:
    """Whether parallel kernels may run on the C pool."""
    return _enabled


def run_native(fn, parts: int, args: tuple, threads: int, hot_only: bool = False) -> bool:
    """Run ``fn(lo, hi, *args)`` over ``[0, parts)`` on ``threads`` C threads (the caller's
    included); False when the native path cannot run it (the caller uses the Python pool).
    ``hot_only``: only if the workers are spinning (else on the calling thread, the sleeping
    workers woken for the next launch)."""
    specs = _specs.get(fn)
    if specs is None:
        if not _enabled or not hasattr(fn, "overloads"):
            return False
        specs = _specs.setdefault(fn, {})
    key = _ext.key(args)
    if key is None:
        return False
    spec = specs.get(key, False)
    if spec is False:
        spec = native_spec(fn, (0, parts, *args))
        if spec is False:  # not compiled for these types yet: the dispatcher compiles it
            n = _misses[fn, key] = _misses.get((fn, key), 0) + 1
            if n < _MAX_MISSES:
                return False
            spec = None
        specs[key] = spec
    if spec is None:
        return False
    status = _ext.run(spec[0], spec[1], parts, args, threads, _spin_us, hot_only)
    if status == 0:
        return True
    if status == _ext.BUSY or status == _ext.COLD:  # run on this thread
        fn(0, parts, *args)
        return True
    if status == _ext.UNSUPPORTED:
        return False
    fn(0, parts, *args)  # a share failed: Numba raises the kernel's exception
    raise RuntimeError(f"jitgrad: kernel {getattr(fn, '__name__', fn)} failed with status "
                       f"{status} on the native pool but not when run again")


def native_spec(fn, args: tuple):
    """``(address, kinds)`` of the native function ``fn`` (a Numba CPU dispatcher) compiled
    for exactly the types of ``args`` (``lo, hi`` first), ``kinds`` one byte per argument
    after them ('a' array, 'i' int64, 'b' bool, 'd' float64, 'f' float32); False when no such
    overload is compiled yet; None when its arguments are not all passable."""
    from numba.core import types
    from numba.core.typing.typeof import Purpose, typeof

    if not getattr(fn, "targetoptions", {}).get("nogil"):
        return None
    try:
        sig = tuple(typeof(a, Purpose.argument) for a in args)
    except (TypeError, ValueError):
        return None
    cres = fn.overloads.get(sig)
    if cres is None:
        return False
    if sig[0] != types.int64 or sig[1] != types.int64:
        return None
    kinds, expect = [], ["i64", "i64"]
    for t in sig[2:]:
        if isinstance(t, types.Array):
            kinds.append("a")
            expect += ["ptr", "ptr", "i64", "i64", "ptr"] + ["i64"] * (2 * t.ndim)
        elif isinstance(t, types.Boolean):
            kinds.append("b")
            expect.append("bool")
        elif t == types.int64:
            kinds.append("i")
            expect.append("i64")
        elif t in (types.float64, types.float32):
            kinds.append("d" if t == types.float64 else "f")
            expect.append("double" if t == types.float64 else "float")
        else:
            return None
    if not _flattened_as(cres, sig, expect):
        return None
    address = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    if not address:
        return None
    return address, "".join(kinds).encode()


def _flattened_as(cres, sig: tuple, expect: list) -> bool:
    """Whether Numba's data model flattens ``sig`` to exactly the LLVM argument types
    ``expect`` names (the words and numbers the C pool passes)."""
    try:
        tys = cres.target_context.get_arg_packer(sig).argument_types
    except Exception:  # noqa: BLE001 - another Numba: no native path
        return False
    if len(tys) != len(expect):
        return False
    for ty, want in zip(tys, expect):
        s = str(ty)
        ok = {"i64": s == "i64", "ptr": s.endswith("*") or s == "ptr",
              "bool": s in ("i1", "i8"), "double": s == "double", "float": s == "float"}[want]
        if not ok:
            return False
    return True
