"""Compile every logged CUDA kernel to PTX with NVVM, on a machine without a GPU.

    JITGRAD_CUDA_LAUNCH_LOG=launches.jsonl pytest tests/cuda     # (the simulator suite)
    python tools/cuda_ptx_check.py launches.jsonl [--cc 9.0,8.0] [--ptxas]

Numba's CUDA simulator never types a kernel nor lowers it, so the simulator suite cannot
tell whether its kernels compile for a GPU. This tool takes the log
``jitgrad/cuda/launch_log.py`` writes (each kernel launched, with the Numba types a GPU
launch gives its arguments) and compiles each kernel with ``numba.cuda.compile_ptx`` for
each compute capability asked for: Numba's typing, lowering and NVVM, as on a GPU, short of
the driver's final assembly (``--ptxas`` runs ``ptxas`` where it is installed and reports
registers, stack and spills). Needs NVVM and NVRTC (the ``nvidia-nvvm`` and
``nvidia-cuda-nvrtc`` wheels of jitgrad's ``dev`` extra on Linux, or a CUDA toolkit);
without them the check is skipped (exit 0) unless ``--require``. Exit status 1 if any
kernel fails to compile (or, with ``--ptxas``, to assemble).

``make test`` runs the suite with the log and then this check.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # the real CUDA target, not the simulator


def _records(paths: list[str]) -> tuple[list, dict]:
    """(unique (module, name, argument types), source of each generated module)."""
    recs, sources = set(), {}
    for p in paths:
        if not os.path.exists(p):
            continue  # (no CUDA kernel launched: nothing written)
        with open(p, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    recs.add((r["module"], r["name"], tuple(r["args"])))
                    if "source" in r:
                        sources[r["module"]] = r["source"]
    return sorted(recs), sources


def _numba_type(name: str):
    from numba.core import types

    m = re.fullmatch(r"(readonly )?array\((\w+), (\d+)d, ([CFA])\)", name)
    if m:
        return types.Array(getattr(types, m.group(2)), int(m.group(3)), m.group(4),
                           readonly=bool(m.group(1)))
    t = getattr(types, name, None)
    if not isinstance(t, types.Type):
        raise ValueError(f"cannot rebuild Numba type {name!r}")
    return t


def _without_a_gpu(cc: tuple) -> None:
    """Let numba-cuda compile for ``cc`` with no driver: a device function called from a
    kernel compiles for "the current device", which numba-cuda asks the driver for."""
    from numba.cuda import dispatcher

    class _Device:
        compute_capability = cc

    dispatcher.get_current_device = lambda: _Device()


def _nvvm_reason() -> str:
    """Why NVVM cannot compile here ("" when it can)."""
    try:
        from numba import cuda
        from numba.core import types

        def probe(a):
            a[0] = 1.0

        cuda.compile_ptx(probe, (types.float32[::1],), cc=(9, 0))
    except Exception as e:  # no libnvvm / libnvrtc (their wheels, a CUDA toolkit)
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return ""


def _module(name: str, sources: dict, tmp: str):
    """The kernel module ``name``: jitgrad's own by import, a generated one from its logged
    source (written to ``tmp``: ``cache=True`` kernels need a real file)."""
    if name in sys.modules:
        return sys.modules[name]
    if name not in sources:
        return importlib.import_module(name)
    path = os.path.join(tmp, name + ".py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(sources[name])
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class ToolchainMismatch(Exception):
    """ptxas is older than the PTX NVVM writes (not a kernel's fault)."""


def _ptxas(ptx: str, cc: tuple, tmp: str) -> tuple[bool, str]:
    path = os.path.join(tmp, "k.ptx")
    with open(path, "w", encoding="utf-8") as f:
        f.write(ptx)
    r = subprocess.run(["ptxas", f"-arch=sm_{cc[0]}{cc[1]}", "-v", path, "-o", os.devnull],
                       capture_output=True, text=True)
    if r.returncode != 0 and "Unsupported .version" in r.stderr:
        raise ToolchainMismatch(r.stderr.strip().splitlines()[0])
    info = " ".join(ln.split(":", 1)[-1].strip() for ln in r.stderr.splitlines()
                    if "Used" in ln or "spill" in ln)
    return r.returncode == 0, info if r.returncode == 0 else r.stderr.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", help="launch logs (JITGRAD_CUDA_LAUNCH_LOG files)")
    ap.add_argument("--cc", default="9.0", help="compute capabilities, e.g. 9.0,8.0")
    ap.add_argument("--ptxas", action="store_true", help="assemble with ptxas, report usage")
    ap.add_argument("--require", action="store_true", help="fail (exit 2) without NVVM")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per kernel")
    ap.add_argument("-j", "--jobs", type=int, default=min(len(os.sched_getaffinity(0)), 4),
                    help="processes compiling in parallel (default: usable CPUs, at most 4)")
    a = ap.parse_args(argv)
    ccs = [tuple(int(x) for x in c.split(".")) for c in a.cc.split(",")]
    recs, sources = _records(a.logs)
    if not recs:
        print("cuda_ptx_check: the logs name no kernel (was JITGRAD_CUDA_LAUNCH_LOG set?)")
        return 1
    from jitgrad.cuda import runtime

    runtime._numba_cuda_compat()  # (settings numba-cuda needs before it compiles)
    _without_a_gpu(ccs[0])
    why = _nvvm_reason()
    if why:
        print(f"cuda_ptx_check: skipped, NVVM cannot compile here ({why})")
        return 2 if a.require else 0
    if a.ptxas and shutil.which("ptxas") is None:
        print("cuda_ptx_check: --ptxas given but no ptxas on PATH")
        return 2
    t0 = time.perf_counter()
    jobs = max(1, min(a.jobs, len(recs)))
    chunks = [recs[i::jobs] for i in range(jobs)]
    args = [(chunk, sources, ccs, a.ptxas, a.verbose) for chunk in chunks]
    if jobs == 1:
        results = [_check(*args[0])]
    else:  # (spawned, not forked: each process starts its own Numba and NVVM)
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(jobs) as pool:
            results = pool.starmap(_check, args)
    n = failed = 0
    for count, bad, lines, mismatch in results:
        if mismatch:
            print(f"cuda_ptx_check: ptxas cannot read NVVM's PTX ({mismatch}): use a ptxas "
                  "of NVVM's CUDA version (nvidia-cuda-nvcc), or no --ptxas")
            return 2
        n, failed = n + count, failed + bad
        for line in lines:
            print(line)
    print(f"cuda_ptx_check: {n - failed} of {n} kernel compilations passed "
          f"({len(recs)} kernels x {len(ccs)} architectures, {jobs} processes, "
          f"{time.perf_counter() - t0:.0f} s)")
    return 1 if failed else 0


def _check(recs: list, sources: dict, ccs: list, ptxas: bool, verbose: bool) -> tuple:
    """Compile ``recs`` for each of ``ccs``: ``(compilations, failures, lines to print,
    a ptxas/NVVM version mismatch or "")``. Runs in a worker process (or the main one)."""
    from jitgrad.cuda import runtime

    runtime._numba_cuda_compat()
    from numba import cuda

    failed, n, lines = 0, 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for mod, name, args in recs:
            for cc in ccs:
                n += 1
                what = f"{mod}.{name}({', '.join(args)}) sm_{cc[0]}{cc[1]}"
                try:
                    _without_a_gpu(cc)
                    fn = getattr(_module(mod, sources, tmp), name)
                    sig = tuple(_numba_type(t) for t in args)
                    ptx, _ = cuda.compile_ptx(getattr(fn, "py_func", fn), sig, cc=cc)
                    ok, info = _ptxas(ptx, cc, tmp) if ptxas else (True, "")
                except ToolchainMismatch as e:
                    return n, failed, lines, str(e)
                except Exception as e:
                    ok, info = False, f"{type(e).__name__}: {e}"
                if not ok:
                    failed += 1
                    lines.append(f"FAILED {what}\n    " + info.replace("\n", "\n    "))
                elif verbose:
                    lines.append(f"ok {what} {info}")
    return n, failed, lines, ""


if __name__ == "__main__":
    sys.exit(main())
