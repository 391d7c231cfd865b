"""Plan steps written as lines of the plan's straight-line code instead of runner calls:
views (``executable.InlineStep``) and float matrix products (``np.matmul`` itself, noting a
BLAS call big enough to be threaded; a transpose only the product reads folded into it) --
the same arrays, the same bits as eager mode."""

from __future__ import annotations

import inspect
import re

import numpy as np
from helpers import newest_plan
from jitgrad.kernels import parallel

import jitgrad as jg

_PRODUCT_LINE = re.compile(
    r"env\[\d+\] = P\d+\[0\]\(env\[\d+\](?:\.T)?, env\[\d+\](?:\.T)?\)")


def _step(w1, w2):
    def step(x):
        w1.grad = w2.grad = None
        loss = ((x @ w1.t()).relu() @ w2).sum()
        loss.backward()
        return loss
    return step


def test_matrix_products_are_plan_lines_with_eager_bits(monkeypatch):
    rng = np.random.default_rng(0)
    x = jg.from_numpy(rng.standard_normal((64, 96), dtype=np.float32))
    w = [jg.from_numpy(rng.standard_normal(s, dtype=np.float32)).requires_grad_()
         for s in ((80, 96), (80, 5))]
    cw = [jg.from_numpy(t._data.copy()).requires_grad_() for t in w]
    eager, compiled = _step(*w), jg.compile(_step(*cw))
    for _ in range(3):
        le, lc = eager(x), compiled(x)
        np.testing.assert_array_equal(le._data, lc._data)
        for a, b in zip(w, cw):
            np.testing.assert_array_equal(a.grad._data, b.grad._data)
    plan = newest_plan(compiled)
    src = inspect.getsource(plan.run)
    n_mm = sum(1 for s in plan.steps if s.eqn is not None and not isinstance(s.eqn.op, str)
               and s.eqn.op.name == "matmul")
    assert n_mm >= 3 and len(_PRODUCT_LINE.findall(src)) == n_mm  # lines, not calls
    # x @ w1.t(): the transpose is the product's operand, not a step of its own
    assert any(".T" in line for line in _PRODUCT_LINE.findall(src))
    n_views = sum(1 for s in plan.steps if s.kind == "view")
    assert src.count(".transpose(") < n_views
    # x @ w1.T (64 x 96 x 80) is big enough to be threaded: the line notes it
    monkeypatch.setattr(parallel, "_blas_at", [float("-inf")])
    compiled(x)
    assert parallel._blas_at[0] > float("-inf")


def test_integer_and_batched_products_keep_their_runner():
    a = jg.arange(6).reshape(2, 3)
    b = jg.arange(6).reshape(3, 2)
    f = jg.compile(lambda a, b: (a @ b) + 1)
    for _ in range(2):
        np.testing.assert_array_equal(f(a, b)._data, a._data @ b._data + 1)
    assert not _PRODUCT_LINE.findall(inspect.getsource(newest_plan(f).run))
    x, y = jg.randn(4, 2, 3), jg.randn(4, 3, 5)
    g = jg.compile(lambda x, y: (x @ y).sum())
    for _ in range(2):
        np.testing.assert_allclose(g(x, y)._data, (x._data @ y._data).sum(), rtol=1e-5)
    assert not _PRODUCT_LINE.findall(inspect.getsource(newest_plan(g).run))
