"""OpenBLAS's kernel sets side by side in one process: the A/B behind ``kernels/blas_core.py``.

    python asv_benchmarks/blas_core_ab.py [--sets Haswell SkylakeX] [--rounds 11] [--no-step]

Each round times every GEMM shape once under each set, switching NumPy's OpenBLAS between
them (``blas_core.select_core``: OpenBLAS's own ``gotoblas_dynamic_init`` for a set's first
use, then its table pointer), so background load hits all sets alike; medians over the rounds
and their ratio to the first set. The shapes are the MLP training step's eight products at
batch 128 and 1024 (``nn.Linear``'s layouts), GPT's, squares, and float64. Then the compiled
MLP step (``training_workloads.jitgrad_mlp_step``) the same way, unless ``--no-step``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks"))

from jitgrad.kernels import blas_core  # noqa: E402

import jitgrad as jg  # noqa: E402  (picks its set at import; this script then flips them)


def selector(sets: list[str]):
    """``select(name)``: NumPy's OpenBLAS runs set ``name`` from now on."""
    for name in sets:  # each set initialised once, up front
        if not blas_core.select_core(name):
            raise SystemExit(f"cannot select {name} (CPU flags or this OpenBLAS build)")

    def select(name: str) -> None:
        blas_core.select_core(name)
    return select


def shapes(rng) -> list:
    def r(*s, dt=np.float32):
        return rng.standard_normal(s).astype(dt)
    out = []
    for b in (128, 1024):
        out += [(f"mlp b{b} x @ W1.T", r(b, 784), r(256, 784).T),
                (f"mlp b{b} h @ W2.T", r(b, 256), r(256, 256).T),
                (f"mlp b{b} g @ W2", r(b, 256), r(256, 256)),
                (f"mlp b{b} g.T @ h", r(b, 256).T, r(b, 256)),
                (f"mlp b{b} g.T @ x", r(b, 256).T, r(b, 784)),
                (f"mlp b{b} h @ W3.T", r(b, 256), r(10, 256).T)]
    out += [("gpt 2048x384 @ (1536x384).T", r(2048, 384), r(1536, 384).T),
            ("gpt 2048x1536 @ 1536x384", r(2048, 1536), r(1536, 384)),
            ("32x1024 @ 1024x1024", r(32, 1024), r(1024, 1024)),
            ("64^3", r(64, 64), r(64, 64)), ("256^3", r(256, 256), r(256, 256)),
            ("1024^3", r(1024, 1024), r(1024, 1024)),
            ("f64 128x784 @ 784x256", r(128, 784, dt=np.float64), r(784, 256, dt=np.float64)),
            ("f64 1024x784 @ 784x256", r(1024, 784, dt=np.float64),
             r(784, 256, dt=np.float64)),
            ("f64 64^3", r(64, 64, dt=np.float64), r(64, 64, dt=np.float64)),
            ("f64 1024^3", r(1024, 1024, dt=np.float64), r(1024, 1024, dt=np.float64))]
    return out


def interleaved(select, sets, fn, number: int, rounds: int) -> dict:
    """Seconds per call of ``fn`` under each set: a round runs ``number`` calls per set."""
    times: dict = {s: [] for s in sets}
    for _ in range(rounds):
        for s in sets:
            select(s)
            fn()  # the first call under a set: not timed
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[s].append((time.perf_counter() - t0) / number)
    return {s: float(np.median(v)) for s, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", nargs="+", default=["Haswell", "SkylakeX"])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--no-step", action="store_true")
    args = ap.parse_args()
    core, why = blas_core.blas_core()
    print(f"import chose: {core} ({why}); numpy {np.__version__}, "
          f"{jg.get_num_threads()} threads")
    select = selector(args.sets)
    base = args.sets[0]
    head = "  ".join(f"{s:>12s}" for s in args.sets)
    print(f"{'product':30s} {head}   ratio to {base}")
    for label, a, b in shapes(np.random.default_rng(0)):
        flops = 2 * a.shape[0] * a.shape[1] * b.shape[1]
        med = interleaved(select, args.sets, lambda a=a, b=b: a @ b, max(1, int(1e8 / flops)),
                          args.rounds)
        cells = "  ".join(f"{med[s] * 1e6:9.1f} us" for s in args.sets)
        ratios = " ".join(f"{med[s] / med[base]:.3f}" for s in args.sets[1:])
        print(f"{label:30s} {cells}   {ratios}")
    if not args.no_step:
        import training_workloads as tw

        for batch in (128, 1024):
            call = tw.jitgrad_mlp_step(jg, batch, True)[0]
            for s in args.sets:  # every set's code paths warm before timing
                select(s)
                for _ in range(5):
                    call()
            med = interleaved(select, args.sets, call, 40 if batch == 128 else 6,
                              args.rounds * 2)
            cells = "  ".join(f"{med[s] * 1e6:9.1f} us" for s in args.sets)
            ratios = " ".join(f"{med[s] / med[base]:.3f}" for s in args.sets[1:])
            print(f"{'compiled MLP step b' + str(batch):30s} {cells}   {ratios}")
    if core in args.sets:
        select(core)  # as the import left it


if __name__ == "__main__":
    main()
