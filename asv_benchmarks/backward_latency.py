"""Per-call CPU latency of the eager backward engine on small graphs, jitgrad and PyTorch side
by side in one process: what ``Tensor.backward()`` / ``autograd.grad()`` cost in Python
bookkeeping where the arithmetic is tiny.

    python asv_benchmarks/backward_latency.py              # this checkout, and torch if importable
    python asv_benchmarks/backward_latency.py chain grad   # only cases naming one of the words
    python path/to/other/checkout/asv_benchmarks/backward_latency.py   # another version

The script imports the jitgrad of the checkout it lives in (its parent folder goes first on
sys.path), so one interpreter can time two checkouts: run both, alternately, in one session
and compare. Each figure is ``eager_op_latency.per_call``'s: the best of several timeit repeats
(the machine is shared and noisy; the best is the least disturbed).

Every case but ``retain_graph`` builds its graph and runs backward on it (a graph is freed by
its backward): the ``fwd+bwd`` columns time the whole call, the ``bwd`` columns that minus
the same forward timed alone (best of both, so a noisy estimate of the backward's own cost).
``retain_graph`` runs ``loss.backward(retain_graph=True)`` over one graph built once (no
forward in it). Inputs are 32x64 float32 leaves requiring grad (``x``, ``y``) unless the
case says otherwise; gradients accumulate into ``.grad`` across calls, as in both libraries
after the first call (in place). Columns: microseconds per call, and jitgrad / torch.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

# (the same timing; eager_op_latency imports this checkout's jitgrad, and torch if it can)
from eager_op_latency import build_cases, per_call  # noqa: E402

CHAIN = 20  # nodes of the long chain case


def cases(lib) -> dict:
    """name -> (forward, forward + backward): zero-argument callables for library ``lib``
    (jitgrad or torch); forward is None where the case times backward alone."""
    F = lib.nn.functional
    rng = np.random.default_rng(0)

    def t(*shape, grad=True):
        return lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=grad)

    x, y = t(32, 64), t(32, 64)

    def mul_sum():
        return (x * y).sum()

    def five_ops():
        return ((x * y + x).tanh() * y).sum()

    def chain():
        h = x
        for i in range(CHAIN - 1):  # CHAIN - 1 element-wise nodes, then the sum
            h = h * y if i % 2 == 0 else h.tanh()
        return h.sum()

    lib.manual_seed(0)
    mlp = lib.nn.Sequential(lib.nn.Linear(64, 128), lib.nn.ReLU(), lib.nn.Linear(128, 10))
    mx = t(32, 64, grad=False)
    my = lib.tensor(rng.integers(0, 10, 32))

    def mlp_loss():
        return F.cross_entropy(mlp(mx), my)

    kept = mul_sum()
    return {
        "(x*y).sum().backward()": (mul_sum, lambda: mul_sum().backward()),
        "5 ops .backward()": (five_ops, lambda: five_ops().backward()),
        "autograd.grad(l, [x, y])": (mul_sum, lambda: lib.autograd.grad(mul_sum(), [x, y])),
        "backward(retain_graph)": (None, lambda: kept.backward(retain_graph=True)),
        "MLP 64-128-10 b32": (mlp_loss, lambda: mlp_loss().backward()),
        f"{CHAIN}-node chain": (chain, lambda: chain().backward()),
    }


def main(words: list[str]) -> None:
    built = build_cases(cases)
    head = f"{'case':26s} {'fwd+bwd jitgrad':>15s} {'torch':>7s} {'ratio':>6s}"
    print(head + f" {'bwd jitgrad':>11s} {'torch':>7s} {'ratio':>6s}   (us)")
    for name in built["jitgrad"]:
        if words and not any(w in name for w in words):
            continue
        full, bwd = {}, {}
        for lib in built:
            fwd, step = built[lib][name]
            full[lib] = per_call(step) * 1e6
            bwd[lib] = full[lib] - (per_call(fwd) * 1e6 if fwd is not None else 0.0)
        row = f"{name:26s} {full['jitgrad']:15.2f}"
        if "torch" in full:
            row += f" {full['torch']:7.2f} {full['jitgrad'] / full['torch']:6.2f}"
        row += f" {bwd['jitgrad']:11.2f}"
        if "torch" in bwd:
            row += f" {bwd['torch']:7.2f} {bwd['jitgrad'] / bwd['torch']:6.2f}"
        print(row, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
