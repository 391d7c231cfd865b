"""Fused kernels store a compiled step's in-place updates straight into their destination
(``compiler/inplace_writes.py``) where nothing needs the old contents: the same bits as
eager mode, the caller's arrays kept (no new array, no copy-back), and the copying path
wherever writing in place could change a result."""

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

    ref = a._data + a._data.T
    jg.compile(f)()
    np.testing.assert_array_equal(a._data, ref)


def test_view_of_the_old_value_read_after_the_write():
    """Eager mode reads the view after the write (it shares the memory): a trace, which
    recorded it as a view of the old value, stops there and the call runs eagerly."""
    w = jg.randn(3, 4)
    x = jg.randn(3, 4)

    def f(g):
        wt = w.t()             # a view of the old w, read by the matmul after the update
        w.sub_(g)
        return x @ wt

    g = jg.ones(3, 4)
    eager_w = w.detach().clone()
    with jg.no_grad():
        wt = eager_w.t()
        eager_w.sub_(g)
        want = (x @ wt).numpy()
    with pytest.warns(UserWarning, match="a view is read after the tensor it views"):
        got = jg.compile(f)(g).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(w._data, eager_w._data)
