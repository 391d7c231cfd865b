"""Per-call latency of functions autocast lists, and of an eager MLP step (CPU), with and
without an autocast region: what the autocast wrappers cost.

    python asv_benchmarks/listed_calls.py            # this checkout
    path/to/other/.venv/bin/python asv_benchmarks/listed_calls.py   # another version

Run both versions in one session and compare side by side (best of 7 repeats each; the
machine is shared and noisy). Under autocast the functions cast to float16 (matmul, linear)
or keep float32 (the CPU list leaves exp/softmax/sum alone; cross_entropy is float32)."""

from __future__ import annotations

import contextlib
import timeit

import jitgrad as torch
import jitgrad.nn.functional as F


def cases() -> dict:
    x16 = torch.randn(16)
    a, w, b = torch.randn(32, 64), torch.randn(64, 64), torch.randn(64)
    logits, t = torch.randn(32, 10), torch.randint(0, 10, (32,))
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        loss = F.cross_entropy(model(a), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {
        "x.exp() 16": lambda: x16.exp(),
        "x ** 2 16": lambda: x16 ** 2,
        "x.sum() 16": lambda: x16.sum(),
        "x.tanh() 16 (not listed)": lambda: x16.tanh(),
        "a @ w 32x64": lambda: a @ w,
        "F.linear 32x64": lambda: F.linear(a, w, b),
        "F.cross_entropy 32x10": lambda: F.cross_entropy(logits, t),
        "F.softmax 32x10": lambda: F.softmax(logits, 1),
        "MLP step b32": step,
    }


def main() -> None:
    regions = {"plain": contextlib.nullcontext}
    if hasattr(torch, "autocast"):
        regions["autocast cpu f16"] = lambda: torch.autocast("cpu", dtype=torch.float16)
    for region, ctx in regions.items():
        print(f"-- {region}")
        with ctx():
            for name, fn in cases().items():
                fn()
                n = 300 if "step" in name else 2000
                best = min(timeit.repeat(fn, number=n, repeat=7)) / n
                print(f"{name:28s} {best * 1e6:8.2f} us")


if __name__ == "__main__":
    main()
