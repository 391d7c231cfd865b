"""Fused kernels store a compiled step's in-place updates straight into their destination
(``compiler/inplace_writes.py``) where nothing needs the old contents: the same bits as
eager mode, the caller's arrays kept (no new array, no copy-back), and the copying path
wherever writing in place could change a result."""

import inspect
import warnings

import numpy as np
import pytest
from helpers import cross_entropy_step, newest_plan

import jitgrad as jg
import jitgrad.nn as nn


def _model(seed=0):
    jg.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))




@pytest.mark.parametrize("make_opt", [
    lambda p: jg.optim.SGD(p, lr=0.1),
    lambda p: jg.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-2),
    lambda p: jg.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    lambda p: jg.optim.Adam(p, lr=1e-2),
    lambda p: jg.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
], ids=["sgd", "momentum_wd", "nesterov", "adam", "adamw"])
def test_training_step_updates_in_place_with_eager_bits(make_opt):
    # SGD: eager's bits; Adam/AdamW: PyTorch's capturable update when traced, within an
    # ulp or so per step of eager's (docs/architecture.md, "Eager == compiled")
    check = np.testing.assert_array_equal if "SGD" in repr(make_opt([jg.zeros(1)])) else (
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6))
    x = jg.randn(5, 6)
    y = jg.tensor([0, 1, 2, 1, 0])
    eager_model, model = _model(), _model()
    eager = cross_entropy_step(eager_model, make_opt(eager_model.parameters()))
    compiled = jg.compile(cross_entropy_step(model, make_opt(model.parameters())))
    arrays = [p._data for p in model.parameters()]
    for _ in range(4):
        le, lc = eager(x, y), compiled(x, y)
        check(le._data, lc._data)
        for pe, pc in zip(eager_model.parameters(), model.parameters()):
            check(pe._data, pc._data)
    # the parameters' own arrays were updated (no new arrays), by the kernels themselves
    assert all(p._data is a for p, a in zip(model.parameters(), arrays))
    plan = newest_plan(compiled)
    n_params = len(list(model.parameters()))
    assert sum(len(m) for m in plan.inplace.values()) >= n_params
    # each parameter's kernel stores into the operand it reads (one array: a loop the
    # compiler vectorises), not into a second argument over the same memory (0-d state,
    # e.g. Adam's step, is passed by value and stored to an output of its own)
    aliased = sum(len(gr.desc.aliases) for gr in plan.group_runners)
    assert aliased >= n_params
    for gr in plan.group_runners:
        for k, m in gr.desc.aliases:
            assert f"a{m}[t] = " in gr.source and f"o{k}" not in gr.source


def test_read_only_parameter_raises_before_any_write():
    model = _model()
    opt = jg.optim.SGD(model.parameters(), lr=0.1)
    step = jg.compile(cross_entropy_step(model, opt))
    x, y = jg.randn(5, 6), jg.tensor([0, 1, 2, 1, 0])
    step(x, y)
    step(x, y)
    before = [p._data.copy() for p in model.parameters()]
    last = list(model.parameters())[-1]
    last._data.flags.writeable = False
    with pytest.raises(RuntimeError, match="not writable|read-only|writeable"):
        step(x, y)
    for p, b in zip(model.parameters(), before):  # nothing half-updated
        np.testing.assert_array_equal(p._data, b)


def test_strided_destination_falls_back_to_a_copy():
    w = jg.from_numpy(np.asfortranarray(np.random.default_rng(0).standard_normal(
        (4, 4), dtype=np.float32)))  # a tensor over an F-ordered array
    assert not w._data.flags.c_contiguous
    g = jg.randn(4, 4)

    def f(g):
        w.sub_(g * 0.5)
        return w.sum()

    want = (w._data - g._data * np.float32(0.5))
    step = jg.compile(f)
    step(g)
    np.testing.assert_array_equal(w._data, want)
    step(g)
    np.testing.assert_array_equal(w._data, want - g._data * np.float32(0.5))


def test_operand_sharing_memory_with_the_destination():
    a = jg.randn(5, 5)
    b = a.t()  # reads a transposed while a is written: in place would corrupt it

    def f():
        a.add_(b * 1.0)
        return a.sum()

    step = jg.compile(f)
    for _ in range(3):  # traced, then the plan twice
        ref = a._data + a._data.T
        step()
        np.testing.assert_array_equal(a._data, ref)


