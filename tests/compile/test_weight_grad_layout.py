"""A linear layer's weight gradient is computed in the weight's own layout, ``g.T @ x``, in
eager and compiled mode alike (one BLAS call, the same bits even where the BLAS rounds
``(x.T @ g).T`` differently), and a compiled step hands the product itself to ``.grad``
(``x.T.T`` cancelled: no copy)."""

from __future__ import annotations

import inspect

import numpy as np
from helpers import newest_plan

import jitgrad as jg
from jitgrad.compiler.passes import cancel_transposes
from jitgrad.trace.ir import Graph


def _layer(seed=0):
    rng = np.random.default_rng(seed)
    lin = jg.nn.Linear(96, 80)
    x = jg.from_numpy(rng.standard_normal((64, 96), dtype=np.float32))
    return lin, x


def test_weight_gradient_is_g_t_at_x_in_the_weights_layout():
    lin, x = _layer()
    y = lin(x).relu()
    g = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
    (y * jg.from_numpy(g)).sum().backward()
    gh = g * (y._data > 0)
    np.testing.assert_array_equal(lin.weight.grad._data, gh.T @ x._data)  # the same call
    assert lin.weight.grad._data.flags.c_contiguous


def test_compiled_weight_gradients_equal_eager_and_are_the_product_itself():
    lin, x = _layer()
    clin, _ = _layer()
    clin.load_state_dict(lin.state_dict())

    def step(m):
        def run(x):
            m.zero_grad()
            loss = m(x).tanh().sum()
            loss.backward()
            return loss
        return run
    eager, compiled = step(lin), jg.compile(step(clin))
    for _ in range(3):
        assert eager(x).item() == compiled(x).item()
        np.testing.assert_array_equal(lin.weight.grad._data, clin.weight.grad._data)
        np.testing.assert_array_equal(lin.bias.grad._data, clin.bias.grad._data)
    assert clin.weight.grad._data.flags.owndata  # the product, not a copied view


def test_cancel_transposes_keeps_a_returned_double_transpose_a_view():
    x = jg.randn(3, 4, requires_grad=True)
    f = jg.compile(lambda x: (x.t().t(), (x.t().t() * 2).sum()))
    a, s = f(x)
    assert a.shape == (3, 4) and np.array_equal(a._data, x._data)
    assert s.item() == (x * 2).sum().item()
    src = inspect.getsource(newest_plan(f).run)
    assert src.count(".transpose(") == 2  # the returned pair only; the summed one is gone
    assert cancel_transposes(Graph()) == {}


def test_a_returned_double_transpose_of_a_fresh_value_is_the_value():
    x, w = jg.randn(3, 4), jg.randn(4, 5)
    f = jg.compile(lambda x, w: (x @ w).t().t())
    for _ in range(2):
        np.testing.assert_array_equal(f(x, w)._data, (x @ w)._data)
    assert ".transpose(" not in inspect.getsource(newest_plan(f).run)


def test_module_mode_weight_gradients_equal_eager():
    lin, x = _layer(3)
    clin, _ = _layer(3)
    clin.load_state_dict(lin.state_dict())
    cm = jg.compile(clin)
    for _ in range(2):
        lin.zero_grad()
        clin.zero_grad()
        lin(x).tanh().sum().backward()
        cm(x).tanh().sum().backward()
        np.testing.assert_array_equal(lin.weight.grad._data, clin.weight.grad._data)
        assert clin.weight.grad._data.flags.c_contiguous


def test_an_argument_in_another_layout_traces_again_and_keeps_eager_bits():
    """The BLAS form of a transposed operand's gradient follows its layout, and the layout of
    each argument is part of a compiled function's key: passing the same matrix as a
    transposed view traces again, so each call has eager mode's gradient bits."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 96), dtype=np.float32)
    g = jg.from_numpy(rng.standard_normal((64, 80), dtype=np.float32))
    w = rng.standard_normal((80, 96), dtype=np.float32)

    def loss(x, b):
        return ((x @ b) * g).sum()

    f = jg.compile(loss)
    layouts = [np.ascontiguousarray(w.T), w.T, np.ascontiguousarray(w.T)]  # C, F, C again
    for k, bw in enumerate(layouts):
        grads = []
        for fn in (loss, f):
            x = jg.from_numpy(a.copy()).requires_grad_()
            b = jg.from_numpy(bw).requires_grad_()
            fn(x, b).backward()
            grads.append((x.grad.numpy(), b.grad.numpy()))
        for e, c in zip(*grads):
            np.testing.assert_array_equal(c, e, err_msg=f"call {k}")
    assert f.stats["traces"] == 2, f.stats
    assert "layout changed" in (f.last_retrace_reason or ""), f.last_retrace_reason


def test_three_d_input_whole_step_grad_layout_and_adafactor_bits():
    """A Linear fed (batch, seq, features): the compiled whole step's ``.grad`` is row-major
    as eager mode's (a leaf's new .grad; the clone is kept, ``passes.drop_copies``), so an
    optimizer whose reductions round by layout (Adafactor's row/column means) gives eager's
    bits. Found by the stop-50 architecture probe (T5 with Adafactor drifted 2e-2)."""
    x = jg.from_numpy(np.random.default_rng(2).standard_normal((8, 24, 32), dtype=np.float32))
    for bias, form in ((False, "linear"), (True, "linear"), (False, "matmul")):
        for name in ("SGD", "Adafactor"):
            jg.manual_seed(0)
            me = jg.nn.Linear(32, 48, bias=bias)
            mc = jg.nn.Linear(32, 48, bias=bias)
            mc.load_state_dict(me.state_dict())
            oe = getattr(jg.optim, name)(me.parameters(), lr=0.01)
            oc = getattr(jg.optim, name)(mc.parameters(), lr=0.01)

            def step(m, opt, x, form=form):
                opt.zero_grad()
                # F.linear (one GEMM over the rows), or a batched matmul with the weight's
                # transpose (its gradient: a transposed product, kept row-major)
                y = m(x) if form == "linear" else x @ m.weight.t()
                loss = (y ** 2).mean()
                loss.backward()
                opt.step()
                return loss

            f = jg.compile(step)
            for _ in range(3):
                want, got = step(me, oe, x), f(mc, oc, x)
                assert got.item() == want.item()
                assert mc.weight.grad._data.flags.c_contiguous
                assert mc.weight.grad.stride() == me.weight.grad.stride() == (32, 1)
                np.testing.assert_array_equal(mc.weight.detach().numpy(),
                                              me.weight.detach().numpy())
