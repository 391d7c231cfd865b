"""Per-call CPU latency of common small eager ops (32x64 float32), jitgrad and PyTorch side
by side in one process: what jitgrad's Python dispatch costs where the arithmetic is tiny.

    python asv_benchmarks/eager_op_latency.py              # this checkout, and torch if importable
    python asv_benchmarks/eager_op_latency.py softmax cat  # only cases naming one of the words
    python path/to/other/checkout/asv_benchmarks/eager_op_latency.py   # another version

The script imports the jitgrad of the checkout it lives in (its parent folder goes first on
sys.path), so one interpreter can time two checkouts: run both, alternately, in one session
and compare. Each figure is the best of REPEATS timeit repeats of about TARGET_S seconds each
(the machine is shared and noisy; the best is the least disturbed). "grad" cases take inputs
with requires_grad=True and record the graph; "backward" runs (x*y).sum().backward().
Columns: microseconds per call for jitgrad and torch, and jitgrad / torch."""

from __future__ import annotations

import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import jitgrad  # noqa: E402

try:
    import torch
except ImportError:  # jitgrad alone
    torch = None

REPEATS = 7
TARGET_S = 0.05


def cases(lib) -> dict:
    """name -> zero-argument callable for library ``lib`` (jitgrad or torch)."""
    F = lib.nn.functional
    rng = np.random.default_rng(0)

    def t(*shape, grad=False):
        return lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=grad)

    x, y, z = t(32, 64), t(32, 64), t(32, 64)
    w, b = t(16, 64), t(16)
    row, col = t(64), t(32, 1)
    cond = x > 0
    gx, gy, gz = t(32, 64, grad=True), t(32, 64, grad=True), t(32, 64, grad=True)
    gw, gb = t(16, 64, grad=True), t(16, grad=True)
    return {
        "view(64, 32)": lambda: x.view(64, 32),
        "reshape(-1)": lambda: x.reshape(-1),
        "transpose(0, 1)": lambda: x.transpose(0, 1),
        "x[3]": lambda: x[3],
        "x[:, 1:3]": lambda: x[:, 1:3],
        "unsqueeze(0)": lambda: x.unsqueeze(0),
        "cat([x, y, z])": lambda: lib.cat([x, y, z]),
        "stack([x, y, z])": lambda: lib.stack([x, y, z]),
        "softmax(dim=1)": lambda: x.softmax(dim=1),
        "F.log_softmax(dim=1)": lambda: F.log_softmax(x, dim=1),
        "F.linear(x, w, b)": lambda: F.linear(x, w, b),
        "x @ x.T": lambda: x @ x.T,
        "x * y + x": lambda: x * y + x,
        "x + row (bias)": lambda: x + row,
        "x * col": lambda: x * col,
        "relu": lambda: x.relu(),
        "sum(dim=1)": lambda: x.sum(dim=1),
        "mean()": lambda: x.mean(),
        "exp": lambda: x.exp(),
        "where(c, x, y)": lambda: lib.where(cond, x, y),
        "clone": lambda: x.clone(),
        "grad view(64, 32)": lambda: gx.view(64, 32),
        "grad x[:, 1:3]": lambda: gx[:, 1:3],
        "grad cat([x, y, z])": lambda: lib.cat([gx, gy, gz]),
        "grad softmax(dim=1)": lambda: gx.softmax(dim=1),
        "grad F.linear": lambda: F.linear(gx, gw, gb),
        "grad x * y + x": lambda: gx * gy + gx,
        "grad x + row (bias)": lambda: gx + row,
        "grad sum(dim=1)": lambda: gx.sum(dim=1),
        "backward (x*y).sum()": lambda: (gx * gy).sum().backward(),
    }


def per_call(fn) -> float:
    """Best seconds per call of ``fn`` over REPEATS repeats of about TARGET_S each."""
    fn()
    number, elapsed = 1, 0.0
    while elapsed < TARGET_S / 5:  # calibrate: a repeat runs about TARGET_S
        number *= 4
        elapsed = timeit.timeit(fn, number=number)
    number = max(1, int(number * TARGET_S / elapsed))
    return min(timeit.repeat(fn, number=number, repeat=REPEATS)) / number


def build_cases(cases) -> dict:
    """``{"jitgrad": cases(jitgrad), "torch": cases(torch)}`` (torch on one thread, when
    importable), after a line saying which versions run."""
    libs = {"jitgrad": jitgrad}
    if torch is not None:
        torch.set_num_threads(1)
        libs["torch"] = torch
    built = {name: cases(lib) for name, lib in libs.items()}
    print(f"jitgrad from {os.path.dirname(jitgrad.__file__)}"
          + (f"; torch {torch.__version__} (1 thread)" if torch is not None else ""))
    return built


def main(words: list[str]) -> None:
    built = build_cases(cases)
    print(f"{'op (32x64 float32)':24s} {'jitgrad us':>10s} {'torch us':>9s} {'ratio':>6s}")
    for name in built["jitgrad"]:
        if words and not any(w in name for w in words):
            continue
        times = {lib: per_call(built[lib][name]) * 1e6 for lib in built}
        row = f"{name:24s} {times['jitgrad']:10.2f}"
        if "torch" in times:
            row += f" {times['torch']:9.2f} {times['jitgrad'] / times['torch']:6.2f}"
        print(row, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
