"""Speed of ``jitgrad.kernels.vmath`` next to NumPy, libm and a multiply-add loop, one run.

    python asv_benchmarks/vmath_report.py [--n 1000000] [--repeat 15] [--only exp tanh ...]
                                          [--json PATH]

Per function and dtype, on n elements (inputs: ``testing.bench_inputs``):

* ``vmath``   a Numba loop ``out[i] = f(x[i])`` compiled with ``KERNEL_FASTMATH``;
* ``numpy``   the NumPy ufunc or composition (scipy.special.erf for erf, when installed);
* ``libm``    the same Numba loop written with np./math. calls (scalar libm per element);
* ``madd``    ``out[i] = x[i]*1.5 + 0.25``: memory-bound, the vectorisation yardstick.

The four are timed interleaved round-robin (one repeat of each per round, so background load
hits all alike); a repeat averages enough calls to last ~20 ms; the table shows medians.
``x numpy`` = numpy / vmath (above 1: vmath is faster), ``x madd`` = vmath / madd (the
target is <= 2), ``Gelem/s`` = n / vmath time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from compare import interleaved_samples
from jitgrad.kernels.vmath import FUNCTIONS
from jitgrad.kernels.vmath.testing import (
    array_kernel,
    bench_inputs,
    libm_kernel,
    loop_asm,
    madd_kernel,
    numpy_equivalent,
)


def _calls_per_repeat(fn, target_s=0.02):
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, int(target_s / once))


def _interleaved_medians(fns: dict, repeat: int) -> dict:
    numbers = {name: _calls_per_repeat(fn) for name, fn in fns.items()}
    samples = interleaved_samples(fns, numbers, repeat)  # compare.py's round-robin timing
    return {name: statistics.median(s) for name, s in samples.items()}


def measure(name: str, dtype, n: int, repeat: int) -> dict:
    """Median seconds per call of the four variants (None where there is no NumPy one)."""
    args = bench_inputs(name, dtype, n)
    outs = {key: np.empty_like(args[0]) for key in ("vmath", "numpy", "libm", "madd")}
    kernel, libm, madd = array_kernel(name), libm_kernel(name), madd_kernel(np.dtype(dtype))
    fns = {
        "vmath": lambda: kernel(*args, outs["vmath"]),
        "libm": lambda: libm(*args, outs["libm"]),
        "madd": lambda: madd(args[0], outs["madd"]),
    }
    np_fn = numpy_equivalent(name)
    if np_fn is not None:
        fns["numpy"] = lambda: np_fn(*args, out=outs["numpy"])
    with np.errstate(all="ignore"):
        times = _interleaved_medians(fns, repeat)
    times.setdefault("numpy", None)
    return times


def _cpu_name() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in text.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _import_ms() -> float:
    """Median time of ``import jitgrad.kernels.vmath`` in fresh processes, numba already
    imported (run from a neutral directory with this process's sys.path)."""
    code = ("import time, numba, numba.extending; t = time.perf_counter(); "
            "import jitgrad.kernels.vmath; print((time.perf_counter() - t) * 1e3)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, env=env, cwd=tempfile.gettempdir()).stdout)
            for _ in range(7)]
    return statistics.median(runs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--only", nargs="*", default=list(FUNCTIONS))
    parser.add_argument("--json", help="also write the figures to this file")
    opts = parser.parse_args(argv)

    simd = "zmm (AVX-512)" if "zmm" in loop_asm(array_kernel("exp"), np.float32) else "ymm (AVX2)"
    print(f"{_cpu_name()}; vmath loops use {simd}; n = {opts.n:,}; medians of {opts.repeat}")
    print(f"import jitgrad.kernels.vmath (after numba): {_import_ms():.1f} ms")
    head = (f"{'function':9s} {'dtype':8s} {'vmath ms':>9s} {'numpy ms':>9s} {'x numpy':>8s} "
            f"{'Gelem/s':>8s} {'madd ms':>8s} {'x madd':>7s} {'libm ms':>8s}")
    print(head)
    print("-" * len(head))
    rows = []
    for name in opts.only:
        for dtype in (np.float32, np.float64):
            t = measure(name, dtype, opts.n, opts.repeat)
            np_ms = "-" if t["numpy"] is None else f"{t['numpy'] * 1e3:9.3f}"
            x_np = "-" if t["numpy"] is None else f"{t['numpy'] / t['vmath']:8.2f}"
            print(f"{name:9s} {np.dtype(dtype).name:8s} {t['vmath'] * 1e3:9.3f} {np_ms:>9s} "
                  f"{x_np:>8s} {opts.n / t['vmath'] / 1e9:8.2f} {t['madd'] * 1e3:8.3f} "
                  f"{t['vmath'] / t['madd']:7.2f} {t['libm'] * 1e3:8.2f}", flush=True)
            rows.append({"function": name, "dtype": np.dtype(dtype).name, "n": opts.n,
                         **{f"{k}_s": v for k, v in t.items()}})
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump({"cpu": _cpu_name(), "simd": simd, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
