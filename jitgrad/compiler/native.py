"""Native shared objects of large fused kernels: a warm start without importing Numba.

A new process that runs a cached plan pays for importing Numba (~0.2 s) and for initialising
its compiler on the first cached load (~0.12 s; +0.1 s when SciPy is installed, whose BLAS
Numba imports): a bare cached Numba kernel needs ~0.57 s to its first result. For kernels
large enough that ~30 us of ``ctypes`` argument passing per call is noise (estimated work
>= :data:`NATIVE_MIN_WORK`), the kernel's machine code is also exported, once, when Numba
first compiles it: Numba's optimised LLVM module is reduced to the kernel function (the
Python wrappers and their references to Numba's runtime dropped by global dead-code
elimination), emitted as position-independent code for the same CPU, and linked by the C
compiler into ``jg_<hash>.so`` beside the generated module, with a JSON sidecar (symbol,
argument layout, SHA-256 of the object, the CPU it was built on, the digest of the kernels'
sources it inlined: ``kernels/sources.py``). A process that has not
imported Numba loads that object with ``ctypes`` instead.

Every step is optional: no C compiler, another CPU, a changed or corrupt file, an argument
type without a plain C layout (the sidecar is checked against Numba's calling convention
when exporting) -- the plan simply uses the Numba dispatcher. The sidecar is written last,
so a half-written export is never loaded. Linux only (the CPU check reads /proc/cpuinfo).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

import numpy as np

from .. import config
from ..kernels.sources import kernel_sources_digest

__all__ = ["NATIVE_MIN_WORK", "export", "load", "layout_of", "host_id", "native_enabled",
           "LayoutMismatch"]

#: elements x GroupCode.cost from which a kernel is exported and loaded natively (~1 ms of
#: work: the ctypes call, ~30 us with 8 arrays on the project machine, is then < 3%)
NATIVE_MIN_WORK = 10_000_000
_ARRAY_FIELDS = 7          # meminfo, parent, nitems, itemsize, data, shape[0], strides[0]
_lock = threading.Lock()
_host: list = []


class LayoutMismatch(TypeError):
    """A native kernel was called with arrays of other dtypes than it was compiled for (the
    caller then runs the Numba dispatcher, which specialises; never reinterpreted memory)."""


_rebuild: set = set()      # module paths whose object was found corrupt in this process


def native_enabled() -> bool:
    """Whether native kernel objects may be used (``JITGRAD_NATIVE=0`` turns them off)."""
    return (sys.platform.startswith("linux") and
            os.environ.get("JITGRAD_NATIVE", "1") not in ("0", ""))


def host_id() -> str | None:
    """The CPU model and feature flags (their digest), or None where unknown."""
    if not _host:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                keep = [ln for ln in f.read().splitlines()
                        if ln.split(":")[0].strip() in ("vendor_id", "model name", "flags",
                                                         "Features", "CPU part")]
            _host.append(hashlib.sha256("\n".join(sorted(set(keep))).encode()).hexdigest()
                         if keep else None)
        except OSError:
            _host.append(None)
    return _host[0]


def _paths(module_path: str, layout: list) -> tuple[str, str]:
    """The object and its sidecar for the kernel of ``module_path`` compiled for ``layout``
    (one source can serve several argument types: each gets its own object)."""
    base = module_path[:-3] if module_path.endswith(".py") else module_path
    tag = hashlib.sha256(json.dumps(layout).encode()).hexdigest()[:12]
    return f"{base}.{tag}.so", f"{base}.{tag}.native.json"


def layout_of(kinds: list) -> list | None:
    """The layout for a call with these arguments: ``int`` (a Python int: int64), a NumPy
    float32/float64 scalar type, or a NumPy dtype for a 1-D C-contiguous array. None where
    an argument has no plain C layout here (bool and small-int scalars...)."""
    out = []
    for k in kinds:
        if k is int:
            out.append("i64")
        elif k is np.float32 or k is np.float64:
            out.append("f32" if k is np.float32 else "f64")
        elif isinstance(k, np.dtype) and k.kind in "fiu":
            out.append("A:" + k.str)
        else:
            return None
    return out


def _log(msg: str) -> None:
    if "cache" in config.log_topics():
        print(f"[jitgrad native] {msg}", file=sys.stderr)


# ------------------------------------------------------------------------------- export
def _layout(sig) -> list | None:
    """:func:`layout_of` for a compiled Numba signature."""
    from numba.core import types
    from numba.np.numpy_support import as_dtype

    kinds = []
    for t in sig.args:
        if isinstance(t, types.Integer) and t.bitwidth == 64 and t.signed:
            kinds.append(int)
        elif t in (types.float32, types.float64):
            kinds.append(np.float32 if t == types.float32 else np.float64)
        elif isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C" and \
                isinstance(t.dtype, (types.Float, types.Integer)):
            kinds.append(as_dtype(t.dtype))
        else:
            return None
    return layout_of(kinds)


def _kernel_object(cres, layout: list) -> bytes | None:
    """PIC object code of the compiled kernel function alone."""
    import llvmlite.binding as ll

    lib = cres.library
    symbol = cres.fndesc.mangled_name
    mod = ll.parse_assembly(lib.get_llvm_str())
    fn = mod.get_function(symbol)
    expected = 2 + sum(_ARRAY_FIELDS if k.startswith("A:") else 1 for k in layout)
    if len(list(fn.arguments)) != expected:  # not the calling convention assumed here
        return None
    for f in mod.functions:
        if f.name != symbol and not f.is_declaration:
            f.linkage = "internal"
    codegen = lib.codegen
    tm = ll.Target.from_triple(mod.triple).create_target_machine(
        cpu=codegen._get_host_cpu_name(), features=codegen._tm_features, opt=3,
        reloc="pic", codemodel="default")
    pb = ll.create_pass_builder(tm, ll.create_pipeline_tuning_options(speed_level=0))
    mpm = ll.create_new_module_pass_manager()
    mpm.add_global_dead_code_eliminate_pass()
    mpm.add_strip_dead_prototype_pass()
    mpm.run(mod, pb)
    if any(f.is_declaration and not f.name.startswith("llvm.") for f in mod.functions):
        return None  # it calls into Numba's runtime (an allocation...): not standalone
    return tm.emit_object(mod)


def _fresh_compile(dispatcher, cres):
    from numba import njit

    opts = {k: v for k, v in dispatcher.targetoptions.items() if k != "cache"}
    fresh = njit(**opts)(dispatcher.py_func)
    fresh.compile(cres.signature.args)
    return next(iter(fresh.overloads.values()))


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name:
            path = shutil.which(name)
            if path:
                return path
    return None


def export(dispatcher, module_path: str, layout: list | None) -> bool:
    """Write the native object of ``dispatcher``'s kernel compiled for ``layout`` beside
    ``module_path``; False (and nothing written) when that is not possible."""
    if not native_enabled() or host_id() is None or layout is None:
        return False
    cc = _compiler()
    cres = next((c for c in dispatcher.overloads.values() if _layout(c.signature) == layout),
                None)
    if cc is None or cres is None:
        return False
    so_path, meta_path = _paths(module_path, layout)
    if os.path.exists(meta_path):
        return True
    if getattr(cres.library, "_disable_inspection", False):
        # loaded from Numba's cache: no LLVM module to export from. Only to replace a
        # corrupt object is the kernel compiled again (once); otherwise Numba runs it.
        if module_path not in _rebuild:
            return False
        _rebuild.discard(module_path)
        cres = _fresh_compile(dispatcher, cres)
    try:
        obj = _kernel_object(cres, layout)
        if obj is None:
            return False
        d = os.path.dirname(so_path)
        with tempfile.TemporaryDirectory(dir=d, prefix=".native-") as tmp:
            o_path, tmp_so = os.path.join(tmp, "k.o"), os.path.join(tmp, "k.so")
            with open(o_path, "wb") as f:
                f.write(obj)
            # -z defs: every symbol resolved at link time, so loading can never fail late
            proc = subprocess.run([cc, "-shared", "-Wl,-z,defs", "-o", tmp_so, o_path],
                                  capture_output=True, timeout=120)
            if proc.returncode != 0:
                _log(f"link failed: {proc.stderr.decode(errors='replace')[-300:]}")
                return False
            with open(tmp_so, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            meta = {"symbol": cres.fndesc.mangled_name, "layout": layout, "sha256": digest,
                    "host": host_id(), "kernels": kernel_sources_digest()}
            tmp_meta = os.path.join(tmp, "meta.json")
            with open(tmp_meta, "w", encoding="utf-8") as f:
                json.dump(meta, f)
            with _lock:
                os.replace(tmp_so, so_path)
                os.replace(tmp_meta, meta_path)  # last: its presence means complete
        _log(f"exported {os.path.basename(so_path)}")
        return True
    except Exception as exc:  # noqa: BLE001 - optional: the Numba path remains
        _log(f"export failed: {type(exc).__name__}: {exc}")
        return False


# --------------------------------------------------------------------------------- load
def load(module_path: str, layout: list | None):
    """A callable with the kernel's Python signature running its native object compiled for
    ``layout`` (:func:`layout_of` of the arguments the plan passes), or None."""
    if not native_enabled() or layout is None:
        return None
    so_path, meta_path = _paths(module_path, layout)
    if not os.path.exists(meta_path):
        return None
    try:
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
        if meta.get("host") != host_id() or host_id() is None or meta["layout"] != layout:
            return None
        if meta.get("kernels") != kernel_sources_digest():  # built with other vmath sources
            _discard(module_path, layout)
            return None
        with open(so_path, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != meta["sha256"]:
                _log(f"{os.path.basename(so_path)}: corrupt (digest mismatch): rebuilt")
                _discard(module_path, layout)
                return None
        return _caller(so_path, meta["symbol"], layout)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        _log(f"load failed: {type(exc).__name__}: {exc}")
        if not isinstance(exc, OSError) or os.path.exists(so_path):
            _discard(module_path, layout)  # unreadable sidecar or object: rebuild it
        return None


def _discard(module_path: str, layout: list) -> None:
    """Remove a bad object and its sidecar; the next export compiles the kernel afresh."""
    for p in reversed(_paths(module_path, layout)):  # the sidecar first: never it alone
        try:
            os.remove(p)
        except OSError:
            pass
    _rebuild.add(module_path)


def _caller(so_path: str, symbol: str, layout: list):
    import ctypes

    fn = getattr(ctypes.CDLL(so_path), symbol)
    fn.restype = ctypes.c_int32
    c = {"i64": ctypes.c_int64, "f32": ctypes.c_float, "f64": ctypes.c_double}
    argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    params, pieces, arrays, dtypes = [], [], [], []
    for k, kind in enumerate(layout):
        name = f"x{k}"
        params.append(name)
        if kind.startswith("A:"):
            size = np.dtype(kind[2:]).itemsize
            arrays.append(name)
            dtypes.append(np.dtype(kind[2:]))
            argtypes += [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                         ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
            pieces.append(f"None, None, {name}.size, {size}, {name}.ctypes.data, "
                          f"{name}.size, {size}")
        else:
            argtypes.append(c[kind])
            pieces.append(name)
    fn.argtypes = argtypes
    ns = {"FN": fn, "byref": ctypes.byref, "scratch": ctypes.c_int64 * 2,
          "ptr": ctypes.c_void_p, "DTS": tuple(dtypes), "Mismatch": LayoutMismatch}
    check = f"({', '.join(f'{a}.dtype' for a in arrays)},)" if arrays else "()"
    src = (f"def native_kernel({', '.join(params)}):\n"
           f"    if {check} != DTS:\n"
           f"        raise Mismatch('arrays of other dtypes than the object was built for')\n"
           f"    st = FN(byref(scratch()), byref(ptr()), {', '.join(pieces)})\n"
           f"    if st:\n"
           f"        raise RuntimeError('jitgrad: native kernel {os.path.basename(so_path)} "
           f"failed (status %d)' % st)\n")
    exec(src, ns)  # noqa: S102 - generated here from a checked layout
    return ns["native_kernel"]
