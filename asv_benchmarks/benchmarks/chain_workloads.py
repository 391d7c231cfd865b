"""The chain workloads shared by the asv suite (``bench_eager.py``, ``bench_compile.py``) and the
peer report (``compare.py``), so that both time the same code on the same data:

* W2, the element-wise chain ``sum(tanh(x*w + b)**2 * sigmoid(x))`` forward + backward: its
  float64 reference, its whole step compiled by ``jitgrad.compile`` (also as source text,
  for the programs that time a fresh process) and its loss alone compiled (the node path);
* the matmul chain ``((x @ w1).tanh() @ w2).sum()``: its inputs.
"""

from __future__ import annotations

import inspect

import numpy as np


def chain_reference(x, w, b):
    """Float64 NumPy loss and (gx, gw, gb) of W2 with the hand-derived backward."""
    x, w, b = (a.astype(np.float64) for a in (x, w, b))
    t = np.tanh(x * w + b)
    s = 1.0 / (1.0 + np.exp(-x))
    t2 = t * t
    du = 2.0 * t * s * (1.0 - t2)
    return float((t2 * s).sum()), (du * w + t2 * s * (1.0 - s), du * x, du)


def compiled_chain_step(jg):
    """W2's whole step under ``jg.compile`` (``jg`` is the jitgrad module): the loss and its
    backward into fresh ``.grad``s, one plan. ``step(x, w, b)`` returns the loss."""
    @jg.compile
    def step(x, w, b):
        x.grad = w.grad = b.grad = None
        loss = (jg.tanh(x * w + b) ** 2 * jg.sigmoid(x)).sum()
        loss.backward()
        return loss
    return step


def compiled_chain_loss(jg):
    """W2's loss alone under ``jg.compile``; the caller runs ``loss.backward()`` outside (the
    node path: a compiled function inside eager autograd)."""
    return jg.compile(lambda x, w, b: (jg.tanh(x * w + b) ** 2 * jg.sigmoid(x)).sum())


def compiled_chain_step_source() -> str:
    """``compiled_chain_step``'s definition, for a program timed in a fresh process: it
    defines the function, then calls ``compiled_chain_step(jg)`` (jitgrad imported as ``jg``)."""
    return inspect.getsource(compiled_chain_step)


def matmul_arrays(shape=(128, 784, 256, 10)):
    """``x, w1, w2`` of the matmul chain for ``shape = (batch, in, hidden, out)``: float32
    standard normal, each weight scaled by 1/sqrt(its fan-in)."""
    bsz, d_in, d_hid, d_out = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((bsz, d_in), dtype=np.float32)
    w1 = rng.standard_normal((d_in, d_hid), dtype=np.float32) / np.float32(d_in ** 0.5)
    w2 = rng.standard_normal((d_hid, d_out), dtype=np.float32) / np.float32(d_hid ** 0.5)
    return x, w1, w2
