"""Which of OpenBLAS's kernel sets NumPy's matrix products run: the fastest for float32 here.

NumPy's OpenBLAS is built for many CPUs at once (``DYNAMIC_ARCH``) and picks one kernel set
("core") when it loads. On AMD Zen 4 it picks SkylakeX's AVX-512 kernels, but Zen 4 runs
512-bit instructions as two 256-bit halves, and OpenBLAS's AVX2 (Haswell) kernels do the
float32 products of training faster there (measured in one process, switching the set between
repeats, 2 threads, EPYC 9004): MLP products 1024x784x256 0.93x the time, 1024x256x256
0.91-0.98x, 1024x256x10 0.82x, 32x1024x1024 0.80x, 1024^3 0.93x, GPT's 2048x384x1536 0.96x;
the compiled MLP training step less (in a plan the operands come from further away): ~0.96x
at batch 1024, 0.95-1.00x at 128 (docs/benchmarks/blas_core_ab.txt). It costs float64 products
of 256^3 and up ~5% (1024x784x256: 0.97x, 2048^3: 1.06x) and products of 64^3 and smaller
~0.2 us (SkylakeX's small-matrix kernels).

:func:`choose_blas_core` switches NumPy's OpenBLAS to the Haswell set on Zen 4 (AMD family
25 with AVX-512), once, at ``import jitgrad`` (before any product of jitgrad's), so every
product of eager and compiled code runs the same kernels and eager == compiled stays
bitwise. The Haswell set's bits depend on how a product is split (thread count, a range of
rows alone): the classifier head then runs as one part (``compiler/classifier_head.py``). It
applies to every caller in the process: NumPy products after that point use the same set
(their last bits may differ from before it, as they do between machines). It re-runs
OpenBLAS's own selection (``gotoblas_dynamic_init``, which initialises the set's block
sizes) with ``OPENBLAS_CORETYPE`` set, holding the GIL; a product already running in another
thread at that moment is the one hazard (a process imports and first uses jitgrad before
such threads, as a rule).

``JITGRAD_OPENBLAS_CORE``: unset or ``auto`` as above; ``keep`` leaves OpenBLAS's choice; a
core name (``Haswell``, ``SkylakeX``, ``SandyBridge``) asks for that set where the CPU has
its instructions and the build has it. A user's ``OPENBLAS_CORETYPE`` is always kept.
"""

from __future__ import annotations

import ctypes
import functools
import os
import warnings

__all__ = ["choose_blas_core", "blas_core", "preferred_core", "cpu_info", "select_core"]

