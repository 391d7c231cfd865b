"""Helpers shared by test modules (importable as ``helpers``: pytest's pythonpath)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def strip_addresses(text: str) -> str:
    """Replace ``object at 0x...`` addresses so printed grad_fns compare equal."""
    return re.sub(r"object at 0x[0-9A-Fa-f]+", "object at 0x?", text)


def w2_step(x, w, b):
    """The W2 training-style step: ``sum(tanh(x*w + b)**2 * sigmoid(x))`` and its backward
    into fresh ``.grad``s (as compiled in the benchmarks)."""
    import jitgrad as jg

    x.grad = w.grad = b.grad = None
    loss = (jg.tanh(x * w + b) ** 2 * jg.sigmoid(x)).sum()
    loss.backward()
    return loss
