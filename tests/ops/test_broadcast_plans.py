"""Broadcasting element-wise ops reuse their kernel plan (``eager_kernels._run_broadcast``):
the plan is keyed by op, dtypes, output shape and each operand's shape and contiguity, so a
second call with another layout of the same shapes must not reuse a plan that does not
fit it. Results are compared with NumPy bit for bit (add and mul are one IEEE operation)."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
from jitgrad.ops import eager_kernels

CASES = [((16, 16), (16,)), ((16, 16), (16, 1)), ((4, 5, 6), (5, 6)), ((4, 5, 6), (4, 1, 1)),
         ((4, 5, 6), (1, 5, 1)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sa, sb", CASES)
def test_broadcast_results_equal_numpy_in_every_layout(sa, sb, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(sa).astype(dtype)
    b = rng.standard_normal(sb).astype(dtype)
    layouts = {
        "contiguous": (a, b),
        "transposed copy": (np.ascontiguousarray(a.T).T, b),  # same values, F order
        "strided": (np.repeat(a, 2, axis=-1)[..., ::2], b),
        "swapped": (b, a),
    }
    for _ in range(2):  # the second round runs from the cached plans
        for name, (x, y) in layouts.items():
            for op, ref in ((lambda p, q: p + q, np.add), (lambda p, q: p * q, np.multiply)):
                out = op(jitgrad.tensor(x) if x.flags.c_contiguous else jitgrad.from_numpy(x),
                         jitgrad.from_numpy(y))
                np.testing.assert_array_equal(out.numpy(), ref(x, y), err_msg=name)


def test_plan_is_reused_and_keyed_by_layout():
    eager_kernels._pair_plans.clear()
    eager_kernels._broadcast_plans.clear()
    x = jitgrad.randn(8, 6)
    row = jitgrad.randn(6)
    for _ in range(3):
        x + row
    assert len(eager_kernels._pair_plans) == 1  # two tensors: dispatch's pair plan
    xt = jitgrad.randn(6, 8).T  # same shape, other strides: no rows kernel (strided)
    np.testing.assert_array_equal((xt + row).numpy(), xt.numpy() + row.numpy())
    assert len(eager_kernels._pair_plans) == 2 and None in eager_kernels._pair_plans.values()
    np.testing.assert_array_equal((x + 2.0 * row.numpy()).numpy(),
                                  x.numpy() + 2.0 * row.numpy())  # (an array: the run plan)
    assert len(eager_kernels._broadcast_plans) >= 1


def test_pair_plan_matches_the_general_path_bit_for_bit():
    """dispatch's pair plan (two tensors) against eager_kernels.run's own broadcasting."""
    rng = np.random.default_rng(3)
    for sa, sb in CASES:
        a = jitgrad.tensor(rng.standard_normal(sa).astype(np.float32))
        b = jitgrad.tensor(rng.standard_normal(sb).astype(np.float32))
        for op in (jitgrad.add, jitgrad.mul, jitgrad.sub, jitgrad.div, jitgrad.maximum,
                   jitgrad.eq):
            fast = op(a, b)
            general = eager_kernels.run(_op_of(op), (a.numpy(), b.numpy()), None,
                                        np.float32, np.bool_ if op is jitgrad.eq
                                        else np.float32)
            np.testing.assert_array_equal(fast.numpy(), general)


def _op_of(fn):
    from jitgrad.ops import REGISTRY

    return REGISTRY[{jitgrad.add: "add", jitgrad.mul: "mul", jitgrad.sub: "sub",
                     jitgrad.div: "div", jitgrad.maximum: "maximum", jitgrad.eq: "eq"}[fn]]


def test_gradients_through_cached_plans():
    x = jitgrad.randn(5, 7, requires_grad=True)
    b = jitgrad.randn(7, requires_grad=True)
    for _ in range(2):
        x.grad = b.grad = None
        (x * b + b).sum().backward()
        np.testing.assert_allclose(b.grad.numpy(), x.detach().numpy().sum(0) + 5, rtol=1e-6)
        np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(b.detach().numpy(),
                                                                        (5, 7)))
