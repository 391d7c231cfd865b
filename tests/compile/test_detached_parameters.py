"""A compiled function that reads a parameter through ``p.detach()`` / ``p.data`` before its
backward (an EMA copy at the start of a step) sets the parameter's ``.grad`` at every call,
as eager mode does.

The tracer registered the parameter's array under the temporary alias that read it first,
so the parameter itself -- its array "the call's own" -- was taken for a leaf of the call:
its ``.grad`` was set by the first call only, and training with the optimizer outside
stalled. A detach's array is now read from the tensor it detaches (``Tracer._origin``)."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg

READS = {
    "copy_detach": lambda buf, w: buf.copy_(w.detach()),
    "copy_data": lambda buf, w: buf.copy_(w.data),
    "lerp_detach": lambda buf, w: buf.lerp_(w.detach(), 0.5),
    "foreach_lerp": lambda buf, w: jg._foreach_lerp_([buf], [w.detach()], 0.5),
    "add_data": lambda buf, w: buf.add_(w.data),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_parameter_read_detached_before_backward_gets_its_grad_each_call(read):
    results = []
    for compiled in (False, True):
        w = jg.ones(3, requires_grad=True)
        buf = jg.zeros(3)

        def step(x, w=w, buf=buf):
            with jg.no_grad():
                READS[read](buf, w)
            (x * w * w).sum().backward()

        f = jg.compile(step) if compiled else step
        for k in range(4):
            f(jg.full((3,), float(k + 1)))
        results.append((w.grad.numpy().copy(), buf.numpy().copy()))
        if compiled:  # (traced again once: the second call finds a .grad)
            assert f.stats["traces"] == 2 and f.stats["cache_hits"] == 2
    (g_e, b_e), (g_c, b_c) = results
    np.testing.assert_array_equal(g_c, g_e)
    np.testing.assert_array_equal(b_c, b_e)
    np.testing.assert_array_equal(g_e, [20.0] * 3)  # 2 * (1 + 2 + 3 + 4)


def test_ema_at_the_start_of_a_compiled_step_with_the_optimizer_outside_trains_as_eager():
    rng = np.random.default_rng(0)
    x = jg.tensor(rng.standard_normal((16, 4)).astype(np.float32))
    y = jg.tensor(rng.integers(0, 3, 16))
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    losses = []
    for compiled in (False, True):
        w = jg.tensor(w0, requires_grad=True)
        ema = jg.tensor(w0)
        opt = jg.optim.SGD([w], lr=0.5)

        def step(x, y, w=w, ema=ema):
            with jg.no_grad():
                jg._foreach_lerp_([ema], [w.detach()], 0.1)
            loss = jg.nn.functional.cross_entropy(x @ w.t(), y)
            loss.backward()
            return loss

        f = jg.compile(step) if compiled else step
        run = []
        for _ in range(5):
            opt.zero_grad()
            run.append(f(x, y).item())
            opt.step()
        losses.append((run, w.detach().numpy().copy(), ema.numpy().copy()))
    (l_e, w_e, e_e), (l_c, w_c, e_c) = losses
    assert l_c == l_e and l_e[-1] < l_e[0] - 0.1
    np.testing.assert_array_equal(w_c, w_e)
    np.testing.assert_array_equal(e_c, e_e)
