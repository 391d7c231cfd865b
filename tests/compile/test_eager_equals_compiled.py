"""Eager and compiled mode compute the same bits: every element-wise op with a kernel
expression and every sum and mean, over the registry's samples in float32 and float64,
values and gradients, on the compiled function's first call (the one that traces) and on
later ones; and random programs of fused element-wise chains and sums.

Both modes run the same generated kernels (eager ops are one-equation kernels of the
compiler's pipeline), fused kernels round every op's result as its eager kernel does (no FMA
contraction), and a sum has one order whatever it is fused with (kernel_desc.py)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same_bits, ops_helpers

import jitgrad as jg
from jitgrad.ops import REGISTRY

H = ops_helpers()
OPS = sorted(n for n, op in REGISTRY.items()
             if (op.kind == "elementwise" and op.expr) or n in ("sum", "mean"))


def _gradients(out, leaves, weights):
    if not out.requires_grad:
        return []
    return jg.autograd.grad((out * weights).sum(), leaves, allow_unused=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", OPS)
def test_op_eager_equals_compiled(name, dtype):
    samples = H.samples_for(name, dtype)
    assert samples, f"{name} has no samples"
    for i in range(len(samples)):
        args, p = H.sample(name, i, dtype)
        ts = H.make_inputs(jg, args)
        leaves = [t for t in ts if isinstance(t, jg.Tensor) and t.requires_grad]
        eager = H.call(jg, name, ts, p)
        w = jg.tensor(np.random.default_rng(1).uniform(0.5, 1.5, eager.shape),
                      dtype=eager.dtype) if eager.dtype.is_floating_point else None
        g_eager = _gradients(eager, leaves, w) if w is not None else []
        f = jg.compile(lambda *xs, p=p: H.call(jg, name, list(xs), p), fullgraph=True)
        for call in ("first call", "second call"):
            out = f(*ts)
            assert_same_bits(out, eager, f"{name} sample {i} {call}")
            for k, (a, b) in enumerate(zip(_gradients(out, leaves, w) if w is not None
                                           else [], g_eager)):
                if b is not None:
                    assert_same_bits(a, b, f"{name} sample {i} {call} gradient {k}")
        assert f.stats["traces"] == 1, f.last_retrace_reason


@pytest.mark.parametrize("seed", range(12))
def test_fused_chains_and_sums_equal_eager(seed):
    """Fused kernels of several ops with sums of every kind (all / rows / cols / mean) give
    the eager sequence's bits, values and gradients, first call included."""
    rng = np.random.default_rng(seed)
    dt = jg.float32 if seed % 2 else jg.float64
    rows, cols = int(rng.integers(1, 300)), int(rng.integers(1, 700))
    x = jg.tensor(rng.standard_normal((rows, cols)), dtype=dt, requires_grad=True)
    b = jg.tensor(rng.standard_normal(cols), dtype=dt, requires_grad=True)
    c = jg.tensor(rng.standard_normal((rows, 1)), dtype=dt, requires_grad=True)

    def fn(x, b, c):
        h = jg.tanh(x * 1.5 + b) * jg.sigmoid(x - c)
        e = (h * h + 0.5).sqrt()
        return (e.sum() + h.sum(0).sum() * 0.25 + (e * c).sum(1).mean()
                + jg.exp(-h).mean(0).sum() + (x * x).sum())

    ref = fn(x, b, c)
    g_ref = jg.autograd.grad(ref, [x, b, c])
    f = jg.compile(fn, fullgraph=True)
    vg = jg.compile(jg.value_and_grad(fn, argnums=(0, 1, 2)), fullgraph=True)
    for _ in range(2):
        out = f(x, b, c)
        assert_same_bits(out, ref, "value")
        for a, r in zip(jg.autograd.grad(out, [x, b, c]), g_ref):
            assert_same_bits(a, r, "gradient")
        v, gs = vg(x, b, c)
        assert_same_bits(v, ref, "value (whole step)")
        for a, r in zip(gs, g_ref):
            assert_same_bits(a, r, "gradient (whole step)")