def test_aliased_store_descriptions_are_checked_and_rendered():
    from jitgrad.compiler.kernel_desc import KernelDesc, Line, Operand
    from jitgrad.compiler.render_cpu import render_cpu

    line = (Line("v0", "x1 - x0", "sub", "float32"),)
    ops = (Operand("float32", "full"), Operand("float32", "full"))
    d = KernelDesc(mode="flat", operands=ops, scalars=(), lines=line,
                   stores=(("v0", "float32"), ("x0", "float32")), aliases=((0, 1),))
    assert d.signature() == ["lo", "hi", "n", "a0", "a1", "o1"]
    src = render_cpu(d)
    assert "a1[t] = v0" in src and "o1[t] = x0" in src
    for bad in (((0, 1), (1, 1)), ((2, 0),)):  # an operand twice; no such store
        with pytest.raises(ValueError, match="alias"):
            KernelDesc(mode="flat", operands=ops, scalars=(), lines=line,
                       stores=d.stores, aliases=bad)
    with pytest.raises(ValueError, match="full operand"):
        KernelDesc(mode="flat", operands=(ops[0], Operand("float32", "row")), scalars=(),
                   lines=line, stores=d.stores, aliases=((0, 1),))


def test_view_of_the_old_value_read_after_the_write():
    """Eager mode reads the view after the write (it shares the memory): the trace reads
    it again from the base's new value (``Tracer._reread_view``: a gather at the view's
    flat positions), so the call compiles -- it was a graph break before stop 51."""
    w = jg.randn(3, 4)
    x = jg.randn(3, 4)
    eager_w = w.detach().clone()

    def f(g, w=w):
        wt = w.t()             # a view of the old w, read by the matmul after the update
        w.sub_(g)
        return x @ wt

    cf = jg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a graph break warns)
        for k in range(3):
            g = jg.full((3, 4), 0.5 * k)
            want = f(g, eager_w).numpy()
            np.testing.assert_array_equal(cf(g).numpy(), want)
            np.testing.assert_array_equal(w._data, eager_w._data)
    assert cf.stats["traces"] == 1


def test_views_read_after_their_base_was_written_equal_eager_with_gradients():
    def f1(x):
        b = x.clone()
        v = b[:, :2]
        b.mul_(2)
        return v * 3

    def f2(x):
        b = x.clone()
        v = b[::2, 1:]
        b[0].zero_()
        return v.exp() + b.t()[1:, ::2].t()

    def f3(x):
        b = x * 1.5
        v = b[1]
        b.sub_(x)
        w = v * 2
        b.mul_(0.5)
        return w + v

    def f4(x):  # the view itself returned: read again when the outputs are (after the call)
        b = x.clone()
        v = b[:, 1:]
        b.mul_(2)
        return v

    for f in (f1, f2, f3, f4):
        cf = jg.compile(f)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(2):
                x = jg.randn(4, 3, requires_grad=True)
                got, want = cf(x), f(x)
                np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
                ga, = jg.autograd.grad(got.sum(), x)
                ge, = jg.autograd.grad(want.sum(), x)
                np.testing.assert_array_equal(ga.numpy(), ge.numpy())
        assert cf.stats["traces"] == 1


def test_fresh_gradients_are_set_without_a_copy_and_never_shared():
    """A bias gradient (a column sum reshaped: a view of an array the call made) becomes
    ``.grad`` as it is (``compiler/effect_lines.py``); each call's is its own array. One the
    function also returns is that very ``.grad`` tensor, as in eager mode."""
    model = _model()
    step = jg.compile(cross_entropy_step(model, jg.optim.SGD(model.parameters(), lr=0.1)))
    x, y = jg.randn(5, 6), jg.tensor([0, 1, 2, 1, 0])
    for _ in range(3):
        step(x, y)
    src = inspect.getsource(newest_plan(step).run)
    # the two biases: no copy (unless a value is not row-major, as eager's accumulation)
    assert src.count("._grad = E_WRAP(x if x.flags.c_contiguous else x.copy())") == 2
    bias = model[0].bias
    first, kept = bias.grad, bias.grad.detach().numpy().copy()
    assert not first._data.flags.owndata
    step(x, y)
    assert bias.grad is not first and not np.shares_memory(bias.grad._data, first._data)
    np.testing.assert_array_equal(first._data, kept)  # the last call did not write into it
    grads = [p.grad._data for p in model.parameters()]
    for i, a in enumerate(grads):
        assert not any(np.shares_memory(a, b) for b in grads[i + 1:])

    b = jg.zeros(4, requires_grad=True)

    def f(x):
        b.grad = None
        (x * b).sum(0).sum().backward()  # b's gradient: a column sum of x, reshaped
        return b.grad

    g = jg.compile(f)
    xs = jg.randn(3, 4)
    for _ in range(3):
        out = g(xs)
        assert out is b.grad
        np.testing.assert_allclose(b.grad._data, xs._data.sum(0), rtol=1e-6)
    assert "E_WRAP(x if x.flags.c_contiguous else x.copy())" not in inspect.getsource(
        newest_plan(g).run)
