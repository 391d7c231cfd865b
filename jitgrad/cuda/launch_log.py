"""A log of the CUDA kernels a process launches, for compiling them without a GPU.

Numba's CUDA simulator runs a kernel's Python code as Python: it never types it nor lowers it
through NVVM, so a kernel that passes the simulator suite can still fail to compile on a GPU
(a variable typed two ways, a NumPy function CUDA does not support, an integer/float mix).
With ``JITGRAD_CUDA_LAUNCH_LOG=path`` set, every launch through :func:`fast_launch.call`
appends one JSON line per distinct (kernel, argument types) to ``path``: the kernel's module
(its source too, for a generated module, whose file may live in a temporary cache), its name
and the Numba types a GPU launch gives its arguments. ``tools/cuda_ptx_check.py`` then
compiles each logged kernel to PTX for a GPU architecture with NVVM -- no GPU needed --
and ``make test`` does it for every kernel the CUDA suite launches.

Lines are appended with one ``write`` each (``O_APPEND``), so parallel test processes can
share one log.
"""

from __future__ import annotations

import json
import os
import sys

__all__ = ["ENV", "logged", "arg_type"]

#: the environment variable naming the log file
ENV = "JITGRAD_CUDA_LAUNCH_LOG"


def arg_type(v) -> str:
    """The Numba type name a GPU launch gives argument ``v``: a device array as a mutable
    array (CuPy memory is never read-only; the simulator's ``cuda.In`` wrappers unwrapped),
    Python numbers as int64 / float64 / boolean, NumPy scalars as their dtype."""
    import numba
    import numpy as np
    from numba.core import types

    if type(v).__name__ in ("In", "Out", "InOut") and hasattr(v, "value"):
        v = v.value
    if isinstance(v, np.ndarray):
        v = v.view(np.ndarray)
    if isinstance(v, (bool, np.bool_)):
        return "boolean"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    t = numba.typeof(v)  # arrays, NumPy scalars; CuPy arrays by __cuda_array_interface__
    return str(t.copy(readonly=False) if isinstance(t, types.Array) and not t.mutable else t)


def logged(call, path: str):
    """``call`` (``fast_launch.call``'s signature) that first logs each new kernel and
    argument types to ``path``."""
    seen: set = set()
    sources: set = set()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def call_logged(kernel, blocks: int, threads: int, args: tuple) -> None:
        fn = kernel.py_func
        key = (id(kernel), tuple(arg_type(a) for a in args))
        if key not in seen:
            seen.add(key)
            mod = fn.__module__
            rec = {"module": mod, "name": fn.__name__, "args": list(key[1])}
            if mod not in sources and mod.startswith("jg_"):  # a generated module
                sources.add(mod)
                with open(sys.modules[mod].__file__, encoding="utf-8") as f:
                    rec["source"] = f.read()
            os.write(fd, (json.dumps(rec) + "\n").encode())
        call(kernel, blocks, threads, args)

    return call_logged
