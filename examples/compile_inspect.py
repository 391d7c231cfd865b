"""What ``jitgrad.compile`` makes of your code: the traced graph IR, the backward graph, the
fusion groups and the generated Numba source, for two functions:

1. ``loss(x, w, b)`` compiled on its own, so ``.backward()`` outside runs its compiled backward
   (a separate backward graph);
2. a whole training step (forward, loss, ``.backward()``, SGD update) compiled to one plan:
   ``make_step`` of the digits demo, ``train_digits.py`` beside this file.

    python examples/compile_inspect.py            # summaries and the first kernel's source
    python examples/compile_inspect.py --full     # every graph and all generated source

``JITGRAD_LOGS=graph,code,recompiles`` prints the same while your own program runs.
"""

from __future__ import annotations

import argparse

import numpy as np
from train_digits import make_step  # the digits demo beside this file

import jitgrad
import jitgrad.nn as nn


def chain(x, w, b):
    """The element-wise chain of the benchmarks: forward and backward fuse into few loops."""
    return (jitgrad.tanh(x * w + b) ** 2 * jitgrad.sigmoid(x)).sum()


def first_kernel(source: str) -> str:
    """The first generated module's kernel (one function: threads run ranges of its parts)."""
    start = source.find("@cached_njit")
    end = source.find("import numpy", start + 1)
    return source[start:end if end > 0 else None].rstrip()


def show(title: str, lowered, full: bool) -> None:
    print(f"\n{'=' * 30} {title} {'=' * 30}")
    print("-- traced graph --")
    print(lowered.graph)
    if lowered.backward_graph:
        print("-- backward graph (runs when you call .backward() on the output) --")
        print(lowered.backward_graph)
    print("-- plan: views, BLAS/kernel calls and fused loops --")
    print("\n".join(lowered.fusion_groups))
    print("-- generated Numba source --")
    print(lowered.source if full else first_kernel(lowered.source) +
          "\n    ... (--full prints every kernel)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--full", action="store_true", help="print every graph and kernel in full")
    args = p.parse_args(argv)

    rng = np.random.default_rng(0)
    x, w, b = (jitgrad.tensor(rng.standard_normal(1000), dtype=jitgrad.float32,
                              requires_grad=True) for _ in range(3))
    f = jitgrad.compile(chain)
    loss = f(x, w, b)
    loss.backward()
    print(f"chain: loss {loss.item():.4f}, grad_fn {type(loss.grad_fn).__name__}")
    show("chain(x, w, b), backward outside", f.lower(x, w, b), args.full)
    print("\n" + jitgrad.explain(f, x, w, b))

    jitgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    # zero_grad, cross-entropy of model(x), backward, opt.step(): one compiled plan
    train_step = jitgrad.compile(make_step(model, opt))

    xb = jitgrad.tensor(rng.standard_normal((16, 64)), dtype=jitgrad.float32)
    yb = jitgrad.tensor(rng.integers(0, 10, 16))
    losses = [train_step(xb, yb).item() for _ in range(5)]
    print(f"\ntrain_step: losses {', '.join(f'{v:.3f}' for v in losses)}")
    show("train_step: forward + backward + update in one plan", train_step.lower(xb, yb),
         args.full)
    print("\n" + jitgrad.explain(train_step, xb, yb))


if __name__ == "__main__":
    main()