#: the instructions each selectable kernel set needs (from /proc/cpuinfo's flags)
REQUIRED_FLAGS = {
    "Haswell": {"avx2", "fma"},
    "SkylakeX": {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"},
    "SandyBridge": {"avx"},
}

_state: dict = {"done": False, "switched": None, "why": "not chosen yet"}


@functools.lru_cache(maxsize=4)
def cpu_info(path: str = "/proc/cpuinfo") -> dict:
    """``{"vendor", "family", "flags"}`` of the first CPU in ``path`` (empty where unreadable)."""
    info: dict = {}
    try:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block is enough
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "vendor_id":
                    info["vendor"] = value
                elif key == "cpu family":
                    info["family"] = int(value)
                elif key == "flags":
                    info["flags"] = set(value.split())
    except (OSError, ValueError):
        return {}
    return info


def preferred_core(info: dict) -> str | None:
    """The kernel set jitgrad asks for on the CPU ``info`` describes; None: OpenBLAS's own
    choice. Only AMD Zen 4 (family 25 with AVX-512) is measured to gain."""
    flags = info.get("flags", set())
    if (info.get("vendor") == "AuthenticAMD" and info.get("family") == 25
            and "avx512f" in flags and REQUIRED_FLAGS["Haswell"] <= flags):
        return "Haswell"
    return None


def _runnable(name: str, info: dict) -> str | None:
    """The selectable set ``name`` spells (any case) where the CPU ``info`` describes has
    its instructions; None otherwise."""
    known = next((c for c in REQUIRED_FLAGS if c.lower() == name.lower()), None)
    if known is None or not REQUIRED_FLAGS[known] <= info.get("flags", set()):
        return None
    return known


@functools.lru_cache(maxsize=1)
def _numpy_openblas():
    """NumPy's OpenBLAS as a ``ctypes.PyDLL`` (its calls keep the GIL), or None: the wheel's
    copy under ``numpy.libs`` (found by name, fast at import) or the one mapped from NumPy's
    tree (``blas_batch._numpy_blas_library``: conda and other layouts)."""
    import glob

    import numpy as np

    site = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    found = sorted(glob.glob(os.path.join(site, "numpy.libs", "*openblas*.so*")))
    if len(found) == 1:
        path = found[0]
    else:
        from .blas_batch import _numpy_blas_library

        path = _numpy_blas_library()
    if path is None:
        return None
    try:
        return ctypes.PyDLL(path)
    except OSError:
        return None


def _corename(lib) -> str | None:
    from .blas_threads import _text

    return _text(lib, "get_corename")


_tables: dict = {}  # kernel set name (lower case) -> its table's address, once initialised


def _switch(lib, core: str) -> bool:
    """Point OpenBLAS's ``gotoblas`` at the ``core`` set -- initialised by OpenBLAS's own
    ``gotoblas_dynamic_init`` the first time, a pointer write after that; whether it now runs
    that set (else the previous one is kept)."""
    try:
        current = ctypes.c_void_p.in_dll(lib, "gotoblas")
        table = ctypes.addressof(ctypes.c_char.in_dll(lib, "gotoblas_" + core.upper()))
        init = lib.gotoblas_dynamic_init
    except (ValueError, AttributeError):
        return False
    before = current.value
    if before is None:
        return False
    _tables.setdefault((_corename(lib) or "").lower(), before)
    if _tables.get(core.lower()) == table:
        current.value = table
        return True
    init.restype, init.argtypes = None, []
    env = os.environ.get("OPENBLAS_CORETYPE")
    os.environ["OPENBLAS_CORETYPE"] = core
    try:
        current.value = None  # dynamic_init selects only while none is selected
        init()
    finally:
        if env is None:
            del os.environ["OPENBLAS_CORETYPE"]
        else:
            os.environ["OPENBLAS_CORETYPE"] = env
        if current.value != table:  # not that set after all: back to the previous one
            current.value = before
    if current.value == table:
        _tables[core.lower()] = table
    return current.value == table


def select_core(core: str) -> bool:
    """Run NumPy's OpenBLAS on the kernel set ``core`` from now on (for A/B measurements:
    ``asv_benchmarks/blas_core_ab.py``, asv's ``MLPStepOpenBLASCore``); no product may be
    running in another thread meanwhile. Whether it runs that set (the CPU must have its
    instructions, the build the set)."""
    lib, known = _numpy_openblas(), _runnable(core, cpu_info())
    return lib is not None and known is not None and _switch(lib, known)


def choose_blas_core() -> str | None:
    """Once per process: switch NumPy's OpenBLAS to the kernel set :func:`preferred_core`
    (or ``JITGRAD_OPENBLAS_CORE``) names; returns that set's name where it switched, None
    where OpenBLAS keeps its own choice (:func:`blas_core` says which and why). Where there
    is nothing to switch (another CPU, ``keep``) it reads /proc/cpuinfo's first lines only."""
    if _state["done"]:
        return _state["switched"]
    _state["done"] = True
    asked = os.environ.get("JITGRAD_OPENBLAS_CORE", "auto").strip()
    if asked.lower() == "keep":
        _state["why"] = "OpenBLAS's choice (JITGRAD_OPENBLAS_CORE=keep)"
        return None
    if os.environ.get("OPENBLAS_CORETYPE"):
        _state["why"] = "OpenBLAS's choice (OPENBLAS_CORETYPE is set)"
        return None
    info = cpu_info()
    if asked.lower() in ("", "auto"):
        want = preferred_core(info)
        if want is None:
            _state["why"] = "OpenBLAS's choice"
            return None
    else:
        want = _runnable(asked, info)
        if want is None:
            warnings.warn(f"JITGRAD_OPENBLAS_CORE={asked!r} is not a kernel set this CPU "
                          f"runs (one of {', '.join(REQUIRED_FLAGS)} where the CPU has its "
                          "instructions); OpenBLAS keeps its own choice",
                          RuntimeWarning, stacklevel=2)
            _state["why"] = "OpenBLAS's choice (JITGRAD_OPENBLAS_CORE not usable here)"
            return None
    lib = _numpy_openblas()
    if lib is None:
        _state["why"] = "OpenBLAS's choice (NumPy's BLAS is no OpenBLAS jitgrad can see)"
        return None
    now = _corename(lib)
    if now is not None and now.lower() == want.lower():
        _state["why"] = "OpenBLAS's choice (the set jitgrad prefers)"
        return None
    if not _switch(lib, want):
        _state["why"] = f"OpenBLAS's choice (its build has no {want} set jitgrad can select)"
        return None
    _state.update(switched=_corename(lib), why=(
        f"jitgrad's choice for this CPU (OpenBLAS picked {now})" if asked.lower() in
        ("", "auto") else f"JITGRAD_OPENBLAS_CORE (OpenBLAS picked {now})"))
    return _state["switched"]


def blas_core() -> tuple[str | None, str]:
    """(the kernel set NumPy's OpenBLAS runs now, why the import left it that one); None
    where there is no OpenBLAS jitgrad can see."""
    lib = _numpy_openblas()
    return (_corename(lib) if lib is not None else None), _state["why"]
