"""Registry-driven double backward through compiled functions: every twice-differentiable
op, on every float64 sample, compiled (first call and cached plan) against eager mode --
first-order gradients built with ``create_graph=True`` and the gradients of those."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ops_helpers

import jitgrad as jg
from jitgrad.ops import REGISTRY
from jitgrad.trace.tracer import TraceError

H = ops_helpers()
F64 = np.float64
NOT_TWICE = {"to_dtype"}  # goes through float32 (see tests/ops/test_registry_gradcheck.py)
CASES = H.case_params(sorted(n for n, op in REGISTRY.items()
                             if op.differentiable and n not in NOT_TWICE), F64,
                      keep=lambda name, args, p: not p.get("_nograd"))


def _double(fn, ts, w, vs):
    leaves = [t for t in ts if isinstance(t, jg.Tensor) and t.requires_grad]
    out = fn(*ts)
    if isinstance(fn, jg.jit.CompiledFunction) and fn.stats["calls"] > 1:
        assert out.grad_fn.name() == "CompiledFunctionBackward"
    gs = jg.autograd.grad((out * w).sum(), leaves, create_graph=True, allow_unused=True)
    terms = [(g * v).sum() for g, v in zip(gs, vs) if g is not None and g.requires_grad]
    ggs = (jg.autograd.grad(sum(terms), leaves, allow_unused=True) if terms
           else [None] * len(leaves))
    return ([None if g is None else g.detach().numpy() for g in gs],
            [None if g is None else g.numpy() for g in ggs])


def _same(a, b) -> None:
    for x, y in zip(a, b):
        if x is None or y is None:
            assert not np.any(x if x is not None else 0) and not np.any(
                y if y is not None else 0)
            continue
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name,i", CASES)
def test_double_backward_compiled_equals_eager(name, i):
    args, p = H.sample(name, i, F64)
    ts = H.make_inputs(jg, args)

    def fn(*xs):
        return H.call(jg, name, list(xs), p)

    out = fn(*ts)
    if not isinstance(out, jg.Tensor) or not out.requires_grad:
        pytest.skip("no differentiable tensor output")
    rng = np.random.default_rng(7)
    w = jg.tensor(rng.uniform(0.5, 1.5, out.shape), dtype=out.dtype)
    vs = [jg.tensor(rng.standard_normal(t.shape), dtype=t.dtype) for t in ts
          if isinstance(t, jg.Tensor) and t.requires_grad]
    try:
        ref = _double(fn, ts, w, vs)
    except (RuntimeError, NotImplementedError) as e:
        pytest.skip(f"eager double backward: {e}")
    f = jg.compile(fn)
    for _ in range(2):  # the first call (trace) and the cached plan
        try:
            got = _double(f, ts, w, vs)
        except TraceError as e:
            pytest.skip(f"does not trace: {e}")
        _same(got[0], ref[0])
        _same(got[1], ref[1])
